"""What one switch should hold: flows, groups and meters, from everything that decides it.

One pure function, so the controller, the API's dry-run plan and the tests
compute the same desired state from the same inputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from controller.fabric.model import Path, Topology
from controller.flowid import FlowId
from controller.pipeline import tables
from controller.pipeline.fabric import fabric_plan
from controller.pipeline.flows import FlowEntry, Owner
from controller.pipeline.groups import GroupEntry, MeterEntry
from controller.pipeline.planner import BasePlans, plan_switch
from controller.policy.jobs import JobSpec
from controller.policy.model import Policy


@dataclass(frozen=True)
class FabricInputs:
    """What fabric forwarding needs beyond the policy: the discovered fabric and its pins."""

    topology: Topology
    edge_ports: frozenset[int]
    """Ports of this switch where hosts may be (up, settled, facing no switch)."""
    pinned: Mapping[FlowId, Path] = field(default_factory=dict)


@dataclass(frozen=True)
class DesiredState:
    flows: tuple[FlowEntry, ...]
    groups: tuple[GroupEntry, ...] = ()
    meters: tuple[MeterEntry, ...] = ()
    unresolved_rules: tuple[str, ...] = ()


def desired_state(
    policy: Policy,
    dpid: int,
    port_numbers: Mapping[str, int],
    overrides: Mapping[FlowId, str] | None = None,
    jobs: Sequence[JobSpec] = (),
    fabric: FabricInputs | None = None,
    base_plans: BasePlans | None = None,
) -> DesiredState:
    """The whole switch. In ``fabric`` mode the controller's forwarding replaces ``NORMAL``.

    A fabric switch with nothing discovered yet still gets its discovery
    entries (LLDP and ARP to the controller), so discovery can start.
    """
    plan = plan_switch(policy, port_numbers, overrides, jobs, base_plans)
    if not policy.forwarding.fabric:
        return DesiredState(plan.flows, unresolved_rules=plan.unresolved_rules)
    inputs = fabric or FabricInputs(Topology(switches=frozenset({dpid})), frozenset())
    forwarding = fabric_plan(
        inputs.topology,
        dpid,
        inputs.edge_ports,
        inputs.pinned,
        policy.forwarding.punt_rate,
    )
    kept = tuple(
        flow
        for flow in plan.flows
        if not (flow.table_id == tables.FORWARD and flow.owner is Owner.FORWARDING)
    )
    return DesiredState(
        (*kept, *forwarding.flows),
        forwarding.groups,
        forwarding.meters,
        plan.unresolved_rules,
    )
