"""Diffing a plan against a (simulated) switch: exact convergence, no leftovers, minimal adds."""

from __future__ import annotations

import dataclasses
import ipaddress
from typing import Any

import pytest

from controller.pipeline import tables
from controller.pipeline.diff import diff_flows
from controller.pipeline.flows import (
    OFPP_NORMAL,
    ApplyActions,
    FlowEntry,
    FlowKey,
    GotoTable,
    InstalledFlow,
    Output,
    Owner,
    make_match,
)
from controller.pipeline.planner import plan_switch
from controller.pipeline.simulate import SimulatedSwitch, run_packet
from controller.policy.model import Policy

RULES_A: list[dict[str, Any]] = [
    {"name": "roce", "match": {"udp_dst": 4791}, "class": "training"},
    {"name": "triton", "match": {"tcp_dst": [8000, 8001]}, "class": "inference"},
    {"name": "vllm", "match": {"tcp_dst": 8080}, "class": "inference"},
    {"name": "ssh", "match": {"tcp_dst": 22}, "class": "best-effort"},
]
# B: vllm moves port, ssh changes class, same number and order of rules (priorities stay).
RULES_B: list[dict[str, Any]] = [
    RULES_A[0],
    RULES_A[1],
    {"name": "vllm", "match": {"tcp_dst": 8088}, "class": "inference"},
    {"name": "ssh", "match": {"tcp_dst": 22}, "class": "training"},
]
OVS_DEFAULT = FlowKey(table_id=0, priority=0, match=())


def _state(flows: list[InstalledFlow]) -> set[tuple[FlowKey, int]]:
    return {(flow.key, flow.cookie) for flow in flows}


def _planned(flows: tuple[FlowEntry, ...]) -> set[tuple[FlowKey, int]]:
    return {(flow.key, flow.cookie) for flow in flows}


def test_empty_switch_gets_every_flow_added(default_policy: Policy) -> None:
    plan = plan_switch(default_policy, {})
    diff = diff_flows([], plan.flows)
    assert set(diff.add) == set(plan.flows)
    assert len(diff.add) == len(plan.flows)
    assert diff.delete == ()
    assert diff.unchanged == 0
    assert not diff.empty


def test_applying_the_diff_converges_exactly_and_then_nothing_is_left(
    default_policy: Policy,
) -> None:
    plan = plan_switch(default_policy, {})
    switch = SimulatedSwitch()
    switch.apply(diff_flows(switch.dump(), plan.flows))
    dump = switch.dump()
    assert len(dump) == len(plan.flows)
    assert _state(dump) == _planned(plan.flows)
    again = diff_flows(dump, plan.flows)
    assert again.empty
    assert again.add == () and again.delete == ()
    assert again.unchanged == len(plan.flows)


def test_policy_change_replaces_foreign_and_old_entries(make_policy: Any) -> None:
    policy_a, policy_b = make_policy(RULES_A), make_policy(RULES_B)
    plan_a, plan_b = plan_switch(policy_a, {}), plan_switch(policy_b, {})
    switch = SimulatedSwitch()
    switch.apply(diff_flows([], plan_a.flows))
    switch.add_foreign(OVS_DEFAULT, 0)  # OVS's own priority-0 NORMAL flow, cookie 0

    diff = diff_flows(switch.dump(), plan_b.flows)
    switch.apply(diff)

    dump = switch.dump()
    assert _state(dump) == _planned(plan_b.flows)
    assert len(dump) == len(plan_b.flows)  # no duplicates
    assert switch.foreign == {}
    # Only what changed was sent
    assert set(diff.add) == set(plan_b.flows) - set(plan_a.flows)
    keys_a = {flow.key for flow in plan_a.flows}
    keys_b = {flow.key for flow in plan_b.flows}
    assert set(diff.delete) == (keys_a - keys_b) | {OVS_DEFAULT}
    assert list(diff.delete) == sorted(diff.delete)
    assert diff.unchanged == len(plan_b.flows) - len(diff.add)
    changed_ports = {f.value for flow in diff.add for f in flow.match if f.name.startswith("tcp")}
    assert changed_ports == {8088, 22}
    assert all(flow.table_id == tables.CLASSIFY for flow in diff.add)
    assert diff_flows(dump, plan_b.flows).empty

    # and the switch now behaves as B says
    flows = tuple(switch.entries.values())
    packet = {
        "in_port": 1,
        "eth_type": 0x0800,
        "ip_proto": 6,
        "ip_dscp": 0,
        "ipv4_src": int(ipaddress.IPv4Address("10.0.0.1")),
        "ipv4_dst": int(ipaddress.IPv4Address("10.0.0.2")),
        "tcp_src": 40000,
    }
    assert run_packet(flows, {**packet, "tcp_dst": 22}).queue_id == policy_b.queue_id("training")
    assert run_packet(flows, {**packet, "tcp_dst": 8088}).queue_id == 0
    assert run_packet(flows, {**packet, "tcp_dst": 8080}).queue_id == policy_b.queue_id(
        "best-effort"
    )


def test_foreign_entry_on_a_planned_key_is_replaced(make_policy: Any) -> None:
    plan = plan_switch(make_policy(RULES_A), {})
    forward = next(flow for flow in plan.flows if flow.table_id == tables.FORWARD)
    switch = SimulatedSwitch()
    switch.apply(diff_flows([], plan.flows))
    switch.add_foreign(forward.key, 0x1234)
    diff = diff_flows(switch.dump(), plan.flows)
    assert diff.add == (forward,)
    assert diff.delete == ()
    switch.apply(diff)
    assert _state(switch.dump()) == _planned(plan.flows)
    assert switch.foreign == {}


def test_an_older_flowlane_entry_with_another_cookie_is_rewritten(make_policy: Any) -> None:
    plan = plan_switch(make_policy(RULES_A), {})
    stale = [InstalledFlow(flow.key, flow.cookie ^ 1) for flow in plan.flows]
    diff = diff_flows(stale, plan.flows)
    assert set(diff.add) == set(plan.flows)
    assert diff.delete == ()


def test_duplicate_identical_planned_entries_are_one() -> None:
    entry = FlowEntry(2, 0, make_match(), (ApplyActions((Output(OFPP_NORMAL),)),), Owner.FORWARDING)
    diff = diff_flows([], [entry, entry])
    assert diff.add == (entry,)


def test_two_different_entries_for_one_key_raise() -> None:
    first = FlowEntry(0, 5, make_match(), (GotoTable(1),), Owner.POLICY)
    second = FlowEntry(0, 5, make_match(), (GotoTable(2),), Owner.POLICY)
    with pytest.raises(ValueError, match="plan has two different entries"):
        diff_flows([], [first, second])


def test_entries_with_unmodelled_fields_are_removed_by_cookie(default_policy: Policy) -> None:
    plan = plan_switch(default_policy, {})
    switch = SimulatedSwitch()
    switch.install(plan.flows)
    opaque = InstalledFlow(FlowKey(0, 7, ()), cookie=0x77, opaque=True)
    diff = diff_flows([*switch.dump(), opaque], plan.flows)
    assert diff.add == () and diff.delete == ()
    assert diff.delete_by_cookie == ((0, 0x77),)
    assert not diff.empty


def _flip_plans(make_policy: Any, flipped: int) -> tuple[tuple[FlowEntry, ...], ...]:
    def rules(flip: int | None) -> list[dict[str, Any]]:
        return [
            {
                "name": f"svc-{i}",
                "match": {"tcp_dst": 9000 + i},
                "class": "training" if (i % 2 == 0) != (i == flip) else "inference",
            }
            for i in range(12)
        ]

    ports = {"s1-eth1": 1}
    return tuple(
        plan_switch(make_policy(rules(flip)), ports).flows for flip in (None, flipped, None)
    )


def test_a_plan_that_replaces_entries_in_place_diffs_as_the_general_diff(
    make_policy: Any,
) -> None:
    """The confirmed plan (a tuple) against the next one: the identity fast path gives the
    general diff's answer (lists take the general path)."""
    first, flipped, back = _flip_plans(make_policy, 5)
    for old, new in ((first, flipped), (flipped, back), (first, first)):
        fast = diff_flows(old, new)
        general = diff_flows(list(old), list(new))
        assert fast == general
    assert len(diff_flows(first, flipped).add) == 4 and not diff_flows(first, flipped).delete
    # An equal entry built anew (same content, same cookie) is no change.
    copy = dataclasses.replace(first[3])
    assert copy is not first[3] and copy == first[3]
    rebuilt = (*first[:3], copy, *first[4:])
    assert diff_flows(first, rebuilt) == diff_flows(list(first), list(rebuilt))
    assert diff_flows(first, rebuilt).empty


def test_a_plan_with_another_shape_takes_the_general_diff(make_policy: Any) -> None:
    first, _, _ = _flip_plans(make_policy, 5)
    shorter = first[:-1]
    assert diff_flows(first, shorter) == diff_flows(list(first), list(shorter))
    assert diff_flows(first, shorter).delete == (first[-1].key,)
    moved = (*first[1:], first[0])  # same entries, other positions: every key differs
    assert diff_flows(first, moved) == diff_flows(list(first), list(moved))
    assert diff_flows(first, moved).empty
