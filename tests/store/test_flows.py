"""FlowStore against a real Redis: one document per switch, replaced whole, filtered by dpid."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import redis

from controller.store.client import connect
from controller.store.errors import StoreUnavailableError
from controller.store.flows import FlowRecord, FlowStore

FLOW = FlowRecord(
    switch="000000000000000a",
    eth_type=0x0800,
    ip_proto=6,
    src="10.0.0.1",
    dst="10.0.0.2",
    src_port=40000,
    dst_port=8000,
    traffic_class="inference",
    why="rule:triton",
    bytes=1500,
    rate_bps=12_000.0,
    first_seen=1000.0,
    last_seen=1001.5,
)


@pytest.fixture
def store(redis_client: redis.Redis) -> FlowStore:
    return FlowStore(redis_client)


def test_a_record_round_trips_with_class_spelled_as_in_the_policy() -> None:
    data = FLOW.to_dict()
    assert data["class"] == "inference"
    assert "traffic_class" not in data
    assert FlowRecord.from_dict(data) == FLOW


def test_published_flows_read_back(store: FlowStore, redis_client: redis.Redis) -> None:
    other = replace(FLOW, src_port=40001, bytes=10)
    store.publish(0xA, [FLOW, other], now=1002.0)
    assert store.all() == [FLOW, other]
    raw = json.loads(redis_client.hget("flowlane:flows", "000000000000000a"))  # type: ignore[arg-type]
    assert raw["updated_at"] == 1002.0


def test_a_publish_replaces_the_switch_view(store: FlowStore) -> None:
    store.publish(0xA, [FLOW])
    store.publish(0xA, [replace(FLOW, bytes=9000)])
    assert [flow.bytes for flow in store.all()] == [9000]
    store.publish(0xA, [])
    assert store.all() == []


def test_all_filters_by_switch(store: FlowStore) -> None:
    b = replace(FLOW, switch="000000000000000b")
    store.publish(0xA, [FLOW])
    store.publish(0xB, [b])
    assert sorted(f.switch for f in store.all()) == ["000000000000000a", "000000000000000b"]
    assert store.all({"000000000000000b"}) == [b]
    assert store.all({"000000000000000c"}) == []
    assert store.all(set()) == []


def test_remove_forgets_one_switch(store: FlowStore) -> None:
    store.publish(0xA, [FLOW])
    store.publish(0xB, [replace(FLOW, switch="000000000000000b")])
    store.remove(0xA)
    store.remove(0xC)  # unknown: nothing to do
    assert [f.switch for f in store.all()] == ["000000000000000b"]


def test_unreachable_redis_is_store_unavailable(unused_port: int) -> None:
    client = connect(f"redis://127.0.0.1:{unused_port}/0")
    store = FlowStore(client)
    for call in (lambda: store.publish(1, [FLOW]), lambda: store.remove(1), store.all):
        with pytest.raises(StoreUnavailableError, match=r"^Redis unavailable: "):
            call()
    client.close()
