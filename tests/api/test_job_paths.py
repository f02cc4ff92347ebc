"""``GET /v1/jobs/{name}``: the job's elephants, their paths and measured rates, from the
fabric snapshot its controller published (each pin names its job)."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from controller.auth.model import Role
from controller.fabric.model import Host, Link, PortRef, Topology
from controller.fabric.snapshot import PinnedView, build_snapshot, pinned_view
from controller.flowid import FlowId
from controller.store.fabric import FabricStore
from tests.api.conftest import bearer

LEAF1, LEAF2, SPINE1, SPINE2 = 1, 2, 11, 12
H1 = Host(0x1, PortRef(LEAF1, 1), 0x0A000001)
H2 = Host(0x2, PortRef(LEAF2, 1), 0x0A000002)
CABLES = (
    (PortRef(LEAF1, 3), PortRef(SPINE1, 1)),
    (PortRef(LEAF1, 4), PortRef(SPINE2, 1)),
    (PortRef(LEAF2, 3), PortRef(SPINE1, 2)),
    (PortRef(LEAF2, 4), PortRef(SPINE2, 2)),
)
TOPOLOGY = Topology(
    switches=frozenset({LEAF1, LEAF2, SPINE1, SPINE2}),
    links=frozenset(link for a, b in CABLES for link in (Link(a, b), Link(b, a))),
    hosts=(H1, H2),
)
JOB: dict[str, Any] = {
    "name": "ring",
    "class": "training",
    "endpoints": [{"ipv4": "10.0.0.1"}, {"ipv4": "10.0.0.2"}],
}


def pin(port: int, spine: int, rate: float, job: str | None) -> PinnedView:
    uplink = 3 if spine == SPINE1 else 4
    return pinned_view(
        FlowId(0x0800, 17, 0x0A000001, 0x0A000002, port, 4791),
        traffic_class="training",
        rate_bps=rate,
        demand_bps=rate,
        since=990.0,
        path=((LEAF1, uplink), (spine, 2)),
        port_names={PortRef(LEAF1, uplink): f"s1-eth{uplink}"},
        job=job,
    )


RING = [pin(40000, SPINE1, 2e8, "ring"), pin(40001, SPINE1, 3e8, "ring")]
OTHERS = [pin(40002, SPINE2, 4e8, "other"), pin(40003, SPINE2, 5e8, None)]


@pytest.fixture
def with_job(client: TestClient, document: dict[str, Any]) -> TestClient:
    assert client.put("/v1/policy", json=document).status_code == 201
    assert client.post("/v1/jobs", json=JOB).status_code == 201
    return client


def publish(redis_client: redis.Redis, pinned: list[PinnedView]) -> None:
    snapshot = build_snapshot("ctl-1", 1000.0, TOPOLOGY, {}, {}, pinned)
    FabricStore(redis_client).publish(snapshot)


def test_a_job_shows_the_paths_and_rates_of_its_placed_flows(
    with_job: TestClient, redis_client: redis.Redis
) -> None:
    publish(redis_client, [*RING, *OTHERS])
    body = with_job.get("/v1/jobs/ring").json()
    assert body["name"] == "ring" and body["class"] == "training"
    shown = [
        (p["src_port"], p["rate_bps"], p["job"], [(h["dpid"], h["port"]) for h in p["path"]])
        for p in body["pinned"]
    ]
    assert shown == [
        (40000, 2e8, "ring", [(LEAF1, 3), (SPINE1, 2)]),
        (40001, 3e8, "ring", [(LEAF1, 3), (SPINE1, 2)]),
    ]
    assert body["pinned"][0]["path"][0]["name"] == "s1-eth3"
    # The list stays as it was: what is registered, not where it runs.
    assert "pinned" not in with_job.get("/v1/jobs").json()["jobs"][0]


def test_without_a_snapshot_or_a_pin_a_job_has_no_placed_flows(
    with_job: TestClient, redis_client: redis.Redis
) -> None:
    assert with_job.get("/v1/jobs/ring").json()["pinned"] == []
    publish(redis_client, OTHERS)
    assert with_job.get("/v1/jobs/ring").json()["pinned"] == []


def test_the_answer_is_documented(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    get = schema["paths"]["/v1/jobs/{name}"]["get"]
    reference = get["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    detail = schema["components"]["schemas"][reference.rsplit("/", 1)[-1]]
    assert "pinned" in detail["properties"]


def test_a_tenant_sees_its_jobs_pins_within_its_networks_only(
    client: TestClient, document: dict[str, Any], redis_client: redis.Redis
) -> None:
    tenants = {"blue": {"networks": ["10.0.0.0/24"]}, "red": {"networks": ["10.2.0.0/16"]}}
    assert client.put("/v1/policy", json={**document, "tenants": tenants}).status_code == 201
    blue = bearer(redis_client, Role.operator, tenant="blue", name="blue-op")
    red = bearer(redis_client, Role.viewer, tenant="red", name="red-viewer")
    assert client.post("/v1/jobs", json=JOB, headers=blue).status_code == 201
    stray = pinned_view(  # a pin naming blue's job, both ends red's: never shown to blue
        FlowId(0x0800, 17, 0x0A020001, 0x0A020002, 40009, 4791),
        traffic_class="training",
        rate_bps=1e8,
        demand_bps=1e8,
        since=990.0,
        path=((LEAF1, 3), (SPINE1, 2)),
        port_names={},
        job="ring",
    )
    publish(redis_client, [*RING, stray])
    mine = client.get("/v1/jobs/ring", headers=blue).json()["pinned"]
    assert [p["src_port"] for p in mine] == [40000, 40001]
    assert client.get("/v1/jobs/ring", headers=red).status_code == 404
