"""Whether an instance's process is still there, as Redis sees its connections.

A lease alone tells a dead process from a live one only by its TTL, and a TTL
short enough for a fast takeover (hundreds of ms) would also expire under a
garbage collection or a CPU stall of a live process on a busy machine.  What a
killed or crashed process leaves at once is a closed TCP connection: the kernel
closes its sockets as it exits, and Redis drops the client.  So every instance's
lease connections carry a name (``CLIENT SETNAME``, set by redis-py on every
(re)connect) made of its lease token, and every instance looks at ``CLIENT LIST``
every ``WATCH_INTERVAL_S``: a current lease whose token no connection carries is
ended then (``Leases.watch``), and its switches taken at once.  A paused
(``SIGSTOP``) or slow process keeps its connections, so only its TTL ends its
lease.

When a lease is judged, and why (the ``_WATCH`` script in ``leases``):

- only if the lease was renewed on *this* Redis server run (``run_id`` recorded
  at each renewal): after a Redis restart or a Sentinel failover nobody's
  connection is there until it reconnects, and that must not end everyone's
  lease; a lease is judged again once its instance renewed on the new server;
- only if it was renewed *before* the ``CLIENT LIST`` was taken: a renewal came
  through a named connection, so a connection missing from a later list was
  closed since (a reconnect after the list shows its renewal as newer);
- the end is a compare-and-delete in one script, so a lease renewed meanwhile is
  not touched, and the take that follows is fenced as any other.

A host that vanishes without closing its connections (power, network) keeps its
connection open in Redis's eyes until TCP gives up: its lease expires by TTL.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import redis
from redis.sentinel import SentinelConnectionPool

from controller.store.client import StoreClient

NAME_PREFIX: Final = "flowlane-lease-"
WATCH_INTERVAL_S: Final = 0.1
"""How often every instance looks at Redis's connections: half of it, on average, is the
wait before a killed instance's switches are taken."""


def presence_name(token: str) -> str:
    """The connection name of the process holding lease ``token`` (no spaces: a token is
    hex)."""
    return f"{NAME_PREFIX}{token}"


def present_tokens(clients: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """The lease tokens of the named connections in a ``CLIENT LIST`` reply."""
    found = set()
    for client in clients:
        name = str(client.get("name") or "")
        if name.startswith(NAME_PREFIX):
            found.add(name.removeprefix(NAME_PREFIX))
    return frozenset(found)


def named_client(client: redis.Redis, name: str) -> redis.Redis:
    """A client like ``client`` (same server or Sentinels, credentials, timeouts, retries,
    durability) whose every connection is named ``name``: a pool of its own, so the
    caller's connections keep their names."""
    pool = client.connection_pool
    kwargs = {k: v for k, v in pool.connection_kwargs.items() if k != "connection_pool"}
    kwargs["client_name"] = name
    named_pool: redis.ConnectionPool
    if isinstance(pool, SentinelConnectionPool):
        named_pool = SentinelConnectionPool(  # type: ignore[no-untyped-call]  # redis-py
            pool.service_name,
            pool.sentinel_manager,
            connection_class=pool.connection_class,
            is_master=pool.is_master,
            check_connection=pool.check_connection,
            **kwargs,
        )
    else:
        named_pool = redis.ConnectionPool(connection_class=pool.connection_class, **kwargs)
    named = type(client)(connection_pool=named_pool)
    if isinstance(client, StoreClient) and isinstance(named, StoreClient):
        named.durability = client.durability
    return named
