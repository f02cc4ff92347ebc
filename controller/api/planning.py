"""``POST /v1/policy/plan``: what a policy would change on each switch, computed, not applied.

Pure: a policy and switch reports in, the response model out.  The flows
are planned with the controller's own planner and compared with the
controller's own diff, so the plan shown is what an apply would send.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from controller.api.schemas import (
    FlowChangesOut,
    PlanOut,
    PortPlanOut,
    QueueChangesOut,
    SwitchPlanOut,
)
from controller.pipeline.describe import (
    FlowChanges,
    QueueChanges,
    flow_changes,
    format_flow,
    format_queue,
    queue_changes,
)
from controller.pipeline.flows import FIELD_BITS, FlowKey, InstalledFlow, MatchField, make_match
from controller.pipeline.planner import plan_switch
from controller.policy.model import Policy
from controller.qos.plan import plan_port_qos
from controller.store.switches import FlowRecord, PortReport, SwitchReport


def installed_flow(record: FlowRecord) -> InstalledFlow:
    """A reported flow in the planner's canonical form.

    A field the planner never uses (a foreign entry's ``arp_op``, say) cannot
    be canonicalised; such an entry is kept as reported, and as no plan has
    its key it shows up as removed, which is what an apply does to it.
    """
    table_id, priority, fields, cookie = record
    match_fields = [MatchField(name, value, mask) for name, value, mask in fields]
    try:
        if not all(f.name in FIELD_BITS for f in match_fields):
            raise ValueError("foreign match field")
        match = make_match(*match_fields)
    except ValueError:
        match = tuple(sorted(match_fields))
    return InstalledFlow(FlowKey(table_id, priority, match), cookie)


def _flows_out(changes: FlowChanges) -> FlowChangesOut:
    return FlowChangesOut(
        added=[format_flow(flow) for flow in changes.added],
        changed=[str(change) for change in changes.changed],
        removed=[format_flow(flow) for flow in changes.removed],
        unchanged=changes.unchanged,
    )


def _queues_out(changes: QueueChanges) -> QueueChangesOut:
    return QueueChangesOut(
        added=[format_queue(queue) for queue in changes.added],
        changed=[str(change) for change in changes.changed],
        removed=[format_queue(queue) for queue in changes.removed],
        unchanged=changes.unchanged,
    )


def plan_port(policy: Policy, port: PortReport) -> PortPlanOut:
    qos = plan_port_qos(policy, port.name, port.link_bps)
    return PortPlanOut(
        name=port.name,
        number=port.number,
        link_bps=port.link_bps,
        rate_bps=port.rate_bps,
        planned_rate_bps=qos.rate_bps,
        note=qos.note,
        queues=_queues_out(queue_changes(port.queues, qos)),
    )


def plan_report(policy: Policy, report: SwitchReport, applied: int | None) -> SwitchPlanOut:
    plan = plan_switch(policy, {port.name: port.number for port in report.ports})
    flows = flow_changes((installed_flow(record) for record in report.flows), plan.flows)
    ports = [plan_port(policy, port) for port in report.ports]
    in_sync = flows.empty and all(
        not (p.queues.added or p.queues.changed or p.queues.removed)
        and p.rate_bps == p.planned_rate_bps
        for p in ports
    )
    return SwitchPlanOut(
        dpid=report.dpid_hex,
        applied_version=applied,
        in_sync=in_sync,
        unresolved_rules=list(plan.unresolved_rules),
        flows=_flows_out(flows),
        ports=ports,
    )


def plan_switches(
    policy: Policy,
    reports: Iterable[SwitchReport],
    applied: Mapping[str, int],
    active_version: int | None,
) -> PlanOut:
    return PlanOut(
        active_version=active_version,
        switches=[plan_report(policy, r, applied.get(r.dpid_hex)) for r in reports],
    )
