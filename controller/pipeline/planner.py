"""Policy → the complete set of flows one switch should hold.

Pure: the same policy and port map always give the same flows (and so the
same cookies), which is what makes re-planning after a reconnect a no-op.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from controller.pipeline import tables
from controller.pipeline.flows import (
    OFPP_NORMAL,
    ApplyActions,
    FlowEntry,
    GotoTable,
    MatchField,
    Output,
    Owner,
    SetField,
    SetQueue,
    WriteMetadata,
    make_match,
)
from controller.pipeline.rules import UnresolvedPortError, expand_match
from controller.policy.match import ETH_TYPE_IPV4, ETH_TYPE_IPV6
from controller.policy.model import Policy


@dataclass(frozen=True, slots=True)
class SwitchPlan:
    """Every flow a switch should have, plus the rules that could not apply there."""

    flows: tuple[FlowEntry, ...]
    unresolved_rules: tuple[str, ...] = ()


def _classify_to(policy: Policy, class_name: str) -> tuple[WriteMetadata, GotoTable]:
    metadata = tables.class_metadata(policy.queue_id(class_name))
    return (
        WriteMetadata(metadata, tables.CLASS_METADATA_MASK),
        GotoTable(tables.MARK),
    )


def classification_flows(
    policy: Policy, port_numbers: Mapping[str, int]
) -> tuple[list[FlowEntry], list[str]]:
    """Table 0: one priority per rule, earlier rules higher, so the first match wins.

    Priorities count down from a fixed ceiling, so appending a rule leaves
    every existing entry (and its cookie) as it was.
    """
    flows: list[FlowEntry] = []
    unresolved: list[str] = []
    for index, rule in enumerate(policy.rules):
        try:
            matches = expand_match(rule.match, port_numbers, rule.bidirectional)
        except UnresolvedPortError:
            unresolved.append(rule.name)
            continue
        priority = tables.rule_priority(index)
        instructions = _classify_to(policy, rule.traffic_class)
        flows.extend(
            FlowEntry(tables.CLASSIFY, priority, match, instructions, Owner.POLICY)
            for match in matches
        )
    flows.append(
        FlowEntry(
            tables.CLASSIFY,
            tables.DEFAULT_CLASS_PRIORITY,
            make_match(),
            _classify_to(policy, policy.default_class),
            Owner.POLICY,
        )
    )
    return flows, unresolved


def marking_flows(policy: Policy) -> list[FlowEntry]:
    """Table 1: DSCP and queue per class.

    ``set_queue`` serves kernel-datapath OVS; the DSCP serves the userspace
    datapath, whose tc filters steer by DSCP.  Emitting both lets one
    pipeline work on either.  Non-IP packets (ARP) keep their bytes and only
    get the queue.
    """
    flows: list[FlowEntry] = []
    for name, traffic_class in policy.classes.items():
        queue_id = policy.queue_id(name)
        metadata = MatchField(
            "metadata", tables.class_metadata(queue_id), tables.CLASS_METADATA_MASK
        )
        forward = GotoTable(tables.FORWARD)
        for eth_type in (ETH_TYPE_IPV4, ETH_TYPE_IPV6):
            flows.append(
                FlowEntry(
                    tables.MARK,
                    tables.MARK_IP_PRIORITY,
                    make_match(metadata, MatchField("eth_type", eth_type)),
                    (
                        ApplyActions((SetField("ip_dscp", traffic_class.dscp), SetQueue(queue_id))),
                        forward,
                    ),
                    Owner.PIPELINE,
                )
            )
        flows.append(
            FlowEntry(
                tables.MARK,
                tables.MARK_OTHER_PRIORITY,
                make_match(metadata),
                (ApplyActions((SetQueue(queue_id),)), forward),
                Owner.PIPELINE,
            )
        )
    return flows


def forwarding_flows() -> list[FlowEntry]:
    """Table 2: hand the packet to OVS's own L2 learning switch.

    With no controller on the path of a first packet, ``NORMAL`` is the
    fastest correct L2 forwarding a single OVS bridge can do.
    """
    return [
        FlowEntry(
            tables.FORWARD,
            tables.FORWARD_PRIORITY,
            make_match(),
            (ApplyActions((Output(OFPP_NORMAL),)),),
            Owner.FORWARDING,
        )
    ]


def plan_switch(policy: Policy, port_numbers: Mapping[str, int]) -> SwitchPlan:
    """The whole pipeline for one switch, given its ports (name → OpenFlow number).

    A policy change re-plans every switch at once; most policies name no
    port, so switches share one plan, cached by the policy object and the
    ports its rules name.
    """
    named = {r.match.in_port for r in policy.rules if isinstance(r.match.in_port, str)}
    relevant = tuple(sorted((n, port_numbers[n]) for n in named if n in port_numbers))
    key = (id(policy), relevant)
    with _PLANS_LOCK:  # ten switches re-planning at once must not each build the plan
        cached = _PLANS.get(key)
        if cached is not None and cached[0] is policy:
            return cached[1]
        classification, unresolved = classification_flows(policy, port_numbers)
        flows = [*classification, *marking_flows(policy), *forwarding_flows()]
        plan = SwitchPlan(tuple(flows), tuple(unresolved))
        if len(_PLANS) >= _PLAN_CACHE_SIZE:
            _PLANS.pop(next(iter(_PLANS)))
        _PLANS[key] = (policy, plan)
        return plan


_PLAN_CACHE_SIZE = 64
_PLANS_LOCK = threading.Lock()
_PLANS: dict[tuple[int, tuple[tuple[str, int], ...]], tuple[Policy, SwitchPlan]] = {}
"""Keeps the policy object alive next to its plan, so its id cannot be reused meanwhile."""
