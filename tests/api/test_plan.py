"""POST /v1/policy/plan: the changes a document would make on each live switch, applied nowhere."""

from __future__ import annotations

from typing import Any

import redis
from fastapi.testclient import TestClient

from controller.api.planning import installed_flow
from controller.pipeline.flows import FlowKey, InstalledFlow, MatchField
from controller.policy.limits import MAX_POLICY_ENTRIES
from controller.qos.plan import QueueSpec
from controller.store.switches import PortReport, SwitchReport, SwitchStore

DPID = "0000000000000001"
FOREIGN = (0, 0, (), 0x1234)  # OVS's own "table=0 priority=0 actions=NORMAL"


def plan(client: TestClient, document: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/policy/plan", json=document)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def only_switch(body: dict[str, Any]) -> dict[str, Any]:
    [switch] = body["switches"]
    result: dict[str, Any] = switch
    return result


def test_no_live_switch_means_an_empty_plan(client: TestClient, document: dict[str, Any]) -> None:
    entries = 3 * 2 * 2  # 3 rules of one port prefix each, two families, two directions
    assert plan(client, document) == {
        "active_version": None,
        "rule_entries": entries,
        "rule_entry_limit": MAX_POLICY_ENTRIES,
        "warnings": [],
        "switches": [],
        "quotas": [
            {
                "quota": "quotas.entries_per_switch",
                "tenant": None,
                "limit": MAX_POLICY_ENTRIES,
                "used": entries,
                "headroom": MAX_POLICY_ENTRIES - entries,
            }
        ],
    }


def test_an_override_naming_no_live_port_is_warned_about(
    client: TestClient, document: dict[str, Any], report_switch: Any
) -> None:
    report_switch(0x1)
    document["ports"]["overrides"]["s9-eth9"] = "1Gbit"
    body = plan(client, document)
    assert body["warnings"] == [
        "ports.overrides.s9-eth9: no live switch has a port 's9-eth9'; its rate applies to nothing"
    ]


def test_an_empty_switch_gets_every_flow_and_queue(
    client: TestClient, document: dict[str, Any], report_switch: Any
) -> None:
    report_switch(0x1, flows=(FOREIGN,))
    switch = only_switch(plan(client, document))
    assert switch["dpid"] == DPID
    assert switch["in_sync"] is False
    assert switch["unresolved_rules"] == []
    flows = switch["flows"]
    assert flows["changed"] == []
    assert flows["unchanged"] == 0
    assert flows["removed"] == ["table=0 priority=0 cookie=0x1234"]
    assert len(flows["added"]) == 12 + 1 + 9 + 1  # 3 rules x 4, default, 3 classes x 3, forward
    assert flows["added"][0].startswith(
        "table=0 priority=4196 eth_type=0x0800,ip_proto=17,udp_dst=4791"
        " actions=write_metadata:0x2/0xff,goto_table:1 cookie=0xf102"
    )
    assert "table=2 priority=0 actions=NORMAL cookie=0xf103" in flows["added"][-1]

    eth1, eth2, eth3 = switch["ports"]
    assert (eth1["name"], eth1["number"], eth1["rate_bps"]) == ("s1-eth1", 1, None)
    assert (eth1["planned_rate_bps"], eth1["note"]) == (10_000_000_000, "policy rate")
    assert eth1["queues"] == {
        "added": [
            "queue 0 (inference): min 2Gbit, max 10Gbit, priority 0, dscp 46",
            "queue 1 (training): min 7Gbit, max 10Gbit, priority 1, dscp 26",
            "queue 2 (best-effort): min 1Gbit, max 5Gbit, priority 2, dscp 0",
        ],
        "changed": [],
        "removed": [],
        "unchanged": 0,
    }
    assert eth2["planned_rate_bps"] == 1_000_000_000
    assert eth2["note"] == "link speed 1Gbit below policy rate"
    assert (eth3["planned_rate_bps"], eth3["note"]) == (50_000_000, "override")


def test_a_switch_holding_the_plan_is_in_sync(
    client: TestClient, document: dict[str, Any], synced_switch: Any
) -> None:
    synced_switch(0x1, document, 1)
    switch = only_switch(plan(client, document))
    assert switch["in_sync"] is True
    assert switch["applied_version"] == 1
    assert switch["flows"] == {"added": [], "changed": [], "removed": [], "unchanged": 23}
    for port in switch["ports"]:
        assert port["queues"] == {"added": [], "changed": [], "removed": [], "unchanged": 3}


def test_a_changed_rule_shows_as_changed_and_added_and_removed(
    client: TestClient, document: dict[str, Any], synced_switch: Any
) -> None:
    synced_switch(0x1, document, 1)
    document["rules"][2] = {"name": "ssh", "match": {"tcp_dst": 22}, "class": "training"}
    document["rules"][1]["match"]["tcp_dst"] = 8000
    flows = only_switch(plan(client, document))["flows"]
    # ssh keeps its matches and priority, but classifies into another class: changed
    assert len(flows["changed"]) == 4
    assert all("tcp_dst=22" in c or "tcp_src=22" in c for c in flows["changed"])
    assert all("write_metadata:0x2/0xff" in c for c in flows["changed"])
    assert all("->0xf102" in c for c in flows["changed"])
    # triton narrows from 8000/0xfffe to 8000: new keys added, old ones removed
    assert len(flows["added"]) == 4 and all("=8000 " in a for a in flows["added"])
    assert len(flows["removed"]) == 4 and all("8000/0xfffe" in r for r in flows["removed"])
    assert flows["unchanged"] == 23 - 8


def test_queue_changes_per_port(
    client: TestClient, document: dict[str, Any], synced_switch: Any
) -> None:
    synced_switch(0x1, document, 1)
    document["classes"]["best-effort"]["max_rate"] = "20%"
    document["classes"]["training"]["dscp"] = 28
    eth1 = only_switch(plan(client, document))["ports"][0]
    assert eth1["queues"] == {
        "added": [],
        "changed": [
            "queue 1 (training): dscp 26->28",
            "queue 2 (best-effort): max_bps 5Gbit->2Gbit",
        ],
        "removed": [],
        "unchanged": 1,
    }


def test_removed_class_removes_its_queue(
    client: TestClient, document: dict[str, Any], synced_switch: Any
) -> None:
    synced_switch(0x1, document, 1)
    del document["classes"]["best-effort"]
    document["rules"].pop()
    document["classes"]["training"]["min_rate"] = "80%"
    eth1 = only_switch(plan(client, document))["ports"][0]
    assert eth1["queues"]["removed"] == [
        "queue 2 (best-effort): min 1Gbit, max 5Gbit, priority 2, dscp 0"
    ]
    assert eth1["queues"]["changed"] == ["queue 1 (training): min_bps 7Gbit->8Gbit"]


def test_in_port_by_name_resolves_per_switch(
    client: TestClient, document: dict[str, Any], report_switch: Any
) -> None:
    document["rules"].append(
        {"name": "from-eth9", "match": {"in_port": "s1-eth9"}, "class": "training"}
    )
    document["rules"].append(
        {"name": "from-eth2", "match": {"in_port": "s1-eth2"}, "class": "training"}
    )
    report_switch(0x1)
    switch = only_switch(plan(client, document))
    assert switch["unresolved_rules"] == ["from-eth9"]
    assert any(a.startswith("table=0 priority=4192 in_port=2 ") for a in switch["flows"]["added"])


def test_every_live_switch_is_planned_and_dead_ones_are_not(
    client: TestClient, document: dict[str, Any], report_switch: Any, synced_switch: Any
) -> None:
    report_switch(0x2)
    synced_switch(0x1, document, 4)
    report_switch(0x3, controller="gone", beat=1.0)
    body = plan(client, document)
    assert [(s["dpid"], s["in_sync"]) for s in body["switches"]] == [
        (DPID, True),
        ("0000000000000002", False),
    ]


def test_plan_stores_and_applies_nothing(
    client: TestClient,
    document: dict[str, Any],
    synced_switch: Any,
    switches: SwitchStore,
    redis_client: redis.Redis,
) -> None:
    synced_switch(0x1, document, 1)
    client.put("/v1/policy", json=document)
    before = {k: redis_client.dump(k) for k in redis_client.keys("*")}
    document["rules"] = []
    body = plan(client, document)
    assert body["active_version"] == 1
    # only the audit log notes the request
    after = {k: redis_client.dump(k) for k in redis_client.keys("*")}
    assert {k: v for k, v in after.items() if k != "flowlane:audit"} == {
        k: v for k, v in before.items() if k != "flowlane:audit"
    }


def test_a_reported_flow_with_a_foreign_field_is_kept_as_reported() -> None:
    record = (0, 100, (("arp_op", 1, None), ("eth_type", 0x806, None)), 0x99)
    assert installed_flow(record) == InstalledFlow(
        FlowKey(0, 100, (MatchField("arp_op", 1), MatchField("eth_type", 0x806))), 0x99
    )


def test_a_reported_flow_is_canonicalised_like_the_plan() -> None:
    record = (0, 100, (("tcp_dst", 8001, 0xFFFE), ("eth_type", 0x800, 0xFFFF)), 0x5)
    assert installed_flow(record).key == FlowKey(
        0, 100, (MatchField("eth_type", 0x800), MatchField("tcp_dst", 8000, 0xFFFE))
    )


def test_reports_without_ports_or_with_queues_of_another_layout(
    client: TestClient, document: dict[str, Any], switches: SwitchStore
) -> None:
    switches.heartbeat("ctl-1")
    queue = QueueSpec(7, "legacy", 1_000, 2_000, 3, 10)
    switches.report(SwitchReport(1, "ctl-1", 0.0, None, (PortReport("p", 5, None, 123, (queue,)),)))
    [port] = only_switch(plan(client, document))["ports"]
    assert port["rate_bps"] == 123
    assert port["queues"]["removed"] == [
        "queue 7 (legacy): min 1Kbit, max 2Kbit, priority 3, dscp 10"
    ]
    assert len(port["queues"]["added"]) == 3


def test_a_detection_rate_above_a_live_port_ceiling_is_warned_about(
    client: TestClient, document: dict[str, Any], report_switch: Any
) -> None:
    """The default 10% of 10Gbit is 1Gbit/s: s1-eth2's 1Gbit link can never carry more."""
    report_switch(0x1)
    document["detection"] = {"elephant": {"class": "training"}}
    [warning] = plan(client, document)["warnings"]
    assert warning.startswith(
        "detection.elephant.rate: 10% of ports.rate 10Gbit = 1Gbit/s is at or above the ceiling"
        " of ports.overrides.s1-eth3 (50Mbit), port s1-eth2 (1Gbit):"
    )
    assert "never detected" in warning


def test_fabric_placement_without_detection_is_warned_about(
    client: TestClient, document: dict[str, Any]
) -> None:
    document["forwarding"] = "fabric"
    [warning] = plan(client, document)["warnings"]
    assert warning.startswith("forwarding.placement: placement is on")
