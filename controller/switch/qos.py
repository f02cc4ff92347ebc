"""Port queues (OVSDB, tc) as the step sees them: work to ask for, outcomes to log.

The work itself blocks (OVSDB transactions, netlink), so the step only asks
for it (``QosWork``) and the actor runs it on the runtime's blocking pool,
one item at a time per switch; its result comes back as an event.  Asks made
while an item is out coalesce: the next item takes the newest plans.
"""

from __future__ import annotations

import logging

from controller.qos.ovsdb import Bridge
from controller.qos.telemetry import QueueStats, new_drops, port_queues
from controller.switch.commands import (
    Command,
    Log,
    Metric,
    QosApply,
    QosWork,
    QueueRead,
    QueuesObserved,
    Report,
    Timer,
)
from controller.switch.events import QosResult, QueueReadResult, Tick
from controller.switch.fastreplace import replace
from controller.switch.report import sync_report
from controller.switch.state import SwitchConfig, SwitchState, may_write

SKIPPED = "QoS skipped (bridge not in the local OVSDB, or OVSDB unreachable)"


def dispatch(state: SwitchState, config: SwitchConfig, out: list[Command]) -> SwitchState:
    """Start the next QoS item if none is out: queues to the plan first, then telemetry."""
    if not config.manage_qos or not state.connected or state.qos_busy:
        return state
    if not may_write(state, config):
        return state  # a bridge's queues are its master's to write (and to publish)
    if state.qos_wanted:
        spec = state.snapshot.policy.detection
        count_limit = None
        refresh = None
        if spec is not None and state.count_limit != spec.max_tracked:
            count_limit = spec.max_tracked
        if spec is not None and state.refresh_checked != spec.interval:
            refresh = spec.interval
            state = replace(state, refresh_checked=spec.interval)
        out.append(QosWork(QosApply(state.qos_plans, state.bridge, count_limit, refresh)))
        return replace(state, qos_wanted=False, qos_busy=True)
    if state.queue_read_due:
        state = replace(state, queue_read_due=False)
        if state.qos_plans:
            out.append(QosWork(QueueRead(state.qos_plans, state.bridge)))
            state = replace(state, qos_busy=True)
    return state


def queues_tick(
    state: SwitchState, config: SwitchConfig, now: float, out: list[Command]
) -> SwitchState:
    interval = config.queue_read_interval_s
    out.append(Timer(interval, Tick("queues", state.epoch, now + interval)))
    return replace(state, queue_read_due=True)


def _bridge_found(
    state: SwitchState,
    bridge: Bridge | None,
    error: str | None,
    config: SwitchConfig,
    out: list[Command],
) -> SwitchState:
    """The bridge of this datapath, looked up once; the report is sent again with its queues."""
    if error is not None:
        out.append(
            Log(
                logging.ERROR,
                "switch %s: cannot read OVSDB bridges: %s; will retry",
                (state.tag, error),
            )
        )
    if bridge is None or state.bridge is not None:
        return state
    state = replace(state, bridge=bridge)
    if state.last_plan is not None and state.reported is not None:
        out.append(Report(sync_report(state, state.last_plan, config)))
        state = replace(state, reported=(state.reported[0], True))
    return state


def done(
    state: SwitchState, result: QosResult, config: SwitchConfig, out: list[Command]
) -> SwitchState:
    """A ``QosApply`` came back: log and count what it did."""
    state = replace(state, qos_busy=False)
    state = _bridge_found(state, result.bridge, result.bridge_error, config, out)
    tag = state.tag
    if result.fenced:
        # The lease ran out under the work (a pause): the new master writes the queues.
        # Not wanted again here (that would spin until the step-down arrives): mastering
        # the switch again syncs it, and a sync whose queues differ from the applied wants them.
        out.append(
            Log(
                logging.WARNING,
                "switch %s: queues not written: this instance no longer holds its lease",
                (tag,),
            )
        )
        return state
    if result.error is not None:
        out.append(
            Log(
                logging.ERROR,
                "switch %s: queues not set; will retry",
                (tag,),
                exc_text=result.error,
            )
        )
        return state
    bridge = result.bridge
    if bridge is None:
        out.append(Log(logging.DEBUG, "switch %s: %s", (tag, SKIPPED)))
        return state
    if result.count_limited is not None:
        state = replace(state, count_limit=result.count_limited)
    if result.count_error is not None:
        out.append(
            Log(
                logging.ERROR, "switch %s: counting table not capped: %s", (tag, result.count_error)
            )
        )
    if result.refresh_error is not None:
        out.append(
            Log(
                logging.DEBUG,
                "switch %s: counter refresh not read: %s",
                (tag, result.refresh_error),
            )
        )
    if result.refresh_warning is not None:
        # One ovs-vswitchd serves every local switch: say it once.
        out.append(Log(logging.WARNING, "%s", (result.refresh_warning,), once=True))
    outcome = result.outcome
    if outcome is None:
        return state
    plans = result.plans
    applied = plans if outcome.ok and not outcome.vanished else None
    state = replace(state, qos_applied=applied)
    if outcome.vanished:
        out.append(
            Log(
                logging.INFO,
                "switch %s: ports gone before their queues were set: %s",
                (tag, ", ".join(outcome.vanished)),
            )
        )
    for port, detail in outcome.failed.items():
        out.append(Metric("qos_errors", "inc", 1, (port,)))
        out.append(
            Log(
                logging.ERROR,
                "switch %s port %s: QoS not applied: %s; will retry",
                (tag, port, detail),
            )
        )
    if outcome.burst_ports:  # OVS resets the root class's burst on any reconfiguration
        out.append(
            Log(
                logging.INFO,
                "switch %s: HTB burst set on %s",
                (tag, ", ".join(outcome.burst_ports)),
            )
        )
    if outcome.queue_ports:  # classes OVS made since (a job's) come with the kernel's queue
        out.append(
            Log(
                logging.INFO,
                "switch %s: HTB queue length set on %s",
                (tag, ", ".join(outcome.queue_ports)),
            )
        )
    if state.synced_once and (outcome.changed_ports or outcome.filtered_ports):
        out.append(Metric("drift_repairs", "inc", 1, (tag, "qos")))
        # Each part names its own ports and an empty one is left out: a "-" for "none"
        # read as a port name gone missing (a kernel datapath never sets filters).
        repairs = (("queues", outcome.changed_ports), ("tc filters", outcome.filtered_ports))
        text = "; ".join(f"{what} set on {', '.join(ports)}" for what, ports in repairs if ports)
        out.append(Log(logging.INFO, "switch %s: %s", (tag, text)))
    provisioned = len(plans) - len(outcome.failed) - len(outcome.vanished)
    summary = f"queues on {provisioned}/{len(plans)} ports ({bridge.datapath_type} datapath)"
    out.append(Log(logging.DEBUG, "switch %s: %s", (tag, summary)))
    return state


def read(
    state: SwitchState, result: QueueReadResult, config: SwitchConfig, out: list[Command]
) -> SwitchState:
    """Queue telemetry came back: rates, drops of latency classes, metrics and observers."""
    state = replace(state, qos_busy=False)
    state = _bridge_found(state, result.bridge, result.bridge_error, config, out)
    tag = state.tag
    if result.error is not None:
        out.append(
            Log(logging.ERROR, "switch %s: queue telemetry not read", (tag,), exc_text=result.error)
        )
        return state
    if state.bridge is None:
        return state
    plans = state.qos_plans
    queues: list[QueueStats] = []
    for port in sorted(plans):
        if port in result.errors:
            out.append(
                Log(
                    logging.DEBUG,
                    "switch %s: no queue telemetry for %s: %s",
                    (tag, port, result.errors[port]),
                )
            )
        classes = result.counters.get(port)
        if classes is None:
            continue
        queues += port_queues(port, classes, plans[port].queues, state.queue_stats, result.wall)
    if result.burst_short & plans.keys():
        state = replace(
            state, qos_wanted=True
        )  # OVS reconfigured a port: its root class lost its burst
    dropped = new_drops(queues, state.queue_stats)
    started = tuple((q, n) for q, n in dropped if (q.port, q.traffic_class) not in state.dropping)
    state = replace(
        state,
        dropping=frozenset((q.port, q.traffic_class) for q, _ in dropped),
        queue_stats={(q.port, q.traffic_class): q for q in queues},
    )
    out.append(QueuesObserved(tuple(queues), started))
    for queue, count in started:
        out.append(
            Log(
                logging.WARNING,
                "switch %s port %s: latency class %s dropped %d packet(s) (backlog %d B)",
                (tag, queue.port, queue.traffic_class, count, queue.backlog_bytes),
            )
        )
    return state
