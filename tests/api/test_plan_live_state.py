"""The dry-run plan computes the controller's desired state: jobs, overrides and the fabric count.

Each switch here holds exactly what the controller would install (built
with ``desired_state``, as the controller builds it). A plan of the same
policy must then be empty: an entry the plan did not know would show up as
"removed", which is what the plan said of jobs and overrides before.
"""

from __future__ import annotations

import copy
from typing import Any

import redis
from fastapi.testclient import TestClient

from controller.fabric.model import Host, Link, PortRef, Topology
from controller.fabric.paths import pinned_paths
from controller.fabric.snapshot import build_snapshot, pinned_view
from controller.flowid import ETH_TYPE_IPV4, IP_PROTO_TCP, FlowId
from controller.pipeline.desired import FabricInputs
from controller.policy.jobs import JobSpec
from controller.store.fabric import FabricStore
from controller.store.jobs import JobStore
from controller.store.policies import PolicyStore
from controller.store.switches import SwitchStore
from tests.api.conftest import synced_report

JOB: dict[str, Any] = {
    "class": "training",
    "endpoints": [{"ipv4": "10.0.0.0/24", "ports": [4791]}, {"ipv4": "10.0.1.7"}],
}
ELEPHANT = FlowId(ETH_TYPE_IPV4, IP_PROTO_TCP, 0x0A000001, 0x0A000002, 40000, 5201)
DETECTION = {
    "interval": "500ms",
    "elephant": {"rate": "5Mbit", "for": "1s", "class": "training"},
    "release_after": "10s",
}


def plan_of(client: TestClient, document: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/policy/plan", json=document)
    assert response.status_code == 200, response.text
    [switch] = response.json()["switches"]
    result: dict[str, Any] = switch
    return result


def test_a_registered_job_is_planned_not_removed(
    client: TestClient, document: dict[str, Any], redis_client: redis.Redis
) -> None:
    JobStore(redis_client).put("train-1", JOB, ttl_s=600)
    job = JobSpec.from_document("train-1", JOB)
    switches = SwitchStore(redis_client)
    switches.heartbeat("ctl-1")
    report = synced_report(1, document, 1, jobs=[job])
    switches.report(report)
    switch = plan_of(client, document)
    assert switch["flows"]["removed"] == [] and switch["flows"]["added"] == []
    assert switch["in_sync"] is True
    # and the job's entries are really there: without the job the same switch has extra entries
    JobStore(redis_client).delete("train-1")
    assert plan_of(client, document)["flows"]["removed"] != []


def test_detector_overrides_the_switch_holds_are_kept(
    client: TestClient, document: dict[str, Any], redis_client: redis.Redis
) -> None:
    document["detection"] = DETECTION
    PolicyStore(redis_client).put(document, author="op")  # the controller enforces it
    switches = SwitchStore(redis_client)
    switches.heartbeat("ctl-1")
    switches.report(synced_report(1, document, 1, overrides={ELEPHANT: "training"}))
    switch = plan_of(client, document)
    assert switch["in_sync"] is True, switch["flows"]
    # a new detection threshold starts over (as the controller does): the override goes
    changed = copy.deepcopy(document)
    changed["detection"]["elephant"]["rate"] = "8Mbit"
    removed = plan_of(client, changed)["flows"]["removed"]
    assert any("tcp_dst=5201" in entry for entry in removed), removed


def test_the_fabric_forwarding_and_placed_elephants_are_planned(
    client: TestClient, document: dict[str, Any], redis_client: redis.Redis
) -> None:
    document["forwarding"] = {"mode": "fabric"}
    uplink, peer = PortRef(1, 3), PortRef(2, 1)
    topology = Topology(
        switches=frozenset({1, 2}),
        links=frozenset({Link(uplink, peer), Link(peer, uplink)}),
        hosts=(
            Host(0x1, PortRef(1, 1), 0x0A000001),
            Host(0x2, PortRef(2, 2), 0x0A000002),
        ),
    )
    path = ((1, 3), (2, 2))
    names = {uplink: "s1-eth3", PortRef(1, 1): "s1-eth1"}
    pinned = pinned_view(
        ELEPHANT,
        traffic_class="training",
        rate_bps=9e6,
        demand_bps=1e7,
        since=1.0,
        path=path,
        port_names=names,
    )
    FabricStore(redis_client).publish(build_snapshot("ctl-1", 1.0, topology, names, {}, [pinned]))
    inputs = FabricInputs(topology, frozenset({1, 2}), pinned_paths(topology, {ELEPHANT: path}))
    switches = SwitchStore(redis_client)
    switches.heartbeat("ctl-1")
    switches.report(synced_report(1, document, 1, fabric=inputs))
    switch = plan_of(client, document)
    assert switch["in_sync"] is True, switch["flows"]
    # the pinned entry is in what the switch holds: without the pin it would be removed
    FabricStore(redis_client).publish(build_snapshot("ctl-1", 2.0, topology, names, {}, []))
    removed = plan_of(client, document)["flows"]["removed"]
    assert any("tcp_dst=5201" in entry for entry in removed), removed
