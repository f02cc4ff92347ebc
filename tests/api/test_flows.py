"""GET /v1/flows: live switches only, filtered, largest first; dpids in hex or decimal."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from controller.api.routes.flows import parse_dpid, select_flows
from controller.store.flows import FlowRecord, FlowStore

FLOW = FlowRecord(
    switch="000000000000002a",
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
def flows(redis_client: redis.Redis) -> FlowStore:
    return FlowStore(redis_client)


def flow(switch: int = 0x2A, **changes: Any) -> FlowRecord:
    return replace(FLOW, switch=f"{switch:016x}", **changes)


@pytest.fixture
def fabric(report_switch: Any, flows: FlowStore) -> dict[str, FlowRecord]:
    """Two live switches (0x2a, 0x10) and one of a controller that stopped beating (0x3)."""
    report_switch(0x2A)
    report_switch(0x10)
    report_switch(0x3, controller="ctl-dead", beat=1.0)
    published = {
        "small": flow(0x2A, src_port=1, bytes=100),
        "big": flow(0x2A, src_port=2, bytes=9_000_000, traffic_class="training", why="detected"),
        "middle": flow(0x10, src_port=3, bytes=50_000, traffic_class="training", why="job:t"),
        "dead": flow(0x3, src_port=4, bytes=10**12),
    }
    flows.publish(0x2A, [published["small"], published["big"]])
    flows.publish(0x10, [published["middle"]])
    flows.publish(0x3, [published["dead"]])
    flows.publish(0x77, [flow(0x77, bytes=10**12)])  # never reported: no live controller
    return published


def ports(response: Any) -> list[int]:
    assert response.status_code == 200, response.text
    return [f["src_port"] for f in response.json()["flows"]]


def test_no_flows(client: TestClient) -> None:
    assert client.get("/v1/flows").json() == {"flows": []}


def test_live_switches_only_largest_first(client: TestClient, fabric: dict[str, Any]) -> None:
    response = client.get("/v1/flows")
    assert ports(response) == [2, 3, 1]
    assert response.json()["flows"][0] == {
        "switch": "000000000000002a",
        "eth_type": 2048,
        "ip_proto": 6,
        "src": "10.0.0.1",
        "dst": "10.0.0.2",
        "src_port": 2,
        "dst_port": 8000,
        "class": "training",
        "why": "detected",
        "bytes": 9_000_000,
        "rate_bps": 12_000.0,
        "first_seen": 1000.0,
        "last_seen": 1001.5,
    }


def test_filters(client: TestClient, fabric: dict[str, Any]) -> None:
    assert ports(client.get("/v1/flows", params={"class": "training"})) == [2, 3]
    assert ports(client.get("/v1/flows", params={"class": "best-effort"})) == []
    assert ports(client.get("/v1/flows", params={"min_bytes": 50_000})) == [2, 3]
    assert ports(client.get("/v1/flows", params={"min_bytes": 50_001})) == [2]
    assert ports(client.get("/v1/flows", params={"limit": 2})) == [2, 3]
    both = {"class": "training", "switch": "2a", "min_bytes": 1}
    assert ports(client.get("/v1/flows", params=both)) == [2]


@pytest.mark.parametrize(
    ("switch", "expected"),
    [
        ("000000000000002a", [2, 1]),
        ("000000000000002A", [2, 1]),
        ("2a", [2, 1]),
        ("0x2A", [2, 1]),
        ("42", [2, 1]),  # decimal
        ("16", [3]),  # decimal: 0x10
        ("0x10", [3]),
        ("0000000000000010", [3]),  # 16 digits: hex
        ("10", []),  # decimal 10: no such switch
        ("3", []),  # its controller stopped beating
        ("119", []),  # 0x77: never reported
    ],
)
def test_switch_filter(
    client: TestClient, fabric: dict[str, Any], switch: str, expected: list[int]
) -> None:
    assert ports(client.get("/v1/flows", params={"switch": switch})) == expected


@pytest.mark.parametrize(
    ("query", "path"),
    [
        ({"switch": "zz"}, "query.switch"),
        ({"switch": "00000000000000002a"}, "query.switch"),  # 18 characters with a letter
        ({"switch": "0x"}, "query.switch"),
        ({"switch": "\u0664\u0662"}, "query.switch"),  # Arabic-Indic 42
        ({"switch": "99999999999999999999"}, "query.switch"),  # decimal above 2^64-1
        ({"class": "no spaces"}, "query.class"),
        ({"min_bytes": -1}, "query.min_bytes"),
        ({"min_bytes": "x"}, "query.min_bytes"),
        ({"limit": 0}, "query.limit"),
        ({"limit": 100_001}, "query.limit"),
    ],
)
def test_bad_queries_are_422_with_their_path(
    client: TestClient, query: dict[str, Any], path: str
) -> None:
    response = client.get("/v1/flows", params=query)
    assert response.status_code == 422
    assert [e["path"] for e in response.json()["errors"]] == [path]


@pytest.mark.parametrize(
    ("text", "dpid"),
    [
        ("000000000000002a", 0x2A),
        ("FFFFFFFFFFFFFFFF", 2**64 - 1),
        ("0x2a", 0x2A),
        ("2a", 0x2A),
        ("42", 42),
        ("0000000000000042", 0x42),
        ("18446744073709551615", 2**64 - 1),
        ("0", 0),
    ],
)
def test_parse_dpid(text: str, dpid: int) -> None:
    assert parse_dpid(text) == dpid


@pytest.mark.parametrize(
    "text", ["", "0x", "g1", "18446744073709551616", "0x10000000000000000", "\u0664\u0662"]
)
def test_parse_dpid_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="dpid"):
        parse_dpid(text)


def test_select_flows_orders_ties_readably() -> None:
    records = [flow(0x2, src="10.0.0.9"), flow(0x1, src="10.0.0.9"), flow(0x1, src="10.0.0.1")]
    assert [(f.switch[-1], f.src) for f in select_flows(records)] == [
        ("1", "10.0.0.1"),
        ("1", "10.0.0.9"),
        ("2", "10.0.0.9"),
    ]
