"""``POST /v1/policy/plan``: what a policy would change on each switch, computed, not applied.

Pure: a policy, switch reports, the registered jobs and the fabric snapshot
in, the response model out.  The flows come from the controller's own
``desired_state`` and are compared with the controller's own diff, so the
plan shown is what an apply would send: registered jobs, the detector
overrides the switch holds (kept when the detection section is unchanged,
as the controller keeps them) and, in fabric mode, the forwarding and the
placed elephants of the published fabric all count.  Groups and meters are
not in a switch's report, so the plan lists flow entries and port queues.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from controller.api.schemas import (
    FlowChangesOut,
    PlanOut,
    PortPlanOut,
    QueueChangesOut,
    QuotaUseOut,
    SwitchPlanOut,
)
from controller.classify.reclassify import adopted_overrides
from controller.fabric.paths import pinned_paths
from controller.fabric.snapshot import FabricSnapshot, pins_of, topology_of
from controller.pipeline.describe import (
    FlowChanges,
    QueueChanges,
    flow_changes,
    format_flow,
    format_queue,
    queue_changes,
)
from controller.pipeline.desired import FabricInputs, desired_state
from controller.pipeline.flows import FIELD_BITS, FlowKey, InstalledFlow, MatchField, make_match
from controller.policy.detection import DetectionSpec
from controller.policy.jobs import JobSpec
from controller.policy.limits import MAX_POLICY_ENTRIES, rule_entries
from controller.policy.model import Policy
from controller.policy.quotas import JobLoad, quota_use
from controller.policy.warnings import policy_warnings
from controller.qos.plan import plan_port_qos, port_rate, unmatched_overrides
from controller.store.switches import PortReport, ReportedFlow, SwitchReport


def installed_flow(record: ReportedFlow) -> InstalledFlow:
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


def fabric_inputs_of(
    snapshot: FabricSnapshot | None, dpid: int, port_numbers: Iterable[int]
) -> FabricInputs | None:
    """What fabric forwarding needs, read back from the controller's published snapshot."""
    if snapshot is None:
        return None
    topology = topology_of(snapshot)
    facing_switches = topology.fabric_ports(dpid)
    edge = frozenset(n for n in port_numbers if n not in facing_switches)
    return FabricInputs(topology, edge, pinned_paths(topology, pins_of(snapshot)))


@dataclass(frozen=True)
class LiveState:
    """What decides a switch's entries besides the policy, as the API can read it back."""

    jobs: Sequence[JobSpec] = ()
    fabric: FabricSnapshot | None = None
    enforced_detection: DetectionSpec | None = None
    """The detection section of the active policy: overrides survive only an unchanged one."""
    job_tenants: Mapping[str, str | None] = field(default_factory=dict)
    """The tenant of each job, by name (None: an unscoped token's): for the quotas' headroom."""


def plan_report(
    policy: Policy, report: SwitchReport, applied: int | None, live: LiveState | None = None
) -> SwitchPlanOut:
    live = live or LiveState()
    installed = [installed_flow(record) for record in report.flows]
    port_numbers = {port.name: port.number for port in report.ports}
    # The controller keeps its overrides across a policy change unless the detection
    # section changed (then it starts over); the switch holds the ones it keeps.
    kept = policy.detection is not None and policy.detection == live.enforced_detection
    plan = desired_state(
        policy,
        report.dpid,
        port_numbers,
        adopted_overrides(policy, installed) if kept else {},
        live.jobs,
        fabric_inputs_of(live.fabric, report.dpid, port_numbers.values()),
    )
    flows = flow_changes(installed, plan.flows)
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
    live: LiveState | None = None,
) -> PlanOut:
    reports = list(reports)
    ports = {port.name for report in reports for port in report.ports}
    unmatched = unmatched_overrides(policy, ports) if reports else []
    warnings = [
        f"ports.overrides.{name}: no live switch has a port {name!r}; its rate applies to nothing"
        for name in unmatched
    ]
    ceilings = {
        port.name: port_rate(policy, port.name, port.link_bps)[0]
        for report in reports
        for port in report.ports
    }
    warnings += [str(warning) for warning in policy_warnings(policy, ceilings)]
    return PlanOut(
        active_version=active_version,
        rule_entries=rule_entries(policy.rules),
        rule_entry_limit=MAX_POLICY_ENTRIES,
        warnings=warnings,
        switches=[plan_report(policy, r, applied.get(r.dpid_hex), live) for r in reports],
        quotas=quota_headroom(policy, live or LiveState()),
    )


def quota_headroom(policy: Policy, live: LiveState) -> list[QuotaUseOut]:
    """Each quota of ``policy`` against the live jobs, counted as a registration counts."""
    loads = [JobLoad(job.name, live.job_tenants.get(job.name), job.entries) for job in live.jobs]
    return [
        QuotaUseOut(
            quota=use.quota,
            tenant=use.tenant,
            limit=use.limit,
            used=use.used,
            headroom=use.headroom,
        )
        for use in quota_use(policy.quotas, rule_entries(policy.rules), loads, policy.tenants)
    ]
