"""POST /v1/policy/plan shows groups and meters: fabric forwarding's multipath and punt limit.

Switch 1 is a leaf with two uplinks (s1-eth2 to spine 2, s1-eth3 to spine 3),
both reaching leaf 4 where a host sits: its plan spreads traffic to that
host over a select group of both uplinks, and meters what it sends the
controller.  The switch publishes those inputs with its report, as the
controller does, and the plan compares the result with what it holds.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import redis
from fastapi.testclient import TestClient

from controller.api.planning import NO_INPUTS_NOTE
from controller.fabric.model import Host, Link, PortRef, Topology
from controller.pipeline.describe import format_group, format_meter
from controller.pipeline.desired import FabricInputs
from controller.pipeline.fabric import ecmp_group
from controller.pipeline.flows import Output
from controller.pipeline.groups import Bucket, GroupEntry, GroupType, MeterEntry
from controller.pipeline.plan import plan
from controller.policy.load import parse_policy
from controller.store.groups import GroupRecord
from controller.store.switches import SwitchReport, SwitchStore
from tests.api.conftest import PORTS, synced_report


def leaf_spine() -> FabricInputs:
    links = [
        (PortRef(1, 2), PortRef(2, 1)),
        (PortRef(1, 3), PortRef(3, 1)),
        (PortRef(2, 2), PortRef(4, 1)),
        (PortRef(3, 2), PortRef(4, 2)),
    ]
    topology = Topology(
        switches=frozenset({1, 2, 3, 4}),
        links=frozenset(Link(a, b) for x, y in links for a, b in ((x, y), (y, x))),
        hosts=(Host(0xA, PortRef(1, 1), 0x0A000001), Host(0xB, PortRef(4, 3), 0x0A000002)),
    )
    return FabricInputs(topology, frozenset({1}))


def fabric_document(document: dict[str, Any], punt_rate: int = 1000) -> dict[str, Any]:
    document["forwarding"] = {"mode": "fabric", "punt_rate": punt_rate}
    return document


def switch_plan(client: TestClient, document: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/policy/plan", json=document)
    assert response.status_code == 200, response.text
    [switch] = response.json()["switches"]
    result: dict[str, Any] = switch
    return result


def held(switches: SwitchStore, report: SwitchReport) -> None:
    switches.heartbeat("ctl-1")
    switches.report(report)


def test_an_empty_switch_gets_its_groups_and_meters(
    client: TestClient, document: dict[str, Any], redis_client: redis.Redis
) -> None:
    fabric_document(document)
    report = synced_report(1, document, 1, fabric=leaf_spine())
    held(SwitchStore(redis_client), dataclasses.replace(report, flows=(), groups=(), meters=()))
    switch = switch_plan(client, document)
    assert switch["in_sync"] is False
    uplinks = format_group(ecmp_group((2, 3)))
    assert uplinks.startswith("group_id=0x")
    assert uplinks.endswith(
        " type=select bucket=watch_port:2,actions=output:2 bucket=watch_port:3,actions=output:3"
    )
    # what the switch's own plan holds, no more and no less
    assert report.inputs is not None
    expected = plan(parse_policy(document), (), report.inputs.inputs())
    assert switch["groups"] == {
        "added": [format_group(group) for group in expected.desired.groups],
        "changed": [],
        "removed": [],
        "unchanged": 0,
    }
    assert uplinks in switch["groups"]["added"]
    assert switch["meters"] == {
        "added": ["meter=1 pktps bands=type=drop rate=1000 burst_size=100"],
        "changed": [],
        "kept": [],
        "unchanged": 0,
    }
    assert [format_meter(m) for m in expected.desired.meters] == switch["meters"]["added"]


def test_a_switch_holding_its_groups_and_meters_is_in_sync(
    client: TestClient, document: dict[str, Any], redis_client: redis.Redis
) -> None:
    fabric_document(document)
    report = synced_report(1, document, 1, fabric=leaf_spine())
    assert report.groups and report.meters
    held(SwitchStore(redis_client), report)
    switch = switch_plan(client, document)
    assert switch["in_sync"] is True, switch
    assert switch["groups"]["unchanged"] == len(report.groups)
    assert switch["meters"] == {"added": [], "changed": [], "kept": [], "unchanged": 1}


def test_stale_groups_are_removed_and_unplanned_meters_kept(
    client: TestClient, document: dict[str, Any], redis_client: redis.Redis
) -> None:
    fabric_document(document)
    report = synced_report(1, document, 1, fabric=leaf_spine())
    stale = GroupEntry(GroupType.ALL, (Bucket((Output(9),)),), group_id=0x77)
    foreign_meter = MeterEntry(77, 5, 1)
    held(
        SwitchStore(redis_client),
        dataclasses.replace(
            report,
            groups=(*report.groups, GroupRecord.of(stale)),
            meters=(MeterEntry(1, 500, 50), foreign_meter),
        ),
    )
    switch = switch_plan(client, document)
    assert switch["in_sync"] is False
    assert switch["groups"]["removed"] == [
        "group_id=0x77 type=all bucket=actions=output:9",
    ]
    assert switch["groups"]["added"] == [] and switch["groups"]["changed"] == []
    assert switch["meters"] == {
        "added": [],
        "changed": [
            "meter=1 pktps bands=type=drop rate=1000 burst_size=100 (was rate=500 burst_size=50)"
        ],
        "kept": ["meter=77 pktps bands=type=drop rate=5 burst_size=1"],
        "unchanged": 0,
    }


def test_a_new_punt_rate_changes_the_meter_and_nothing_else(
    client: TestClient, document: dict[str, Any], redis_client: redis.Redis
) -> None:
    held(
        SwitchStore(redis_client),
        synced_report(1, fabric_document(document), 1, fabric=leaf_spine()),
    )
    switch = switch_plan(client, fabric_document(document, punt_rate=2000))
    assert switch["meters"]["changed"] == [
        "meter=1 pktps bands=type=drop rate=2000 burst_size=200 (was rate=1000 burst_size=100)"
    ]
    assert switch["groups"]["added"] == [] and switch["groups"]["removed"] == []
    assert switch["flows"]["added"] == [] and switch["flows"]["removed"] == []
    assert switch["in_sync"] is False


def test_leaving_fabric_forwarding_removes_the_groups(
    client: TestClient, document: dict[str, Any], redis_client: redis.Redis
) -> None:
    report = synced_report(1, fabric_document(document), 1, fabric=leaf_spine())
    held(SwitchStore(redis_client), report)
    document["forwarding"] = "normal"
    switch = switch_plan(client, document)
    assert len(switch["groups"]["removed"]) == len(report.groups)
    assert switch["meters"]["kept"] == ["meter=1 pktps bands=type=drop rate=1000 burst_size=100"]


def test_a_report_without_inputs_is_planned_from_its_ports_and_says_so(
    client: TestClient, document: dict[str, Any], redis_client: redis.Redis
) -> None:
    """A controller older than the published inputs: the fabric it planned with is unknown,
    so the plan is that of a switch alone (discovery only), and the answer says why."""
    fabric_document(document)
    report = synced_report(1, document, 1, fabric=leaf_spine())
    held(SwitchStore(redis_client), dataclasses.replace(report, inputs=None))
    switch = switch_plan(client, document)
    assert switch["inputs"] == {
        "known": False,
        "policy_version": 1,
        "jobs_version": 0,
        "ports_down": [],
        "overrides": 0,
        "overrides_dropped": 0,
        "edge_ports": None,
        "pinned": 0,
        "note": NO_INPUTS_NOTE,
    }
    assert len(switch["groups"]["removed"]) == len(report.groups)
    assert switch["flows"]["removed"] != []
    assert switch["in_sync"] is False
    # the ports of the report are what it planned with
    assert [port["name"] for port in switch["ports"]] == [port.name for port in PORTS]
