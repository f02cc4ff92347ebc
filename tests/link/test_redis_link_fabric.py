"""RedisLink's fabric observer methods: publish, append events, and never hold the caller."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
import redis
import yaml

from controller.fabric.model import Host, Link, PortRef, Topology
from controller.fabric.snapshot import FabricEvent, FabricSnapshot, build_snapshot, topology_events
from controller.link.redis_link import RedisLink
from controller.policy.load import parse_policy
from controller.store.client import connect
from controller.store.events import EventStore
from controller.store.fabric import FabricStore
from tests.support.redis_server import StartRedis

DOCUMENT = yaml.safe_load(
    """
classes:
  inference: {priority: 0, dscp: 46, min_rate: 20%}
  training:  {priority: 1, dscp: 26, min_rate: 80%}
default_class: inference
"""
)
A, B = PortRef(1, 3), PortRef(2, 3)
TOPOLOGY = Topology(
    switches=frozenset({1, 2}),
    links=frozenset({Link(A, B), Link(B, A)}),
    hosts=(Host(0x1, PortRef(1, 1), 0x0A000001),),
)
H1_PORT = "0000000000000001:1"
SNAPSHOT = build_snapshot("test-controller", 1000.0, TOPOLOGY, {A: "s1-eth3"}, {}, [])


@pytest.fixture
def link(redis_url: str, redis_client: redis.Redis) -> Iterator[RedisLink]:
    redis_link = RedisLink(redis_url, "test-controller")
    yield redis_link
    redis_link.stop()


@pytest.fixture
def down_link(unused_port: int) -> RedisLink:
    """A link whose Redis never answered: bootstrap fell back to the file and noted the outage."""
    redis_link = RedisLink(f"redis://127.0.0.1:{unused_port}/0", "test-controller")
    redis_link.bootstrap(parse_policy(DOCUMENT), DOCUMENT)
    return redis_link


def test_the_snapshot_is_published(link: RedisLink, redis_client: redis.Redis) -> None:
    link.fabric_changed(SNAPSHOT)
    assert link.drain()
    assert FabricStore(redis_client).read() == SNAPSHOT
    later = SNAPSHOT.model_copy(update={"updated": 1001.0})
    link.fabric_changed(later)
    assert link.drain()
    assert FabricStore(redis_client).read() == later


def test_each_event_is_appended_with_its_kind(link: RedisLink, redis_client: redis.Redis) -> None:
    events = [
        *topology_events(TOPOLOGY, TOPOLOGY.without_switch(1)),
        FabricEvent("placement", {"op": "pinned", "flow": "tcp 10.0.0.1:1 > 10.0.0.2:2"}),
    ]
    link.fabric_events(events)
    link.fabric_events([])
    assert link.drain()
    stored = EventStore(redis_client).read()
    assert [(event.kind, event.data) for event in stored] == [
        ("link", {"op": "down", "a": str(A), "b": str(B)}),
        ("host", {"op": "gone", "mac": "00:00:00:00:00:01", "ipv4": "10.0.0.1", "at": H1_PORT}),
        ("placement", {"op": "pinned", "flow": "tcp 10.0.0.1:1 > 10.0.0.2:2"}),
    ]


def test_redis_down_costs_the_caller_nothing(unused_port: int) -> None:
    """Nothing waits on the unreachable Redis: the writes are held for later."""
    redis_link = RedisLink(f"redis://127.0.0.1:{unused_port}/0", "test-controller")
    started = time.monotonic()
    for _ in range(50):
        redis_link.fabric_changed(SNAPSHOT)
        redis_link.fabric_events([FabricEvent("link", {"op": "up", "a": "x", "b": "y"})])
    assert time.monotonic() - started < 0.5
    assert not redis_link.drain(timeout_s=0.5)
    # one snapshot (the latest replaces the others) and every event
    assert 50 <= redis_link.pending_writes <= 51
    redis_link.stop()


def test_writes_held_through_an_outage_arrive_in_order(start_redis: StartRedis) -> None:
    redis_server = start_redis(None)
    link = RedisLink(redis_server.url, "test-controller")
    redis_server.stop()
    try:
        link.fabric_changed(SNAPSHOT)
        link.fabric_events(
            [FabricEvent("link", {"op": "up", "a": str(n), "b": "y"}) for n in range(3)]
        )
        later = SNAPSHOT.model_copy(update={"updated": 1001.0})
        link.fabric_changed(later)
        assert not link.drain(timeout_s=0.3)
    finally:
        redis_server.start()
    assert link.drain(timeout_s=10)
    client = connect(redis_server.url)
    assert FabricStore(client).read() == later
    assert [event.data["a"] for event in EventStore(client).read()] == ["0", "1", "2"]
    link.stop()


def test_a_redis_error_is_logged_not_raised(
    link: RedisLink, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse(*_: object) -> None:
        raise redis.ResponseError("OOM command not allowed when used memory > 'maxmemory'")

    monkeypatch.setattr(link.fabric, "publish", refuse)
    monkeypatch.setattr(link.events, "append", refuse)
    caplog.set_level(logging.WARNING, "flowlane.redis")
    link.fabric_changed(SNAPSHOT)
    link.fabric_events([FabricEvent("link", {"op": "up", "a": "x", "b": "y"})])
    assert link.drain()  # refused writes are dropped, not retried for ever
    assert "fabric snapshot not written: OOM" in caplog.text
    assert "link event not written: OOM" in caplog.text


def test_the_snapshot_type_is_what_the_store_keeps() -> None:
    assert FabricSnapshot.model_validate_json(SNAPSHOT.model_dump_json()) == SNAPSHOT
