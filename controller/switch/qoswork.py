"""The blocking side of queues: OVSDB transactions and netlink reads, run off the actor.

``SwitchActor`` runs these on the runtime's blocking pool, keyed by the
switch, so one switch's items never overlap; each returns a plain value that
goes back to the step as an event.  Nothing here raises: an unexpected
failure comes back as ``error`` (a traceback) for the step to log.
"""

from __future__ import annotations

import time
import traceback

from controller.classify.thresholds import refresh_warning
from controller.pipeline import tables
from controller.qos import tc
from controller.qos.ovsdb import Bridge, Ovsdb, OvsdbError
from controller.qos.provision import reconcile_bridge
from controller.qos.telemetry import ClassCounters
from controller.switch.commands import QosApply, QueueRead
from controller.switch.events import QosResult, QueueReadResult


def _bridge(ovsdb: Ovsdb, dpid: int, known: Bridge | None) -> tuple[Bridge | None, str | None]:
    """The OVSDB bridge of this datapath (None: not local), or why it could not be read."""
    if known is not None:
        return known, None
    try:
        return ovsdb.bridge_for(dpid), None
    except OvsdbError as exc:
        return None, str(exc)


def apply(ovsdb: Ovsdb, dpid: int, job: QosApply) -> QosResult:
    """Queues (and tc filters, root bursts) to the plan; the counting table's cap; the
    counter-refresh check."""
    try:
        bridge, bridge_error = _bridge(ovsdb, dpid, job.bridge)
        if bridge is None:
            return QosResult(job.plans, None, bridge_error)
        count_limited = count_error = None
        if job.count_limit is not None:
            try:
                ovsdb.limit_flow_table(bridge.name, tables.COUNT, job.count_limit)
                count_limited = job.count_limit
            except OvsdbError as exc:
                count_error = exc.detail
        warning = refresh_error = None
        if job.refresh_interval_s is not None:
            try:
                warning = refresh_warning(job.refresh_interval_s, ovsdb.revalidation_s())
            except OvsdbError as exc:
                refresh_error = exc.detail
        outcome = reconcile_bridge(ovsdb, bridge, job.plans)
        return QosResult(
            job.plans,
            bridge,
            bridge_error,
            outcome,
            count_limited,
            count_error,
            warning,
            refresh_error,
        )
    except Exception:
        return QosResult(job.plans, error=traceback.format_exc())


def read_queues(ovsdb: Ovsdb, dpid: int, job: QueueRead) -> QueueReadResult:
    """Every planned port's HTB classes: counters, and whether the root lost its burst."""
    try:
        bridge, bridge_error = _bridge(ovsdb, dpid, job.bridge)
        if bridge is None:
            return QueueReadResult({}, bridge_error=bridge_error)
        wall = time.time()
        counters: dict[str, dict[str, ClassCounters]] = {}
        short: set[str] = set()
        errors: dict[str, str] = {}
        for port in sorted(job.plans):
            try:
                classes = tc.class_stats(port)
            except tc.TcError as exc:
                errors[port] = str(exc)
                continue
            counters[port] = tc.counters_of(classes)
            if tc.root_burst_short(classes, job.plans[port].burst_bytes) or tc.leaves_missing(
                classes
            ):
                short.add(port)
        return QueueReadResult(counters, frozenset(short), errors, wall, bridge)
    except Exception:
        return QueueReadResult({}, error=traceback.format_exc())
