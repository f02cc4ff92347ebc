"""``POST /v1/policy/plan``: what a policy would change on each switch, computed, not applied.

Pure: a policy, switch reports and the registered jobs in, the response model
out.  Each switch's controller publishes with its report the inputs its own
plan was computed from (``SwitchInputs``: ports and their state, detector
overrides, the fabric as that switch sees it); the dry run calls the same
``plan`` on them with the candidate policy and the registered jobs, and
compares the result with what the switch holds (its flows, groups and meters)
through the controller's own diffs.  So the plan shown is what an apply would
send, groups and meters included, and a port that just came up counts as an
edge port exactly when the switch counts it as one.

Two things differ from the switch's last plan on purpose: the policy is the
candidate, and the detector overrides are dropped when the candidate's
detection section differs from the one the switch runs (its controller then
starts detection over).  A report without inputs (from a controller that
predates them) is planned from its reported ports alone, and the answer says
so for that switch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from controller.api.schemas import (
    FlowChangesOut,
    GroupChangesOut,
    MeterChangesOut,
    PlanInputsOut,
    PlanOut,
    PortPlanOut,
    QueueChangesOut,
    QuotaUseOut,
    SwitchPlanOut,
)
from controller.flowid import FlowId
from controller.pipeline.describe import (
    FlowChanges,
    QueueChanges,
    flow_changes,
    format_flow,
    format_group,
    format_meter,
    format_queue,
    queue_changes,
)
from controller.pipeline.flows import FIELD_BITS, FlowKey, InstalledFlow, MatchField, make_match
from controller.pipeline.groups import GroupDiff, MeterEntry, diff_groups
from controller.pipeline.plan import PortState, SwitchInputs, SwitchPlan, plan
from controller.policy.detection import DetectionSpec
from controller.policy.jobs import JobSpec
from controller.policy.limits import MAX_POLICY_ENTRIES, rule_entries
from controller.policy.model import Policy
from controller.policy.quotas import JobLoad, quota_use
from controller.policy.warnings import policy_warnings
from controller.qos.plan import PortQos, plan_port_qos, port_rate, unmatched_overrides
from controller.store.switches import PortReport, ReportedFlow, SwitchReport

NO_INPUTS_NOTE = (
    "this switch's controller published no plan inputs (it predates them): planned from its"
    " reported ports alone, all taken as up, without detector overrides or fabric inputs;"
    " entries those would add show as removed"
)


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


@dataclass(frozen=True)
class LiveState:
    """What decides a switch's entries besides the policy and its inputs, read from the store."""

    jobs: Sequence[JobSpec] = ()
    detections: Mapping[int, DetectionSpec | None] = field(default_factory=dict)
    """The detection section of each stored policy version a switch planned from: its
    overrides survive only an unchanged one."""
    job_tenants: Mapping[str, str | None] = field(default_factory=dict)
    """The tenant of each job, by name (None: an unscoped token's): for the quotas' headroom."""


@dataclass(frozen=True)
class MeterChanges:
    """What an apply does to a switch's meters: it adds and modifies; it deletes none."""

    added: tuple[MeterEntry, ...]
    changed: tuple[tuple[MeterEntry, MeterEntry], ...]
    """(held, planned)."""
    kept: tuple[MeterEntry, ...]
    unchanged: int

    @property
    def empty(self) -> bool:
        return not self.added and not self.changed


def meter_changes(held: Iterable[MeterEntry], planned: Iterable[MeterEntry]) -> MeterChanges:
    """Compare by id, as the controller does: a planned meter is sent when the switch lacks it
    or holds it otherwise; one the plan does not name is left alone."""
    have = {meter.meter_id: meter for meter in held}
    want = {meter.meter_id: meter for meter in planned}
    added = tuple(m for mid, m in sorted(want.items()) if mid not in have)
    changed = tuple(
        (have[mid], m) for mid, m in sorted(want.items()) if mid in have and have[mid] != m
    )
    kept = tuple(m for mid, m in sorted(have.items()) if mid not in want)
    return MeterChanges(added, changed, kept, len(want) - len(added) - len(changed))


def carried_overrides(
    policy: Policy, running: DetectionSpec | None, overrides: Mapping[FlowId, str]
) -> Mapping[FlowId, str]:
    """The overrides a switch keeps under ``policy``: all while the detection section stays
    ``running``, none once it changes or goes (its controller starts detection over)."""
    if policy.detection is None or policy.detection != running:
        return {}
    return overrides


@dataclass(frozen=True)
class DryRun:
    """One switch's plan under a candidate policy, and how it differs from what the switch holds."""

    inputs: SwitchInputs
    """The inputs planned from (the published ones, overrides carried as the switch would)."""
    known: bool
    """False: the report carried no inputs; ``inputs`` were made from its ports."""
    dropped_overrides: int
    note: str | None
    """Why the inputs are incomplete, when they are."""
    plan: SwitchPlan
    flows: FlowChanges
    groups: GroupDiff
    meters: MeterChanges

    @property
    def in_sync(self) -> bool:
        """Applying changes no entry (the ports' queues are judged apart)."""
        return self.flows.empty and self.groups.empty and self.meters.empty


def switch_inputs(
    policy: Policy, report: SwitchReport, live: LiveState
) -> tuple[SwitchInputs, int, str | None]:
    """The inputs to plan ``report``'s switch with, how many of its overrides they leave out,
    and why the inputs are incomplete when they are."""
    if report.inputs is None:
        ports = tuple(PortState(p.number, p.name, p.link_bps) for p in report.ports)
        inputs = SwitchInputs(report.dpid, ports, policy_version=report.applied_version)
        return inputs, 0, NO_INPUTS_NOTE
    published = report.inputs.inputs()
    version = published.policy_version
    note = None
    if published.overrides and (version is None or version not in live.detections):
        note = (
            f"the policy this switch planned from ({_version_text(version)}) is not in the"
            " store (or no longer validates): its detection section is unknown, so its"
            " detector overrides are left out"
        )
    running = live.detections.get(version) if version is not None else None
    overrides = carried_overrides(policy, running, published.overrides)
    dropped = len(published.overrides) - len(overrides)
    return dataclasses.replace(published, overrides=overrides), dropped, note


def _version_text(version: int | None) -> str:
    return "its --policy file" if version is None else f"version {version}"


def dry_run(policy: Policy, report: SwitchReport, live: LiveState | None = None) -> DryRun:
    """Plan ``report``'s switch under ``policy`` with ``plan`` itself, and diff it against
    what the switch holds with the controller's own diffs."""
    live = live or LiveState()
    inputs, dropped, note = switch_inputs(policy, report, live)
    planned = plan(policy, live.jobs, inputs)
    held_groups = {record.group_id: record.entry() for record in report.groups}
    return DryRun(
        inputs=inputs,
        known=report.inputs is not None,
        dropped_overrides=dropped,
        note=note,
        plan=planned,
        flows=flow_changes(
            [installed_flow(record) for record in report.flows], planned.desired.flows
        ),
        groups=diff_groups(held_groups, planned.desired.groups),
        meters=meter_changes(report.meters, planned.desired.meters),
    )


# --------------------------------------------------------------------------------------------
# the answer
# --------------------------------------------------------------------------------------------


def _flows_out(changes: FlowChanges) -> FlowChangesOut:
    return FlowChangesOut(
        added=[format_flow(flow) for flow in changes.added],
        changed=[str(change) for change in changes.changed],
        removed=[format_flow(flow) for flow in changes.removed],
        unchanged=changes.unchanged,
    )


def _groups_out(diff: GroupDiff, held: Mapping[int, str]) -> GroupChangesOut:
    return GroupChangesOut(
        added=[format_group(group) for group in diff.add],
        changed=[format_group(group) for group in diff.modify],
        removed=[held[group_id] for group_id in diff.delete],
        unchanged=diff.unchanged,
    )


def _meters_out(changes: MeterChanges) -> MeterChangesOut:
    return MeterChangesOut(
        added=[format_meter(meter) for meter in changes.added],
        changed=[
            f"{format_meter(planned)} (was rate={held.rate_pps} burst_size={held.burst})"
            for held, planned in changes.changed
        ],
        kept=[format_meter(meter) for meter in changes.kept],
        unchanged=changes.unchanged,
    )


def _queues_out(changes: QueueChanges) -> QueueChangesOut:
    return QueueChangesOut(
        added=[format_queue(queue) for queue in changes.added],
        changed=[str(change) for change in changes.changed],
        removed=[format_queue(queue) for queue in changes.removed],
        unchanged=changes.unchanged,
    )


def _port_out(port: PortReport, qos: PortQos) -> PortPlanOut:
    return PortPlanOut(
        name=port.name,
        number=port.number,
        link_bps=port.link_bps,
        rate_bps=port.rate_bps,
        planned_rate_bps=qos.rate_bps,
        note=qos.note,
        queues=_queues_out(queue_changes(port.queues, qos)),
    )


def _inputs_out(run: DryRun) -> PlanInputsOut:
    inputs, fabric = run.inputs, run.inputs.fabric
    return PlanInputsOut(
        known=run.known,
        policy_version=inputs.policy_version,
        jobs_version=inputs.jobs_version,
        ports_down=[port.name for port in inputs.ports if not port.up],
        overrides=len(inputs.overrides),
        overrides_dropped=run.dropped_overrides,
        edge_ports=None if fabric is None else sorted(fabric.edge_ports),
        pinned=0 if fabric is None else len(fabric.pinned),
        note=run.note,
    )


def plan_report(
    policy: Policy, report: SwitchReport, applied: int | None, live: LiveState | None = None
) -> SwitchPlanOut:
    run = dry_run(policy, report, live)
    ports = [
        _port_out(
            port, run.plan.qos.get(port.name) or plan_port_qos(policy, port.name, port.link_bps)
        )
        for port in report.ports
    ]
    in_sync = run.in_sync and all(
        not (p.queues.added or p.queues.changed or p.queues.removed)
        and p.rate_bps == p.planned_rate_bps
        for p in ports
    )
    held_groups = {record.group_id: format_group(record.entry()) for record in report.groups}
    return SwitchPlanOut(
        dpid=report.dpid_hex,
        applied_version=applied,
        in_sync=in_sync,
        unresolved_rules=list(run.plan.desired.unresolved_rules),
        inputs=_inputs_out(run),
        flows=_flows_out(run.flows),
        groups=_groups_out(run.groups, held_groups),
        meters=_meters_out(run.meters),
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
