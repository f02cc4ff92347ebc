"""Bringing the switch to its plan: read (when needed), plan, send the difference, confirm.

One sync at a time.  Requests that arrive meanwhile (policy, jobs, fabric,
ports, detection, audit) coalesce into ``state.wanted`` and become one more
sync once this one is done, planned with the newest inputs: it diffs against
what the barrier just confirmed, so nothing already sent is sent again.
"""

from __future__ import annotations

import logging
import traceback

from controller.openflow.fabric_events import SwitchPorts
from controller.openflow.framing import with_xid
from controller.openflow.stats import class_counters
from controller.pipeline.diff import diff_flows
from controller.pipeline.groups import diff_groups
from controller.pipeline.plan import SwitchInputs, plan
from controller.pipeline.tables import TABLE_NAMES, entries_per_table
from controller.switch import codec, detect, reads, slave
from controller.switch.commands import (
    ClassCounts,
    Command,
    FabricInput,
    Log,
    Metric,
    Report,
    Send,
    Timer,
)
from controller.switch.events import Tick
from controller.switch.fastreplace import replace
from controller.switch.report import same_policy, sync_report
from controller.switch.requests import ask, expect, take_xids
from controller.switch.state import (
    SYNC_ASKS,
    Applying,
    Ask,
    Installed,
    SwitchConfig,
    SwitchState,
    Sync,
    may_write,
    updated_ports,
    want,
)


def start_if_idle(
    state: SwitchState, config: SwitchConfig, now: float, out: list[Command]
) -> SwitchState:
    """Start the wanted sync unless one is in flight (then it waits for that one's end)."""
    if not state.connected or state.sync is not None or state.wanted is None:
        return state
    if not may_write(state, config):
        return slave.observe(state, config, now, out)  # ports only; the rest waits
    wanted = state.wanted
    state = replace(state, wanted=None)
    if wanted.ports and state.ports is not None:
        ports = updated_ports(state.ports, wanted.ports)
        state = replace(state, ports=ports)
        out.append(FabricInput(SwitchPorts(state.dpid, ports)))
    # What the switch holds is unknown after a failure: its ports are read again too.
    read_ports = wanted.fresh or state.ports is None or state.installed is None
    read_tables = wanted.fresh or state.installed is None
    sync = Sync(", ".join(wanted.reasons), wanted.fresh, now, read_ports, read_tables)
    state = replace(state, sync=sync)
    if read_ports:
        state = ask(state, Ask.PORTS, codec.PORT_DESC, now, config, out)
    if read_tables:
        state = ask(state, Ask.FLOWS, codec.FLOWS, now, config, out)
        state = ask(state, Ask.GROUPS, codec.GROUPS, now, config, out)
        state = ask(state, Ask.METERS, codec.METERS, now, config, out)
        state = replace(state, sync=replace(sync, tables_asked_at=now))
    if not read_ports and not read_tables:
        state = _planned(state, config, now, out)
    return state


def answered(
    state: SwitchState,
    what: Ask,
    parts: tuple[object, ...],
    config: SwitchConfig,
    now: float,
    out: list[Command],
) -> SwitchState:
    """A read of the sync in flight is complete; plan once all of them are."""
    sync = state.sync
    if sync is None or sync.applying is not None:
        return state
    try:
        sync = reads.taken(sync, what, parts)
    except Exception as exc:
        return fail(state, config, now, out, f"{what.value} not decoded: {exc}")
    state = replace(state, sync=sync)
    if sync.read_done:
        state = _planned(state, config, now, out)
    return state


def _planned(
    state: SwitchState, config: SwitchConfig, now: float, out: list[Command]
) -> SwitchState:
    """Everything read: adopt what was read, plan, and send the difference (if any)."""
    sync = state.sync
    assert sync is not None
    if not may_write(state, config) or sync.reason == slave.PORTS_READ:
        # A slave's read, or no longer master while reading: the ports, nothing planned.
        return slave.read(state, out)
    snapshot = state.snapshot
    if sync.ports is not None:
        state = replace(state, ports=sync.ports)
        out.append(FabricInput(SwitchPorts(state.dpid, sync.ports)))
    if sync.read_tables:
        assert sync.flows is not None and sync.groups is not None and sync.meters is not None
        flows = tuple(counters.flow for counters in sync.flows)
        state = replace(state, installed=Installed(flows, sync.groups, sync.meters))
        if sync.reason == "audit":
            # Per-class counters for Prometheus, from the audit's own read.
            out.append(ClassCounts(class_counters(snapshot.policy, sync.flows)))
            out.append(Metric("stats_poll_seconds", "observe", now - sync.tables_asked_at))
        if not state.synced_once or state.adopt:
            state = detect.adopt(replace(state, adopt=False), flows, now, out)
    installed, ports = state.installed, state.ports
    assert installed is not None and ports is not None
    inputs = SwitchInputs(
        state.dpid,
        ports,
        state.overrides,
        state.fabric,
        snapshot.version,
        snapshot.jobs_version,
    )
    try:
        switch_plan = plan(snapshot.policy, snapshot.jobs, inputs, snapshot.base_plans)
        want = switch_plan.desired
        flow_diff = diff_flows(installed.flows, want.flows)
        group_diff = diff_groups(installed.groups, want.groups)
        meter_changes = [m for m in want.meters if installed.meters.get(m.meter_id) != m]
        batch = (
            codec.batch_messages(flow_diff, group_diff, meter_changes, installed.meters)
            if not flow_diff.empty or not group_diff.empty or meter_changes
            else []
        )
    except Exception:
        return fail(state, config, now, out, None, traceback.format_exc())
    applying = Applying(
        0, 0, 0, switch_plan, inputs, snapshot, flow_diff, group_diff, installed.meters
    )
    if not batch:
        return confirm(state, applying, False, config, now, out)
    state, first = take_xids(state, len(batch) + 1)
    barrier = first + len(batch)
    out.append(Metric("flow_mods", "inc", len(flow_diff.add), (state.tag, "add")))
    out.append(Metric("flow_mods", "inc", len(flow_diff.delete), (state.tag, "delete")))
    data = b"".join(with_xid(msg, first + n) for n, msg in enumerate(batch))
    out.append(Send(data + with_xid(codec.BARRIER, barrier)))
    applying = replace(applying, barrier=barrier, first_xid=first, last_xid=barrier - 1)
    # Unknown until the barrier confirms: a failure re-reads.
    state = replace(state, installed=None, sync=replace(sync, applying=applying))
    return expect(state, barrier, Ask.BARRIER, now, config, out)


def rejected(state: SwitchState, xid: int, text: str) -> SwitchState | None:
    """Record a switch error for a message of the batch in flight; None if it is not one."""
    sync = state.sync
    applying = sync.applying if sync is not None else None
    if sync is None or applying is None or not applying.first_xid <= xid <= applying.last_xid:
        return None
    applying = replace(applying, errors=(*applying.errors, text))
    return replace(state, sync=replace(sync, applying=applying))


def barrier_passed(
    state: SwitchState, config: SwitchConfig, now: float, out: list[Command]
) -> SwitchState:
    """OpenFlow answers in order: every error for the batch has arrived by its barrier."""
    sync = state.sync
    assert sync is not None and sync.applying is not None
    errors = sync.applying.errors
    if errors:
        return fail(
            state, config, now, out, f"{len(errors)} message(s) rejected, first: {errors[0]}"
        )
    return confirm(state, sync.applying, True, config, now, out)


def confirm(
    state: SwitchState,
    applied: Applying,
    changed: bool,
    config: SwitchConfig,
    now: float,
    out: list[Command],
) -> SwitchState:
    """The switch holds the plan (barrier passed, or nothing to change)."""
    sync = state.sync
    assert sync is not None
    tag, want, snapshot = state.tag, applied.plan.desired, applied.snapshot
    installed = Installed(
        want.flows,
        {group.group_id: group for group in want.groups},
        {**applied.base_meters, **{meter.meter_id: meter for meter in want.meters}},
    )
    state = replace(state, installed=installed, qos_plans=applied.plan.qos, last_plan=applied)
    if not same_policy(state.applied, snapshot):
        # From the policy reaching the controller to this switch holding it: a new job set
        # with the same policy is not a new policy.
        out.append(Metric("apply_seconds", "observe", now - snapshot.since))
        state = replace(state, applied=snapshot)
    version = snapshot.version if snapshot.version is not None else -1
    out.append(Metric("applied_version", "set", version, (tag,)))
    reported = (applied.inputs, state.bridge is not None)
    if reported != state.reported or changed:
        # Reports carry every flow: send one only when something changed.
        out.append(Report(sync_report(state, applied, config)))
        state = replace(state, reported=reported)
    for table_id, count in entries_per_table(want.flows).items():
        out.append(Metric("flows", "set", count, (tag, TABLE_NAMES[table_id])))
    if state.synced_once and sync.reason == "audit" and changed:
        out.append(Metric("drift_repairs", "inc", 1, (tag, "flows")))
    if want.unresolved_rules:
        out.append(
            Log(
                logging.WARNING,
                "switch %s: rules %s name ports this switch lacks; skipped",
                (tag, ", ".join(want.unresolved_rules)),
            )
        )
    out.append(Metric("sync_seconds", "observe", now - sync.started))
    if config.manage_qos and (sync.fresh or state.qos_applied != state.qos_plans):
        state = replace(state, qos_wanted=True)
    flow_diff, group_diff = applied.flow_diff, applied.group_diff
    groups = ""
    if want.groups or not group_diff.empty:
        groups = (
            f", groups +{len(group_diff.add)} ~{len(group_diff.modify)} -{len(group_diff.delete)}"
        )
    summary = f"+{len(flow_diff.add)} -{len(flow_diff.delete)} ={flow_diff.unchanged} flows{groups}"
    if not (summary.startswith("+0 -0 ") and state.synced_once):
        out.append(Log(logging.INFO, "switch %s in sync (%s): %s", (tag, sync.reason, summary)))
    if not state.synced_once:
        # Detection and port counters start with the first confirmed plan.
        out.append(Timer(0.0, Tick("detect", state.epoch, now)))
        out.append(Timer(0.0, Tick("ports", state.epoch, now)))
        state = replace(state, synced_once=True)
    state = replace(state, sync=None)
    return start_if_idle(state, config, now, out)


def fail(
    state: SwitchState,
    config: SwitchConfig,
    now: float,
    out: list[Command],
    detail: str | None,
    exc_text: str | None = None,
) -> SwitchState:
    """The sync failed: what the switch holds is unknown; a fresh sync follows after
    ``retry_s`` (a timer), and anything wanted meanwhile starts at once."""
    sync = state.sync
    assert sync is not None
    pending = {x: r for x, r in state.pending.items() if r.ask not in SYNC_ASKS}
    state = replace(state, sync=None, installed=None, pending=pending)
    out.append(Metric("sync_failures", "inc", 1, (state.tag,)))
    if detail is not None:
        out.append(
            Log(
                logging.WARNING if slave.stepped_down(state) else logging.ERROR,
                "switch %s: sync (%s) failed: %s; will retry",
                (state.tag, sync.reason, detail),
            )
        )
    else:
        out.append(
            Log(
                logging.ERROR,
                "switch %s: sync (%s) failed; will retry",
                (state.tag, sync.reason),
                exc_text=exc_text,
            )
        )
    if not state.retries:
        out.append(Timer(config.retry_s, Tick("retry", state.epoch, now + config.retry_s)))
    state = replace(state, retries=(*state.retries, sync.reason))
    return start_if_idle(state, config, now, out)


def retry(state: SwitchState, config: SwitchConfig, now: float, out: list[Command]) -> SwitchState:
    """The retry timer: a fresh sync for each failed one (they coalesce into one)."""
    for reason in state.retries:
        state = want(state, f"retry of {reason}", fresh=True)
    state = replace(state, retries=())
    return start_if_idle(state, config, now, out)
