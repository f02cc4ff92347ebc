"""The whole desired state of a switch: the policy's pipeline, and fabric forwarding or NORMAL.

Every expectation is checked against the two planners it combines
(``plan_switch`` and ``fabric_plan``), so an entry lost or duplicated on the
way shows up as a difference of multisets.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest

from controller.fabric.model import Path, Topology
from controller.flowid import ETH_TYPE_IPV4, IP_PROTO_TCP, FlowId
from controller.pipeline import tables
from controller.pipeline.desired import DesiredState, FabricInputs, desired_state
from controller.pipeline.fabric import (
    ETH_TYPE_ARP,
    ETH_TYPE_LLDP,
    PUNT_METER_ID,
    fabric_plan,
    punt_meter,
)
from controller.pipeline.flows import (
    OFPP_CONTROLLER,
    OFPP_NORMAL,
    ApplyActions,
    FlowEntry,
    MatchField,
    Meter,
    Output,
    Owner,
    make_match,
)
from controller.pipeline.groups import MeterEntry
from controller.pipeline.planner import plan_switch
from controller.policy.jobs import JobSpec
from controller.policy.load import parse_policy
from controller.policy.model import Policy
from tests.support.leaf_spine import DOCUMENT, HOST_PORT, leaf_spine

ELEPHANT = FlowId(ETH_TYPE_IPV4, IP_PROTO_TCP, 0x0A00000B, 0x0A00000C, 40_000, 5201)


def policy(forwarding: object = None, **changes: Any) -> Policy:
    document = copy.deepcopy(DOCUMENT)
    document.update(changes)
    if forwarding is not None:
        document["forwarding"] = forwarding
    return parse_policy(document, source="test")


def job() -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": "allreduce",
            "class": "training",
            "endpoints": [{"ipv4": "10.0.0.11"}, {"ipv4": "10.0.0.12", "ports": 29500}],
        }
    )


def pinned() -> dict[FlowId, Path]:
    return {ELEPHANT: ((11, 2), (2, 2))}


def fabric_inputs() -> FabricInputs:
    return FabricInputs(leaf_spine(), frozenset({HOST_PORT}), pinned())


def normal_entries(flows: tuple[FlowEntry, ...]) -> list[FlowEntry]:
    return [
        flow
        for flow in flows
        if any(
            isinstance(instruction, ApplyActions) and Output(OFPP_NORMAL) in instruction.actions
            for instruction in flow.instructions
        )
    ]


def owned(flows: tuple[FlowEntry, ...], owner: Owner) -> list[FlowEntry]:
    return [flow for flow in flows if flow.owner is owner]


# --------------------------------------------------------------------------------------------
# Normal forwarding
# --------------------------------------------------------------------------------------------


def test_normal_mode_keeps_the_single_normal_entry_and_needs_no_groups_or_meters() -> None:
    normal = policy()
    assert not normal.forwarding.fabric
    state = desired_state(normal, 11, {}, fabric=fabric_inputs())
    forward = [flow for flow in state.flows if flow.table_id == tables.FORWARD]
    assert forward == normal_entries(state.flows)
    [entry] = forward
    assert entry.priority == tables.FORWARD_PRIORITY
    assert entry.match == make_match()
    assert (state.groups, state.meters) == ((), ())


def test_normal_mode_is_exactly_the_policy_plan() -> None:
    """Fabric inputs, even when given, change nothing while the policy says ``normal``."""
    normal = policy()
    overrides = {ELEPHANT: "training"}
    state = desired_state(normal, 11, {}, overrides, [job()], fabric_inputs())
    plan = plan_switch(normal, {}, overrides, [job()])
    assert state == DesiredState(plan.flows, unresolved_rules=plan.unresolved_rules)


def test_unresolved_rules_are_reported_in_both_modes() -> None:
    rules = [
        *DOCUMENT["rules"],
        {"name": "uplink", "match": {"in_port": "s1-eth9"}, "class": "training"},
    ]
    for forwarding in (None, "fabric"):
        state = desired_state(policy(forwarding, rules=rules), 11, {"s1-eth1": 1})
        assert state.unresolved_rules == ("uplink",)


# --------------------------------------------------------------------------------------------
# Fabric forwarding
# --------------------------------------------------------------------------------------------


def test_fabric_mode_replaces_normal_with_the_fabric_plan() -> None:
    fabric = policy("fabric")
    inputs = fabric_inputs()
    state = desired_state(fabric, 11, {}, fabric=inputs)
    expected = fabric_plan(inputs.topology, 11, inputs.edge_ports, inputs.pinned)
    assert normal_entries(state.flows) == []
    assert set(expected.flows) <= set(state.flows)
    assert state.groups == expected.groups
    assert state.groups, "two spines give the remote host a select group"
    assert state.meters == (MeterEntry(PUNT_METER_ID, 1000, 100),)
    placement = owned(state.flows, Owner.PLACEMENT)
    assert [flow.instructions for flow in placement] == [(ApplyActions((Output(2),)),)]


def test_fabric_mode_is_the_policy_plan_without_normal_plus_the_fabric_plan() -> None:
    """No entry lost, none duplicated: the two planners' multisets, minus the NORMAL entry."""
    fabric = policy({"mode": "fabric", "punt_rate": 500})
    overrides = {ELEPHANT: "training"}
    inputs = fabric_inputs()
    state = desired_state(fabric, 11, {}, overrides, [job()], inputs)
    plan = plan_switch(fabric, {}, overrides, [job()])
    forwarding = fabric_plan(inputs.topology, 11, inputs.edge_ports, inputs.pinned, 500)
    [normal] = normal_entries(plan.flows)
    expected = Counter(plan.flows)
    expected.subtract([normal])
    expected.update(forwarding.flows)
    assert Counter(state.flows) == +expected
    assert len(state.flows) == len(plan.flows) - 1 + len(forwarding.flows)
    assert state.groups == forwarding.groups
    assert state.meters == forwarding.meters == (punt_meter(500),)


def test_policy_entries_keep_their_order_before_the_fabric_entries() -> None:
    fabric = policy("fabric")
    inputs = fabric_inputs()
    state = desired_state(fabric, 11, {}, fabric=inputs)
    plan = plan_switch(fabric, {})
    kept = tuple(flow for flow in plan.flows if flow not in normal_entries(plan.flows))
    forwarding = fabric_plan(inputs.topology, 11, inputs.edge_ports, inputs.pinned)
    assert state.flows == (*kept, *forwarding.flows)


@pytest.mark.parametrize("inputs", [None, FabricInputs(Topology(), frozenset())])
def test_a_fabric_switch_with_nothing_discovered_still_punts_lldp_and_arp(
    inputs: FabricInputs | None,
) -> None:
    state = desired_state(policy("fabric"), 7, {}, fabric=inputs)
    punt = (Meter(PUNT_METER_ID), ApplyActions((Output(OFPP_CONTROLLER),)))
    discovery = owned(state.flows, Owner.DISCOVERY)
    assert discovery == [
        FlowEntry(
            tables.CLASSIFY,
            tables.PUNT_PRIORITY,
            make_match(MatchField("eth_type", eth_type)),
            punt,
            Owner.DISCOVERY,
        )
        for eth_type in (ETH_TYPE_LLDP, ETH_TYPE_ARP)
    ]
    assert normal_entries(state.flows) == []
    assert state.meters == (punt_meter(1000),)
    assert state.groups == ()
    # Unknown destinations still reach the controller (host learning).
    miss = [
        flow
        for flow in state.flows
        if flow.table_id == tables.FORWARD and flow.priority == tables.FORWARD_PRIORITY
    ]
    assert [flow.instructions for flow in miss] == [punt]


def test_no_inputs_is_the_same_as_a_lone_switch_with_no_edge_ports() -> None:
    fabric = policy("fabric")
    lone = FabricInputs(Topology(switches=frozenset({7})), frozenset())
    assert desired_state(fabric, 7, {}) == desired_state(fabric, 7, {}, fabric=lone)


@pytest.mark.parametrize("forwarding", [None, "fabric"])
def test_detector_overrides_and_jobs_appear_in_both_modes(forwarding: str | None) -> None:
    chosen = policy(forwarding)
    overrides = {ELEPHANT: "training"}
    plan = plan_switch(chosen, {}, overrides, [job()])
    state = desired_state(chosen, 11, {}, overrides, [job()], fabric_inputs())
    detector = owned(state.flows, Owner.DETECTOR)
    jobs = owned(state.flows, Owner.JOB)
    assert len(detector) == 1
    assert detector == owned(plan.flows, Owner.DETECTOR)
    assert jobs
    assert jobs == owned(plan.flows, Owner.JOB)
    bare = desired_state(chosen, 11, {}, fabric=fabric_inputs())
    assert owned(bare.flows, Owner.DETECTOR) == owned(bare.flows, Owner.JOB) == []


def test_each_switch_gets_its_own_forwarding_from_the_same_inputs() -> None:
    fabric = policy("fabric")
    inputs = fabric_inputs()
    leaf, spine = (
        desired_state(fabric, 11, {}, fabric=inputs),
        desired_state(
            fabric, 1, {}, fabric=FabricInputs(inputs.topology, frozenset(), inputs.pinned)
        ),
    )
    assert owned(leaf.flows, Owner.POLICY) == owned(spine.flows, Owner.POLICY)
    assert owned(leaf.flows, Owner.FORWARDING) != owned(spine.flows, Owner.FORWARDING)
    assert spine.groups == ()  # a spine reaches each leaf over one link
    assert owned(spine.flows, Owner.PLACEMENT) == []  # the pinned path does not cross spine 1
