"""One plan for one switch, from everything that decides it.

The switch's actor plans with it, the API's dry run (``POST /v1/policy/plan``)
plans with it from the inputs each switch last published, and the tests plan
with it: a switch and the dry run disagree only when their inputs differ, and
the inputs are published with every switch report so that they do not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from controller.flowid import FlowId
from controller.pipeline.desired import DesiredState, FabricInputs, desired_state
from controller.pipeline.planner import BasePlans
from controller.policy.jobs import JobSpec
from controller.policy.model import Policy
from controller.qos.plan import PortQos, plan_port_qos


@dataclass(frozen=True)
class PortState:
    """A switch port as the controller keeps it (read from the switch, or a port status)."""

    number: int
    name: str
    link_bps: int | None
    up: bool = True
    """Carrier up and not administratively down (fabric forwarding avoids dead ports)."""
    hw_addr: int = 0


@dataclass(frozen=True)
class SwitchInputs:
    """Everything about one switch, beyond the policy and jobs, that its plan depends on."""

    dpid: int
    ports: tuple[PortState, ...]
    overrides: Mapping[FlowId, str] = field(default_factory=dict)
    """Flows detection moved to another class (elephants), by flow."""
    fabric: FabricInputs | None = None
    """The discovered fabric as this switch sees it (None: not fabric forwarding)."""
    policy_version: int | None = None
    jobs_version: int = 0


@dataclass(frozen=True)
class SwitchPlan:
    desired: DesiredState
    """Flows, groups and meters."""
    qos: Mapping[str, PortQos]
    """Queues by port name."""


def plan(
    policy: Policy,
    jobs: Sequence[JobSpec],
    inputs: SwitchInputs,
    base_plans: BasePlans | None = None,
) -> SwitchPlan:
    """What the switch should hold: its flows, groups, meters and port queues."""
    desired = desired_state(
        policy,
        inputs.dpid,
        {port.name: port.number for port in inputs.ports},
        inputs.overrides,
        jobs,
        inputs.fabric,
        base_plans,
    )
    if base_plans is None:
        # qos.plan, not qos.provision (whose plan_ports is this): provision imports the OVSDB
        # and tc clients (eventlet, pyroute2), which the API and `flowlane up` never use.
        qos = {
            port.name: plan_port_qos(policy, port.name, port.link_bps, jobs)
            for port in inputs.ports
        }
    else:
        qos = {port.name: _port_qos(policy, port, jobs, base_plans) for port in inputs.ports}
    return SwitchPlan(desired, qos)


def _port_qos(
    policy: Policy, port: PortState, jobs: Sequence[JobSpec], base_plans: BasePlans
) -> PortQos:
    """``plan_port_qos`` of one port, planned once per policy, job set and link speed.

    A port's queues depend on its name only through ``ports.overrides``
    (``controller.qos.plan.port_rate``), and a hundred switches re-plan their ports at
    every change: a port that no override names gets the queues planned for the first
    such port of its speed, under its own name."""
    named = port.name if port.name in policy.ports.overrides else None
    template = base_plans.memo(
        ("port-qos", named, port.link_bps),
        jobs,
        lambda: plan_port_qos(policy, port.name, port.link_bps, jobs),
    )
    if template.port_name == port.name:
        return template
    return replace(template, port_name=port.name)
