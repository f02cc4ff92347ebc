"""Flows, matches and queues as text, and the added / changed / removed split of a plan."""

from __future__ import annotations

from typing import Any

import pytest

from controller.pipeline import tables
from controller.pipeline.describe import (
    ChangedFlow,
    ChangedQueue,
    flow_changes,
    format_actions,
    format_field,
    format_flow,
    format_match,
    format_queue,
    queue_changes,
)
from controller.pipeline.diff import diff_flows
from controller.pipeline.flows import (
    OFPP_NORMAL,
    ApplyActions,
    FlowEntry,
    FlowKey,
    GotoTable,
    InstalledFlow,
    MatchField,
    Output,
    Owner,
    SetField,
    SetQueue,
    WriteMetadata,
    make_match,
)
from controller.pipeline.planner import plan_switch
from controller.pipeline.simulate import SimulatedSwitch
from controller.policy.model import Policy
from controller.qos.plan import PortQos, QueueSpec

TRITON = make_match(
    MatchField("tcp_dst", 8000, 0xFFFE), MatchField("ip_proto", 6), MatchField("eth_type", 0x0800)
)
CLASSIFY = (WriteMetadata(1, 0xFF), GotoTable(tables.MARK))


def entry(match: Any = TRITON, priority: int = 4194, instructions: Any = CLASSIFY) -> FlowEntry:
    return FlowEntry(tables.CLASSIFY, priority, match, instructions, Owner.POLICY)


# --------------------------------------------------------------------------------------------
# format_match / format_field
# --------------------------------------------------------------------------------------------


def test_match_fields_come_in_prerequisite_order() -> None:
    assert format_match(TRITON) == "eth_type=0x0800,ip_proto=6,tcp_dst=8000/0xfffe"


def test_the_match_all_is_empty() -> None:
    assert format_match(()) == ""


@pytest.mark.parametrize(
    ("field", "text"),
    [
        (MatchField("in_port", 3), "in_port=3"),
        (MatchField("metadata", 2, 0xFF), "metadata=0x2/0xff"),
        (MatchField("eth_type", 0x86DD), "eth_type=0x86dd"),
        (MatchField("vlan_vid", 0x1005), "vlan_vid=0x1005"),
        (MatchField("ip_proto", 17), "ip_proto=17"),
        (MatchField("ip_dscp", 46), "ip_dscp=46"),
        (MatchField("ipv4_src", 0x0A000001), "ipv4_src=10.0.0.1"),
        (MatchField("ipv4_dst", 0x0A000000, 0xFFFFFF00), "ipv4_dst=10.0.0.0/24"),
        (MatchField("ipv4_dst", 0x0A000000, 0xFF00FF00), "ipv4_dst=10.0.0.0/255.0.255.0"),
        (MatchField("udp_src", 4791), "udp_src=4791"),
        (MatchField("tcp_src", 29504, 0xFFFC), "tcp_src=29504/0xfffc"),
        (MatchField("arp_op", 1), "arp_op=1"),
        (MatchField("arp_op", 1, 0xF), "arp_op=1/0xf"),
    ],
)
def test_each_field(field: MatchField, text: str) -> None:
    assert format_field(field) == text


def test_fields_the_planner_does_not_know_go_last() -> None:
    match = (MatchField("arp_op", 1), MatchField("eth_type", 0x0806), MatchField("in_port", 2))
    assert format_match(match) == "in_port=2,eth_type=0x0806,arp_op=1"


def test_every_flow_of_a_plan_formats_with_its_whole_match(default_policy: Policy) -> None:
    for flow in plan_switch(default_policy, {}).flows:
        text = format_match(flow.key.match)
        assert text.count("=") == len(flow.key.match)


# --------------------------------------------------------------------------------------------
# format_actions / format_flow
# --------------------------------------------------------------------------------------------


def test_actions_in_ovs_ofctl_spelling() -> None:
    marked = entry(
        instructions=(
            ApplyActions((SetField("ip_dscp", 46), SetQueue(0))),
            GotoTable(tables.FORWARD),
        )
    )
    assert format_actions(marked) == "set_field:46->ip_dscp,set_queue:0,goto_table:2"
    assert format_actions(entry(instructions=CLASSIFY)) == "write_metadata:0x1/0xff,goto_table:1"
    assert format_actions(entry(instructions=(ApplyActions((Output(OFPP_NORMAL),)),))) == "NORMAL"
    assert format_actions(entry(instructions=(ApplyActions((Output(7),)),))) == "output:7"
    assert format_actions(entry(instructions=())) == "drop"


def test_a_planned_flow() -> None:
    flow = entry()
    assert format_flow(flow) == (
        "table=0 priority=4194 eth_type=0x0800,ip_proto=6,tcp_dst=8000/0xfffe"
        f" actions=write_metadata:0x1/0xff,goto_table:1 cookie={flow.cookie:#x}"
    )


def test_an_installed_flow_has_no_actions() -> None:
    installed = InstalledFlow(FlowKey(2, 0, ()), 0x0)
    assert format_flow(installed) == "table=2 priority=0 cookie=0x0"


def test_a_changed_cookie_shows_both() -> None:
    flow = entry()
    assert format_flow(flow, previous_cookie=0x1).endswith(f" cookie=0x1->{flow.cookie:#x}")
    assert format_flow(flow, previous_cookie=flow.cookie) == format_flow(flow)


# --------------------------------------------------------------------------------------------
# flow_changes
# --------------------------------------------------------------------------------------------


def test_an_empty_switch_gets_everything_added(default_policy: Policy) -> None:
    plan = plan_switch(default_policy, {}).flows
    changes = flow_changes([], plan)
    assert changes.added == plan
    assert (changes.changed, changes.removed, changes.unchanged) == ((), (), 0)
    assert not changes.empty


def test_a_switch_holding_the_plan_needs_nothing(default_policy: Policy) -> None:
    plan = plan_switch(default_policy, {}).flows
    installed = [InstalledFlow(flow.key, flow.cookie) for flow in plan]
    changes = flow_changes(installed, plan)
    assert changes.empty
    assert changes.unchanged == len(plan)


def test_added_changed_and_removed() -> None:
    kept = entry(priority=4196)
    moved = entry(priority=4195)  # same key as installed, other instructions: changed
    new = entry(priority=4194, match=make_match(MatchField("eth_type", 0x86DD)))
    stale = InstalledFlow(FlowKey(0, 4000, make_match(MatchField("ip_dscp", 1))), 0x77)
    old_moved = InstalledFlow(moved.key, 0x99)
    installed = [InstalledFlow(kept.key, kept.cookie), old_moved, stale]
    changes = flow_changes(installed, [kept, moved, new])
    assert changes.added == (new,)
    assert changes.changed == (ChangedFlow(old_moved, moved),)
    assert changes.removed == (stale,)
    assert changes.unchanged == 1
    assert str(changes.changed[0]) == format_flow(moved, previous_cookie=0x99)


def test_removed_is_in_key_order() -> None:
    installed = [
        InstalledFlow(FlowKey(2, 0, ()), 1),
        InstalledFlow(FlowKey(0, 5, ()), 2),
        InstalledFlow(FlowKey(0, 9, ()), 3),
    ]
    assert [f.cookie for f in flow_changes(installed, []).removed] == [2, 3, 1]


def test_changes_agree_with_the_diff_the_controller_sends(
    default_policy: Policy, make_policy: Any
) -> None:
    """Added + changed is exactly what diff_flows adds; removed exactly what it deletes."""
    switch = SimulatedSwitch()
    switch.apply(diff_flows([], plan_switch(default_policy, {}).flows))
    switch.add_foreign(FlowKey(0, 0, ()), 0x1234)
    other = plan_switch(
        make_policy([{"name": "ssh", "match": {"tcp_dst": 22}, "class": "training"}]), {}
    ).flows
    diff = diff_flows(switch.dump(), other)
    changes = flow_changes(switch.dump(), other)
    assert {*changes.added, *(c.planned for c in changes.changed)} == set(diff.add)
    assert tuple(flow.key for flow in changes.removed) == diff.delete
    assert changes.unchanged == diff.unchanged
    assert changes.changed  # the marking tables stay keyed alike, with other classes


def test_a_plan_with_two_entries_for_one_key_is_refused() -> None:
    with pytest.raises(ValueError, match="two different entries"):
        flow_changes([], [entry(), entry(instructions=())])


# --------------------------------------------------------------------------------------------
# queue_changes
# --------------------------------------------------------------------------------------------


def spec(queue_id: int, name: str, min_bps: int, max_bps: int, prio: int, dscp: int) -> QueueSpec:
    return QueueSpec(queue_id, name, min_bps, max_bps, prio, dscp)


PLANNED = PortQos(
    "s1-eth1",
    10_000_000_000,
    (
        spec(0, "inference", 2_000_000_000, 10_000_000_000, 0, 46),
        spec(1, "training", 7_000_000_000, 10_000_000_000, 1, 26),
        spec(2, "best-effort", 1_000_000_000, 5_000_000_000, 2, 0),
    ),
)


def report(queue: QueueSpec, **changes: Any) -> QueueSpec:
    fields = {
        "queue_id": queue.queue_id,
        "class_name": queue.class_name,
        "min_bps": queue.min_bps,
        "max_bps": queue.max_bps,
        "priority": queue.priority,
        "dscp": queue.dscp,
    }
    return QueueSpec(**{**fields, **changes})


def test_a_port_without_queues_gets_every_queue() -> None:
    changes = queue_changes([], PLANNED)
    assert changes.added == PLANNED.queues
    assert (changes.changed, changes.removed, changes.unchanged) == ((), (), 0)


def test_a_port_holding_the_plan_needs_nothing() -> None:
    changes = queue_changes([report(q) for q in PLANNED.queues], PLANNED)
    assert changes.empty
    assert changes.unchanged == 3


def test_queue_changes_by_queue_id() -> None:
    inference, training, best_effort = PLANNED.queues
    current = [
        report(best_effort, max_bps=2_000_000_000, dscp=8),
        report(inference),
        report(spec(5, "legacy", 8_000, 8_000, 7, 10)),
    ]
    changes = queue_changes(current, PLANNED)
    assert changes.added == (training,)
    assert changes.changed == (ChangedQueue(current[0], best_effort, ("max_bps", "dscp")),)
    assert [q.queue_id for q in changes.removed] == [5]
    assert changes.unchanged == 1
    assert str(changes.changed[0]) == "queue 2 (best-effort): max_bps 2Gbit->5Gbit, dscp 8->0"


def test_a_renamed_class_is_a_change() -> None:
    inference = PLANNED.queues[0]
    changes = queue_changes([report(inference, class_name="gold")], PLANNED)
    assert str(changes.changed[0]) == "queue 0 (inference): class_name gold->inference"


def test_format_queue() -> None:
    assert format_queue(PLANNED.queues[2]) == (
        "queue 2 (best-effort): min 1Gbit, max 5Gbit, priority 2, dscp 0"
    )
    assert format_queue(report(spec(1, "x", 12_345, 8_000, 0, 1))) == (
        "queue 1 (x): min 12345bit, max 8Kbit, priority 0, dscp 1"
    )
