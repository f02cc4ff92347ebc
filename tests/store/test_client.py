"""An unreachable Redis is ``StoreUnavailableError`` on every store call, quickly."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from controller.store.client import connect
from controller.store.errors import StoreUnavailableError
from controller.store.policies import PolicyStore
from controller.store.switches import SwitchReport, SwitchStore


@pytest.fixture
def dead_client(unused_port: int) -> Iterator[redis.Redis]:
    """A client of a port nobody listens on."""
    client = connect(f"redis://127.0.0.1:{unused_port}/0")
    yield client
    client.close()


CALLS: dict[str, Callable[[PolicyStore, SwitchStore], Any]] = {
    "active_version": lambda p, s: p.active_version(),
    "active": lambda p, s: p.active(),
    "get": lambda p, s: p.get(1),
    "history": lambda p, s: p.history(),
    "put": lambda p, s: p.put({"classes": {}}, author="a"),
    "rollback": lambda p, s: p.rollback(1, author="a"),
    "report": lambda p, s: s.report(SwitchReport(1, "c", 0.0, None)),
    "remove": lambda p, s: s.remove(1),
    "remove_controller": lambda p, s: s.remove_controller("c"),
    "all": lambda p, s: s.all(),
    "applied": lambda p, s: s.applied(),
    "heartbeat": lambda p, s: s.heartbeat("c"),
    "live_controllers": lambda p, s: s.live_controllers(10),
    "live_reports": lambda p, s: s.live_reports(10),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_unreachable_redis_is_store_unavailable(
    dead_client: redis.Redis, call: Callable[[PolicyStore, SwitchStore], Any]
) -> None:
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError, match=r"^Redis unavailable: .*onnection refused"):
        call(PolicyStore(dead_client), SwitchStore(dead_client))
    assert time.monotonic() - started < 3


def test_a_store_recovers_when_redis_comes_back(
    unused_port: int, start_redis: Callable[[int | None], Any]
) -> None:
    client = connect(f"redis://127.0.0.1:{unused_port}/0")
    store = PolicyStore(client)
    with pytest.raises(StoreUnavailableError):
        store.active_version()
    start_redis(unused_port)
    assert store.active_version() is None
    assert store.put({"classes": {}}, author="a").version == 1
    client.close()


def test_a_store_survives_a_redis_restart(start_redis: Callable[[int | None], Any]) -> None:
    """The restarted server has lost the Lua script and the pooled connections are dead."""
    server = start_redis(None)
    client = connect(server.url)
    store = PolicyStore(client)
    assert store.put({"classes": {}}, author="a").version == 1
    server.stop()
    with pytest.raises(StoreUnavailableError):
        store.active_version()
    server.start()
    assert store.active_version() is None  # persistence is off: a fresh, empty server
    assert store.put({"classes": {}}, author="a").version == 1
    client.close()
