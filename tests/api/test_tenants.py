"""Tenant isolation: a tenant's tokens register jobs only inside its networks, see and
delete only its own jobs, and see only flows with an end in its networks."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from controller.auth.model import Role
from controller.store.flows import FlowRecord, FlowStore
from controller.store.jobs import JobStore
from tests.api.conftest import ReportSwitch, bearer
from tests.api.test_flows import FLOW

TENANTS = {
    "blue": {"networks": ["10.1.0.0/16"]},
    "red": {"networks": ["10.2.0.0/16", "192.168.7.0/24"]},
}


@pytest.fixture
def tenanted(client: TestClient, document: dict[str, Any]) -> TestClient:
    response = client.put("/v1/policy", json={**document, "tenants": TENANTS})
    assert response.status_code in (200, 201), response.text
    return client


def job(name: str, *addresses: str) -> dict[str, Any]:
    return {
        "name": name,
        "class": "training",
        "endpoints": [{"ipv4": address} for address in addresses],
    }


def test_a_tenant_registers_jobs_inside_its_networks_only(
    tenanted: TestClient, redis_client: redis.Redis
) -> None:
    blue = bearer(redis_client, Role.operator, tenant="blue")
    inside = tenanted.post("/v1/jobs", json=job("b1", "10.1.0.0/24", "10.1.9.9"), headers=blue)
    assert inside.status_code == 201, inside.text
    assert inside.json()["tenant"] == "blue"

    outside = tenanted.post(
        "/v1/jobs", json=job("b2", "10.1.0.5", "10.2.0.1", "10.0.0.0/8"), headers=blue
    )
    assert outside.status_code == 403
    detail = outside.json()["detail"]
    # Every endpoint outside is named, and only those.
    assert "endpoints[1].ipv4 10.2.0.1/32" in detail and "endpoints[2].ipv4 10.0.0.0/8" in detail
    assert "endpoints[0]" not in detail and "10.1.0.0/16" in detail
    assert tenanted.get("/v1/jobs/b2").status_code == 404  # nothing stored


def test_a_tenant_sees_and_deletes_only_its_own_jobs(
    tenanted: TestClient, redis_client: redis.Redis
) -> None:
    blue = bearer(redis_client, Role.operator, tenant="blue")
    red = bearer(redis_client, Role.operator, tenant="red")
    red_viewer = bearer(redis_client, Role.viewer, tenant="red")
    assert tenanted.post("/v1/jobs", json=job("b1", "10.1.0.1"), headers=blue).status_code == 201
    assert tenanted.post("/v1/jobs", json=job("r1", "10.2.0.1"), headers=red).status_code == 201
    assert tenanted.post("/v1/jobs", json=job("all", "10.9.0.1")).status_code == 201  # admin

    def names(headers: dict[str, str] | None = None) -> list[str]:
        response = tenanted.get("/v1/jobs", headers=headers)
        assert response.status_code == 200, response.text
        return [j["name"] for j in response.json()["jobs"]]

    assert names(blue) == ["b1"]
    assert names(red) == names(red_viewer) == ["r1"]
    assert names() == ["all", "b1", "r1"]  # an unscoped token sees every job
    assert tenanted.get("/v1/jobs/r1", headers=blue).status_code == 404
    assert tenanted.get("/v1/jobs/r1", headers=red_viewer).json()["tenant"] == "red"

    # Another tenant's job can be neither deleted nor taken over by name.
    assert tenanted.delete("/v1/jobs/r1", headers=blue).status_code == 404
    assert tenanted.delete("/v1/jobs/all", headers=blue).status_code == 404
    taken = tenanted.post("/v1/jobs", json=job("r1", "10.1.0.2"), headers=blue)
    assert taken.status_code == 409 and "another tenant" in taken.json()["detail"]
    assert names() == ["all", "b1", "r1"]
    assert tenanted.get("/v1/jobs/r1").json()["endpoints"] == [
        {"ipv4": "10.2.0.1/32", "ports": None}
    ]
    assert tenanted.delete("/v1/jobs/r1", headers=red).status_code == 204
    assert names() == ["all", "b1"]


def test_a_tenant_the_policy_does_not_declare_registers_nothing_and_sees_no_flow(
    tenanted: TestClient, redis_client: redis.Redis
) -> None:
    green = bearer(redis_client, Role.operator, tenant="green")
    refused = tenanted.post("/v1/jobs", json=job("g1", "10.1.0.1"), headers=green)
    assert refused.status_code == 403
    assert "tenant 'green' is not declared in the active policy" in refused.json()["detail"]


def test_a_tenants_flow_view_is_limited_to_its_networks(
    tenanted: TestClient, redis_client: redis.Redis, report_switch: ReportSwitch
) -> None:
    report_switch(0x2A)
    flows = FlowStore(redis_client)

    def flow(port: int, src: str, dst: str) -> FlowRecord:
        return replace(FLOW, src_port=port, src=src, dst=dst)

    flows.publish(
        0x2A,
        [
            flow(1, "10.1.0.1", "10.9.0.1"),  # blue's host sends
            flow(2, "10.9.0.1", "10.1.0.7"),  # blue's host receives
            flow(3, "10.2.0.1", "192.168.7.4"),  # red only
            flow(4, "10.9.0.1", "10.9.0.2"),  # nobody's
            flow(5, "fe80::1", "fe80::2"),  # another family: no tenant's
        ],
    )

    def ports(headers: dict[str, str] | None = None) -> list[int]:
        response = tenanted.get("/v1/flows", headers=headers)
        assert response.status_code == 200, response.text
        return sorted(f["src_port"] for f in response.json()["flows"])

    assert ports(bearer(redis_client, Role.viewer, tenant="blue")) == [1, 2]
    assert ports(bearer(redis_client, Role.operator, tenant="red")) == [3]
    assert ports(bearer(redis_client, Role.viewer, tenant="green")) == []
    assert ports(bearer(redis_client, Role.viewer)) == [1, 2, 3, 4, 5]


def test_an_admin_token_cannot_have_a_tenant(tenanted: TestClient) -> None:
    response = tenanted.post("/v1/tokens", json={"name": "x", "role": "admin", "tenant": "blue"})
    assert response.status_code == 422
    assert "an admin token cannot have a tenant" in response.text
    assert (
        tenanted.post(
            "/v1/tokens", json={"name": "x", "role": "operator", "tenant": "blue"}
        ).json()["tenant"]
        == "blue"
    )


def test_overlapping_tenants_are_refused_and_change_nothing(
    tenanted: TestClient, document: dict[str, Any]
) -> None:
    before = tenanted.get("/v1/policy").json()
    overlapping = {**TENANTS, "green": {"networks": ["10.1.128.0/17"]}}
    response = tenanted.put("/v1/policy", json={**document, "tenants": overlapping})
    assert response.status_code == 422
    assert "tenants.green.networks[0]" in response.text and "tenant 'blue'" in response.text
    assert tenanted.get("/v1/policy").json() == before


def test_job_events_carry_the_jobs_tenant_whoever_ends_the_job(
    tenanted: TestClient, redis_client: redis.Redis
) -> None:
    """Deleted by an unscoped token or expired, a tenant's job's events still name its tenant,
    so that tenant (and no other) reads them in /v1/events."""
    blue = bearer(redis_client, Role.operator, tenant="blue")
    assert tenanted.post("/v1/jobs", json=job("b1", "10.1.0.1"), headers=blue).status_code == 201
    assert tenanted.delete("/v1/jobs/b1").status_code == 204  # the admin deletes it
    JobStore(redis_client).put(
        "b2", {"class": "training", "endpoints": []}, 1, now=1.0, tenant="blue"
    )
    tenanted.get("/v1/jobs")  # purges b2

    def ops(headers: dict[str, str] | None = None) -> list[tuple[str, str, str | None]]:
        answer = tenanted.get("/v1/events?kind=job", headers=headers)
        assert answer.status_code == 200, answer.text
        return [(e["name"], e["op"], e.get("tenant")) for e in answer.json()["events"]]

    mine = [("b1", "registered", "blue"), ("b1", "deleted", "blue"), ("b2", "expired", "blue")]
    assert ops() == ops(bearer(redis_client, Role.viewer, tenant="blue")) == mine
    assert ops(bearer(redis_client, Role.viewer, tenant="red")) == []
