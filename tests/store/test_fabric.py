"""FabricStore against a real Redis: one document, replaced whole, kept without a TTL."""

from __future__ import annotations

import json

import pytest
import redis

from controller.fabric.model import Host, Link, PortRef, Topology
from controller.fabric.snapshot import FabricSnapshot, build_snapshot
from controller.store.client import connect
from controller.store.errors import StoreUnavailableError
from controller.store.fabric import FabricStore

A, B = PortRef(1, 3), PortRef(2, 3)
TOPOLOGY = Topology(
    switches=frozenset({1, 2}),
    links=frozenset({Link(A, B), Link(B, A)}),
    hosts=(Host(0x1, PortRef(1, 1), 0x0A000001),),
)


def snapshot(now: float, controller: str = "ctl-1") -> FabricSnapshot:
    return build_snapshot(controller, now, TOPOLOGY, {A: "s1-eth3"}, {Link(A, B): 5e8}, [])


@pytest.fixture
def store(redis_client: redis.Redis) -> FabricStore:
    return FabricStore(redis_client)


def test_nothing_published_reads_none(store: FabricStore) -> None:
    assert store.read() is None


def test_a_published_snapshot_reads_back(store: FabricStore, redis_client: redis.Redis) -> None:
    sent = snapshot(1000.0)
    store.publish(sent)
    assert store.read() == sent
    raw = json.loads(redis_client.get("flowlane:fabric"))  # type: ignore[arg-type]
    assert raw["updated"] == 1000.0
    assert raw["links"][0]["src"]["dpid_hex"] == "0000000000000001"


def test_the_latest_publication_wins_and_never_expires(
    store: FabricStore, redis_client: redis.Redis
) -> None:
    store.publish(snapshot(1000.0, "ctl-1"))
    store.publish(snapshot(1001.0, "ctl-2"))
    read = store.read()
    assert read is not None
    assert (read.controller, read.updated) == ("ctl-2", 1001.0)
    assert redis_client.ttl("flowlane:fabric") == -1  # kept: readers judge age by `updated`


def test_clear_forgets_it(store: FabricStore) -> None:
    store.publish(snapshot(1.0))
    store.clear()
    assert store.read() is None


def test_prefixes_keep_fabrics_apart(redis_client: redis.Redis) -> None:
    FabricStore(redis_client, "lab").publish(snapshot(1.0))
    assert FabricStore(redis_client).read() is None
    assert FabricStore(redis_client, "lab").read() == snapshot(1.0)


def test_unreachable_redis_is_store_unavailable(unused_port: int) -> None:
    client = connect(f"redis://127.0.0.1:{unused_port}/0")
    store = FabricStore(client)
    for call in (lambda: store.publish(snapshot(1.0)), store.read, store.clear):
        with pytest.raises(StoreUnavailableError, match=r"^Redis unavailable: "):
            call()
    client.close()
