"""One way to open Redis, so every process fails the same clear way when it is not there.

``connect`` takes every store URL (``controller/store/url.py``): a plain Redis, or the
primary that Redis Sentinels watch, followed through a failover.  The client it returns
carries the URL's ``Durability``; ``acknowledged`` runs a store write so that, when the URL
asks for replicas, the write is on them before the caller hears it succeeded.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Final, ParamSpec, TypeVar

import redis
from redis.commands.core import Script
from redis.sentinel import Sentinel, SentinelManagedConnection

from controller.store.errors import NotReplicatedError, StoreUnavailableError
from controller.store.retry import DeadlineRetry
from controller.store.url import Durability, SentinelTarget, parse_store_url

P = ParamSpec("P")
R = TypeVar("R")

SOCKET_TIMEOUT_S: Final = 5.0
SENTINEL_TIMEOUT_S: Final = 1.0
"""A Sentinel that does not answer within this is skipped for the next one."""


class StoreClient(redis.Redis):
    """A ``redis.Redis`` that knows what a write must reach before it is acknowledged."""

    durability: Durability = Durability()
    sentinels: Sentinel | None = None
    """The Sentinels' clients, closed with this one (None: a plain Redis URL)."""

    def close(self) -> None:
        super().close()
        if self.sentinels is not None:
            self.sentinels.close()


def connect(url: str, *, retry_s: float | None = None) -> StoreClient:
    """A client with short timeouts: a dead Redis must turn into a 503, not a hung request.

    ``retry_s`` overrides the URL's (a one-shot "does it answer?" wants 0).  No I/O: the
    client connects on first use.  ``StoreUrlError`` (a ``ValueError``) for a bad URL.
    """
    parsed = parse_store_url(url)
    retry = parsed.retry_s if retry_s is None else retry_s
    # A WAIT blocks its reply for up to wait_ms: the socket must outlast it.
    timeout = max(SOCKET_TIMEOUT_S, parsed.durability.wait_ms / 1000 + 2)
    options: dict[str, Any] = {
        "decode_responses": True,
        "socket_connect_timeout": 2,
        "socket_timeout": timeout,
        "health_check_interval": 10,
    }
    if retry is not None:
        options["retry"] = DeadlineRetry(retry)
    client: StoreClient
    if parsed.sentinel is not None:
        client = _sentinel_client(parsed.sentinel, options)
    else:
        assert parsed.direct is not None
        direct = StoreClient.from_url(parsed.direct, retry_on_timeout=False, **options)
        assert isinstance(direct, StoreClient)
        client = direct
    client.durability = parsed.durability
    return client


class FollowingConnection(SentinelManagedConnection):
    """A connection to whatever node the Sentinels call the primary *now*.

    redis-py 8.2 reconnects a dropped connection inside a command's retry from
    ``send_packed_command``, straight to the address it had, without asking the Sentinels
    again: a command in flight when the primary died would retry the dead address until it
    gave up.  Reconnecting through ``connect`` asks them each time.
    """

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if not self._sock:
            self.connect()  # type: ignore[no-untyped-call]  # redis-py: untyped
        super().send_packed_command(command, check_health)  # type: ignore[no-untyped-call]


def _sentinel_client(target: SentinelTarget, options: dict[str, Any]) -> StoreClient:
    sentinel = Sentinel(
        target.sentinels,
        sentinel_kwargs={
            "socket_connect_timeout": SENTINEL_TIMEOUT_S,
            "socket_timeout": SENTINEL_TIMEOUT_S,
            "username": target.sentinel_username,
            "password": target.sentinel_password,
            "decode_responses": True,
        },
    )
    client = sentinel.master_for(
        target.master,
        redis_class=StoreClient,
        connection_class=FollowingConnection,
        db=target.db,
        username=target.username,
        password=target.password,
        **options,
    )
    assert isinstance(client, StoreClient)
    client.sentinels = sentinel
    return client


def _source(script: Script) -> str:
    source = script.script
    return bytes(source).decode() if not isinstance(source, str) else source


def durability_of(client: redis.Redis) -> Durability:
    """The client's ``Durability`` (none for a client not made by ``connect``)."""
    return client.durability if isinstance(client, StoreClient) else Durability()


def acknowledged(
    client: redis.Redis, script: Script, keys: Sequence[str], args: Sequence[Any]
) -> Any:
    """Run a write ``script`` and answer its reply once the write is as durable as the
    client's URL asks: on ``min_replicas`` replicas (``NotReplicatedError`` otherwise).

    The script and the ``WAIT`` go in one pipeline, so they run on one connection: ``WAIT``
    counts the replicas that have everything *that connection* wrote.  Were the pipeline
    retried after a failover, both run again on the new primary, and the ``WAIT`` there is
    about the write there (a ``WAIT`` alone, retried on another server, could count replicas
    that never saw the write).  ``EVAL`` rather than ``EVALSHA``: a new primary may not have
    the script cached.
    """
    durability = durability_of(client)
    if not durability.waits:
        return script(keys=keys, args=args)
    with client.pipeline(transaction=False) as pipe:
        pipe.eval(_source(script), len(keys), *keys, *args)
        pipe.wait(durability.min_replicas, durability.wait_ms)
        reply, replicas = pipe.execute()
    if int(replicas) < durability.min_replicas:
        raise NotReplicatedError(int(replicas), durability.min_replicas, durability.wait_ms)
    return reply


def translate_errors(function: Callable[P, R]) -> Callable[P, R]:
    """Turn redis-py's connection errors into ``StoreUnavailableError``."""

    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return function(*args, **kwargs)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise StoreUnavailableError(f"Redis unavailable: {exc}") from exc

    return wrapper


def text(value: bytes | str) -> str:
    """redis-py is typed for both reply kinds; our clients always decode responses."""
    return value.decode() if isinstance(value, bytes) else value
