"""The dry-run plan is the switch's plan: jobs, overrides and the fabric count, from its inputs.

Each switch here holds exactly what the controller would install (built
with ``plan``, as the controller builds it) and publishes the inputs it
planned from. A plan of the same policy must then be empty: an entry the
plan did not know would show up as "removed", which is what the plan said of
jobs and overrides before it planned from the switch's own inputs.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import redis
from fastapi.testclient import TestClient

from controller.fabric.model import Host, Link, PortRef, Topology
from controller.fabric.paths import pinned_paths
from controller.flowid import ETH_TYPE_IPV4, IP_PROTO_TCP, FlowId
from controller.pipeline.desired import FabricInputs
from controller.policy.jobs import JobSpec
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


def fabric_inputs(edge_ports: frozenset[int], pinned: bool = True) -> FabricInputs:
    """Switch 1's view of a small fabric: its port 3 faces switch 2, hosts at 1:1 and 2:2,
    one elephant pinned from 1 through 2."""
    uplink, peer = PortRef(1, 3), PortRef(2, 1)
    topology = Topology(
        switches=frozenset({1, 2}),
        links=frozenset({Link(uplink, peer), Link(peer, uplink)}),
        hosts=(
            Host(0x1, PortRef(1, 1), 0x0A000001),
            Host(0x2, PortRef(2, 2), 0x0A000002),
        ),
    )
    pins = pinned_paths(topology, {ELEPHANT: ((1, 3), (2, 2))}) if pinned else {}
    return FabricInputs(topology, edge_ports, pins)


def test_the_fabric_forwarding_and_placed_elephants_are_planned_from_the_switch_inputs(
    client: TestClient, document: dict[str, Any], redis_client: redis.Redis
) -> None:
    document["forwarding"] = {"mode": "fabric"}
    switches = SwitchStore(redis_client)
    switches.heartbeat("ctl-1")
    # No fabric snapshot is published at all: the switch's own inputs are what count.
    switches.report(synced_report(1, document, 1, fabric=fabric_inputs(frozenset({1, 2}))))
    switch = plan_of(client, document)
    assert switch["in_sync"] is True, switch
    assert switch["inputs"] == {
        "known": True,
        "policy_version": 1,
        "jobs_version": 0,
        "ports_down": [],
        "overrides": 0,
        "overrides_dropped": 0,
        "edge_ports": [1, 2],
        "pinned": 1,
        "note": None,
    }
    assert switch["meters"] == {"added": [], "changed": [], "kept": [], "unchanged": 1}
    # the pin counts: a switch that published it but does not hold its entry gets it added
    pinned = synced_report(1, document, 1, fabric=fabric_inputs(frozenset({1, 2})))
    unpinned = synced_report(1, document, 1, fabric=fabric_inputs(frozenset({1, 2}), False))
    switches.report(dataclasses.replace(pinned, flows=unpinned.flows))
    added = plan_of(client, document)["flows"]["added"]
    assert len(added) == 1 and "tcp_dst=5201" in added[0], added


def test_a_freshly_up_port_plans_as_on_the_switch(
    client: TestClient, document: dict[str, Any], redis_client: redis.Redis
) -> None:
    """s1-eth2 faces no switch, but came up a moment ago: the controller does not count it as
    an edge port until it settles, so neither does the plan (it once did, faced by no switch)."""
    document["forwarding"] = {"mode": "fabric"}
    switches = SwitchStore(redis_client)
    switches.heartbeat("ctl-1")
    switches.report(synced_report(1, document, 1, fabric=fabric_inputs(frozenset({1}))))
    switch = plan_of(client, document)
    assert switch["in_sync"] is True, switch["flows"]
    assert switch["inputs"]["edge_ports"] == [1]
    # and a port the switch reports down is named
    switches.report(
        synced_report(
            1, document, 1, fabric=fabric_inputs(frozenset({1})), down=frozenset({"s1-eth2"})
        )
    )
    switch = plan_of(client, document)
    assert switch["in_sync"] is True
    assert switch["inputs"]["ports_down"] == ["s1-eth2"]


def test_overrides_of_a_changed_detection_section_are_dropped_and_counted(
    client: TestClient, document: dict[str, Any], redis_client: redis.Redis
) -> None:
    document["detection"] = DETECTION
    PolicyStore(redis_client).put(document, author="op")
    switches = SwitchStore(redis_client)
    switches.heartbeat("ctl-1")
    switches.report(synced_report(1, document, 1, overrides={ELEPHANT: "training"}))
    assert plan_of(client, document)["inputs"]["overrides"] == 1
    changed = copy.deepcopy(document)
    changed["detection"]["elephant"]["rate"] = "8Mbit"
    inputs = plan_of(client, changed)["inputs"]
    assert (inputs["overrides"], inputs["overrides_dropped"]) == (0, 1)


def test_overrides_of_a_version_the_store_lacks_are_left_out_and_said_so(
    client: TestClient, document: dict[str, Any], redis_client: redis.Redis
) -> None:
    """The switch planned from version 7 (a store that lost it, say): whether its detection
    section is the candidate's cannot be told, and the answer says why the overrides go."""
    document["detection"] = DETECTION
    switches = SwitchStore(redis_client)
    switches.heartbeat("ctl-1")
    switches.report(synced_report(1, document, 7, overrides={ELEPHANT: "training"}))
    switch = plan_of(client, document)
    assert switch["inputs"]["known"] is True
    assert (switch["inputs"]["overrides"], switch["inputs"]["overrides_dropped"]) == (0, 1)
    assert switch["inputs"]["note"] == (
        "the policy this switch planned from (version 7) is not in the store (or no longer"
        " validates): its detection section is unknown, so its detector overrides are left out"
    )
    removed = switch["flows"]["removed"]
    assert any("tcp_dst=5201" in entry for entry in removed), removed
