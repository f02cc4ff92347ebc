"""`GET /v1/topology` and `GET /v1/paths` on the test Redis, from a published fabric snapshot."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from controller.api.routes.fabric import parse_host_address
from controller.fabric.model import Host, Link, PortRef, Topology
from controller.fabric.snapshot import FabricSnapshot, build_snapshot, pinned_view
from controller.flowid import FlowId
from controller.store.fabric import FabricStore

LEAF1, LEAF2, LEAF3, SPINE1, SPINE2 = 1, 2, 3, 11, 12
H1 = Host(0x1, PortRef(LEAF1, 1), 0x0A000001)
H2 = Host(0x2, PortRef(LEAF2, 1), 0x0A000002)
H3 = Host(0x3, PortRef(LEAF1, 2), 0x0A000003)
H4 = Host(0x4, PortRef(LEAF3, 1), 0x0A000004)  # its leaf has no uplink
CABLES = (
    (PortRef(LEAF1, 3), PortRef(SPINE1, 1)),
    (PortRef(LEAF1, 4), PortRef(SPINE2, 1)),
    (PortRef(LEAF2, 3), PortRef(SPINE1, 2)),
    (PortRef(LEAF2, 4), PortRef(SPINE2, 2)),
)
TOPOLOGY = Topology(
    switches=frozenset({LEAF1, LEAF2, LEAF3, SPINE1, SPINE2}),
    links=frozenset(link for a, b in CABLES for link in (Link(a, b), Link(b, a))),
    hosts=(H1, H2, H3, H4),
)
NAMES = {
    PortRef(dpid, port): f"s{dpid}-eth{port}"
    for dpid, port in ((1, 1), (1, 2), (1, 3), (1, 4), (2, 1), (2, 3), (2, 4), (11, 2), (12, 2))
}


def elephant(src: int, dst: int, path: tuple[tuple[int, int], ...]) -> Any:
    return pinned_view(
        FlowId(0x0800, 6, src, dst, 40000, 5201),
        traffic_class="training",
        rate_bps=9e8,
        demand_bps=1e9,
        since=990.0,
        path=path,
        port_names=NAMES,
    )


FORWARD = elephant(H1.ipv4 or 0, H2.ipv4 or 0, ((LEAF1, 3), (SPINE1, 2), (LEAF2, 1)))
BACKWARD = elephant(H2.ipv4 or 0, H1.ipv4 or 0, ((LEAF2, 4), (SPINE2, 1), (LEAF1, 1)))
UNRELATED = elephant(H3.ipv4 or 0, H2.ipv4 or 0, ((LEAF1, 4), (SPINE2, 2), (LEAF2, 1)))


@pytest.fixture
def snapshot(redis_client: redis.Redis) -> FabricSnapshot:
    published = build_snapshot(
        "ctl-1",
        1000.0,
        TOPOLOGY,
        NAMES,
        {Link(PortRef(LEAF1, 3), PortRef(SPINE1, 1)): 9e8},
        [FORWARD, BACKWARD, UNRELATED],
    )
    FabricStore(redis_client).publish(published)
    return published


def hops(path: list[dict[str, Any]]) -> list[tuple[int, int, str | None]]:
    return [(hop["dpid"], hop["port"], hop["name"]) for hop in path]


# --------------------------------------------------------------------------------------------
# /v1/topology
# --------------------------------------------------------------------------------------------


def test_no_snapshot_is_404_saying_why(client: TestClient) -> None:
    for response in (
        client.get("/v1/topology"),
        client.get("/v1/paths", params={"src": "10.0.0.1", "dst": "10.0.0.2"}),
    ):
        assert response.status_code == 404
        assert response.json()["detail"].startswith("no fabric snapshot: no controller has")


def test_the_topology_is_the_published_snapshot(
    client: TestClient, snapshot: FabricSnapshot
) -> None:
    response = client.get("/v1/topology")
    assert response.status_code == 200
    body = response.json()
    assert body == snapshot.model_dump(mode="json")
    assert body["switches"] == [1, 2, 3, 11, 12]
    [loaded] = [link for link in body["links"] if link["tx_bps"]]
    assert loaded["src"] == {
        "dpid": 1,
        "dpid_hex": "0000000000000001",
        "port": 3,
        "name": "s1-eth3",
    }
    assert loaded["utilization"] == pytest.approx(0.09)


# --------------------------------------------------------------------------------------------
# /v1/paths
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        ("10.0.0.1", "10.0.0.2"),
        ("00:00:00:00:00:01", "00-00-00-00-00-02"),
        ("10.0.0.1", "00:00:00:00:00:02"),
    ],
)
def test_every_shortest_path_between_two_leaves(
    client: TestClient, snapshot: FabricSnapshot, src: str, dst: str
) -> None:
    response = client.get("/v1/paths", params={"src": src, "dst": dst})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["src"]["mac"] == "00:00:00:00:00:01"
    assert body["src"]["ipv4"] == "10.0.0.1"
    assert body["src"]["at"]["name"] == "s1-eth1"
    assert body["dst"]["at"] == {
        "dpid": 2,
        "dpid_hex": "0000000000000002",
        "port": 1,
        "name": "s2-eth1",
    }
    assert [hops(path) for path in body["ecmp"]] == [
        [(1, 3, "s1-eth3"), (11, 2, "s11-eth2"), (2, 1, "s2-eth1")],
        [(1, 4, "s1-eth4"), (12, 2, "s12-eth2"), (2, 1, "s2-eth1")],
    ]


def test_pinned_flows_of_the_pair_in_either_direction(
    client: TestClient, snapshot: FabricSnapshot
) -> None:
    body = client.get("/v1/paths", params={"src": "10.0.0.2", "dst": "10.0.0.1"}).json()
    assert [pinned["flow"] for pinned in body["pinned"]] == [
        "tcp 10.0.0.1:40000 > 10.0.0.2:5201",
        "tcp 10.0.0.2:40000 > 10.0.0.1:5201",
    ]
    assert hops(body["pinned"][0]["path"]) == [
        (1, 3, "s1-eth3"),
        (11, 2, "s11-eth2"),
        (2, 1, "s2-eth1"),
    ]
    assert body["pinned"][0]["traffic_class"] == "training"


def test_hosts_on_one_switch_have_one_path_out_of_its_port(
    client: TestClient, snapshot: FabricSnapshot
) -> None:
    body = client.get("/v1/paths", params={"src": "10.0.0.1", "dst": "10.0.0.3"}).json()
    assert [hops(path) for path in body["ecmp"]] == [[(1, 2, "s1-eth2")]]
    assert body["pinned"] == []


def test_disconnected_hosts_have_no_path(client: TestClient, snapshot: FabricSnapshot) -> None:
    response = client.get("/v1/paths", params={"src": "10.0.0.1", "dst": "10.0.0.4"})
    assert response.status_code == 200
    assert response.json()["ecmp"] == []


def test_an_unknown_host_is_404_naming_it(client: TestClient, snapshot: FabricSnapshot) -> None:
    response = client.get("/v1/paths", params={"src": "10.0.0.1", "dst": "10.0.0.99"})
    assert response.status_code == 404
    assert response.json() == {
        "detail": "dst: no host with IPv4 10.0.0.99 is known to controller ctl-1"
    }
    response = client.get("/v1/paths", params={"src": "00:00:00:00:00:09", "dst": "10.0.0.98"})
    detail = response.json()["detail"]
    assert detail.startswith("src: no host with MAC 00:00:00:00:00:09 is known")
    assert "; dst: no host with IPv4 10.0.0.98 is known" in detail


def test_malformed_addresses_are_422_naming_each_field(
    client: TestClient, snapshot: FabricSnapshot
) -> None:
    response = client.get("/v1/paths", params={"src": "h1", "dst": "00:00:00:00:00"})
    assert response.status_code == 422
    body = response.json()
    assert body["detail"] == "invalid request: 2 error(s)"
    assert [error["path"] for error in body["errors"]] == ["query.src", "query.dst"]
    assert body["errors"][0]["message"] == (
        "expected an IPv4 address (10.0.0.1) or a MAC (00:00:00:00:00:01), got 'h1'"
    )
    assert "expected a MAC" in body["errors"][1]["message"]


def test_a_missing_address_is_422(client: TestClient) -> None:
    response = client.get("/v1/paths", params={"src": "10.0.0.1"})
    assert response.status_code == 422
    assert [error["path"] for error in response.json()["errors"]] == ["query.dst"]


@pytest.mark.parametrize("text", ["10.0.0.256", "010.0.0.1", "10.0.0", "\u0661\u0660.0.0.1", "::1"])
def test_only_plain_ipv4_and_macs_name_hosts(text: str) -> None:
    with pytest.raises(ValueError):
        parse_host_address(text)


# --------------------------------------------------------------------------------------------
# Redis down, and the schema
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/topology", "/v1/paths?src=10.0.0.1&dst=00:00:00:00:00:02"])
def test_redis_down_is_503(down_client: TestClient, path: str) -> None:
    response = down_client.get(path)
    assert response.status_code == 503
    assert response.json()["detail"].startswith("Redis unavailable: ")


def test_the_routes_and_their_statuses_are_documented(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    topology = paths["/v1/topology"]["get"]
    assert sorted(topology["responses"]) == ["200", "401", "403", "404", "503"]
    assert topology["tags"] == ["fabric"]
    route = paths["/v1/paths"]["get"]
    assert sorted(route["responses"]) == ["200", "401", "403", "404", "422", "503"]
    assert sorted(p["name"] for p in route["parameters"]) == ["dst", "src"]
    assert all(p["required"] for p in route["parameters"])
