"""One worker per switch: the only code that changes a switch or its state.

Everything that touches a switch — connect, port changes, a new policy or
job set, the audit, detection, fabric changes — becomes a request to that
switch's worker.  Requests coalesce: a burst of port changes, or a policy
change arriving during an audit, is one sync.  The worker's thread owns the
switch's state (ports, what the switch holds, overrides), so nothing needs
a lock around it.  Queues (OVSDB, tc) are slow and run on a second thread of
the worker, off the flow path, with their own coalescing flag.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from controller.classify.detector import Detector
from controller.classify.reclassify import (
    Claimed,
    adopted_overrides,
    apply_decisions,
    observed_flows,
    split_samples,
)
from controller.classify.records import ObservedFlow
from controller.classify.thresholds import refresh_warning
from controller.flowid import FlowId
from controller.openflow import messages, wire
from controller.openflow.channel import Channel
from controller.openflow.flowstats import decode_count_replies
from controller.openflow.installed import installed_entries
from controller.openflow.observer import PortState, SyncReport
from controller.openflow.replies import RequestFailedError
from controller.openflow.settings import ActivePolicy, ControllerSettings
from controller.openflow.stats import FlowCounters, class_counters
from controller.pipeline import tables
from controller.pipeline.desired import DesiredState, FabricInputs, desired_state
from controller.pipeline.diff import FlowDiff, diff_flows
from controller.pipeline.flows import FlowEntry, InstalledFlow
from controller.pipeline.groups import GroupDiff, GroupEntry, GroupType, MeterEntry, diff_groups
from controller.pipeline.tables import TABLE_NAMES
from controller.policy.detection import DetectionSpec
from controller.policy.model import Policy
from controller.qos import tc
from controller.qos.ovsdb import Bridge, OvsdbError
from controller.qos.plan import PortQos
from controller.qos.provision import plan_ports, reconcile_bridge
from controller.qos.telemetry import QueueStats, new_drops, port_queues

LOG = logging.getLogger("flowlane.controller")

QUEUE_READ_INTERVAL_S = 1.0
"""How often each port's HTB classes are read for the queue telemetry."""

OFPP_MAX = 0xFFFFFF00


class SwitchContext(Protocol):
    """What a worker needs from the controller around it (the app implements it)."""

    settings: ControllerSettings

    def fabric_inputs(self, dpid: int) -> FabricInputs | None:
        """The discovered fabric as this switch should see it (None: not fabric mode)."""
        ...

    def switch_ports(self, dpid: int, ports: Sequence[PortState]) -> None:
        """The switch's ports as read from it (fabric discovery learns edge ports here)."""
        ...

    def flows_seen(self, dpid: int, flows: Sequence[ObservedFlow]) -> None:
        """The counted flows with their rates, every detection poll (placement reads them)."""
        ...

    def port_rates(self, dpid: int, tx_bps: dict[int, float]) -> None:
        """Transmit rate of every port since the last poll (link utilisation)."""
        ...


@dataclass
class _Installed:
    """What the switch holds as of the last confirmed sync (barrier passed)."""

    flows: Sequence[InstalledFlow | FlowEntry]
    """As read back, or the confirmed plan's own entries (their key and cookie are the same)."""
    groups: dict[int, GroupEntry]
    meters: dict[int, MeterEntry]


@dataclass
class _Pending:
    sync: bool = False
    fresh: bool = False
    reasons: list[str] = field(default_factory=list)
    ports: dict[int, PortState | None] = field(default_factory=dict)
    """Port-status updates (None: deleted) applied by the worker before its next sync."""


class SwitchWorker:
    """Owns one switch. ``request_sync`` and ``port_status`` may be called from any thread."""

    def __init__(self, channel: Channel, context: SwitchContext) -> None:
        self.channel = channel
        self.context = context
        self.settings = context.settings
        self.dpid = channel.dpid
        self.tag = f"{self.dpid:016x}"
        self.connected_at = time.time()
        self._cond = threading.Condition()
        self._pending = _Pending()
        self._stopping = False
        # Worker-thread state.
        self.ports: list[PortState] | None = None
        self._installed: _Installed | None = None
        self.applied: ActivePolicy | None = None
        self.synced_once = False
        self._reported: tuple[int | None, tuple[PortState, ...]] | None = None
        self.detector: Detector | None = None
        self._detector_spec: DetectionSpec | None = None
        self.overrides: dict[FlowId, str] = {}
        self._claimed_bytes: dict[FlowId, tuple[int, float]] = {}
        self._views_published = 0.0
        self._next_detect = 0.0
        self._next_stats = 0.0
        self._tx_bytes: dict[int, tuple[int, float]] = {}
        # Queues: their own thread and flag.
        self._qos_cond = threading.Condition()
        self._qos_wanted = False
        self._qos_plans: dict[str, PortQos] = {}
        self._qos_applied: dict[str, PortQos] | None = None
        self._count_limit: int | None = None
        self._refresh_checked: float | None = None
        """The detection interval last checked against the switch's counter refresh."""
        self.bridge: Bridge | None = None
        self._next_queue_read = 0.0
        self._queue_stats: dict[tuple[str, str], QueueStats] = {}
        self._dropping: set[tuple[str, str]] = set()
        self._threads = [
            threading.Thread(target=self._run, name=f"switch-{self.tag}", daemon=True),
            threading.Thread(target=self._run_qos, name=f"qos-{self.tag}", daemon=True),
        ]

    # ---- called from other threads --------------------------------------------

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        with self._qos_cond:
            self._qos_cond.notify_all()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))

    def request_sync(self, reason: str, fresh: bool = False) -> None:
        """Ask for a sync; requests made before the worker gets to it become one."""
        with self._cond:
            self._pending.sync = True
            self._pending.fresh |= fresh
            if reason not in self._pending.reasons:
                self._pending.reasons.append(reason)
            self._cond.notify()

    def port_status(self, port: PortState, deleted: bool, reason: str) -> None:
        """A port changed: the worker adopts it without re-reading the switch, then syncs."""
        with self._cond:
            self._pending.ports[port.number] = None if deleted else port
            self._pending.sync = True
            self._pending.reasons.append(reason)
            self._cond.notify()

    # ---- the worker thread --------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopping and not self._pending.sync:
                    delay = self._next_tick() - time.monotonic()
                    if delay <= 0:
                        break
                    self._cond.wait(delay)
                if self._stopping:
                    return
                pending, self._pending = self._pending, _Pending()
            try:
                if pending.sync:
                    self._apply_ports(pending.ports)
                    self._sync(", ".join(pending.reasons), pending.fresh)
                self._tick()
            except Exception:
                LOG.exception("switch %s: worker step failed; will retry", self.tag)
                time.sleep(0.2)

    def _next_tick(self) -> float:
        if not self.synced_once:
            return time.monotonic() + 3600
        return min(self._next_detect, self._next_stats)

    def _tick(self) -> None:
        """Periodic work that is due: detection polls and port counters."""
        if not self.synced_once:
            return
        now = time.monotonic()
        policy = self.settings.active.policy
        if now >= self._next_detect:
            spec = policy.detection
            self._next_detect = now + (spec.interval if spec is not None else 1.0)
            if spec is not None:
                self._guard("detection", self._detect)
        if now >= self._next_stats:
            placement = policy.forwarding.placement
            interval = placement.interval if placement is not None else 1.0
            self._next_stats = now + interval
            if policy.forwarding.fabric:
                self._guard("port counters", self._poll_ports)

    def _guard(self, what: str, step: Any) -> None:
        try:
            step()
        except RequestFailedError as exc:
            if not self._stopping:
                LOG.warning("switch %s: %s not read: %s", self.tag, what, exc)

    def _apply_ports(self, updates: dict[int, PortState | None]) -> None:
        if not updates or self.ports is None:
            return
        by_number = {port.number: port for port in self.ports}
        for number, port in updates.items():
            if port is None:
                by_number.pop(number, None)
            else:
                by_number[number] = port
        self.ports = sorted(by_number.values(), key=lambda p: p.number)
        self.context.switch_ports(self.dpid, self.ports)

    # ---- sync -----------------------------------------------------------------------

    def _read_ports(self) -> list[PortState]:
        parser = self.channel.datapath.ofproto_parser
        ofproto = self.channel.datapath.ofproto
        replies = self.channel.request(parser.OFPPortDescStatsRequest(self.channel.datapath, 0))
        return [port_state(port, ofproto) for port in replies if port.port_no <= OFPP_MAX]

    def _read_installed(self) -> tuple[_Installed, list[FlowCounters]]:
        datapath = self.channel.datapath
        request = messages.flow_stats_request(datapath)
        counted = installed_entries(self.channel.request_raw_flow_stats(request), tables.COUNT)
        flows = [entry.flow for entry in counted]
        groups: dict[int, GroupEntry] = {}
        meters: dict[int, MeterEntry] = {}
        for desc in self.channel.request(messages.group_desc_request(datapath)):
            group = messages.installed_group(desc)
            # Undecodable groups are someone else's: keep their id so the diff deletes them.
            groups[int(desc.group_id)] = group if group is not None else _FOREIGN_GROUP
        for config in self.channel.request(messages.meter_config_request(datapath)):
            meter = messages.installed_meter(config)
            # A meter we cannot decode still holds its id: a planned one is sent as a modify.
            meters[int(config.meter_id)] = meter or MeterEntry(int(config.meter_id), 0, 0)
        return _Installed(flows, groups, meters), counted

    def _sync(self, reason: str, fresh: bool) -> None:
        """``fresh`` re-reads ports and tables; otherwise the last confirmed state is trusted,
        which keeps a policy or fabric change to one round trip (the barrier)."""
        started = time.monotonic()
        try:
            summary = self._sync_flows(reason, fresh or self._installed is None)
        except RequestFailedError as exc:
            self._installed = None  # unknown: re-read next time
            if self._stopping:
                return
            self.settings.metrics.sync_failures.labels(self.tag).inc()
            LOG.error("switch %s: sync (%s) failed: %s; will retry", self.tag, reason, exc)
            self._retry_later(reason)
            return
        except Exception:
            self._installed = None
            self.settings.metrics.sync_failures.labels(self.tag).inc()
            LOG.exception("switch %s: sync (%s) failed; will retry", self.tag, reason)
            self._retry_later(reason)
            return
        self.settings.metrics.sync_seconds.observe(time.monotonic() - started)
        if self.settings.manage_qos and (fresh or self._qos_applied != self._qos_plans):
            self._want_qos()
        if summary.startswith("+0 -0 ") and self.synced_once:
            return
        LOG.info("switch %s in sync (%s): %s", self.tag, reason, summary)
        self.synced_once = True

    def _retry_later(self, reason: str) -> None:
        def retry() -> None:
            time.sleep(1.0)
            if not self._stopping:
                self.request_sync(f"retry of {reason}", fresh=True)

        threading.Thread(target=retry, name=f"retry-{self.tag}", daemon=True).start()

    def _sync_flows(self, reason: str, fresh: bool) -> str:
        active = self.settings.active
        if fresh or self.ports is None:
            self.ports = self._read_ports()
            self.context.switch_ports(self.dpid, self.ports)
        if fresh or self._installed is None:
            polled = time.monotonic()
            self._installed, counted = self._read_installed()
            if reason == "audit":
                self._record_stats(counted)
                self.settings.metrics.stats_poll_seconds.observe(time.monotonic() - polled)
            if not self.synced_once:
                self._adopt_overrides([entry.flow for entry in counted])
        ports, installed = self.ports, self._installed
        want = desired_state(
            active.policy,
            self.dpid,
            {port.name: port.number for port in ports},
            self.overrides,
            self.settings.jobs,
            self.context.fabric_inputs(self.dpid),
            active.plans,
        )
        flow_diff = diff_flows(installed.flows, want.flows)
        group_diff = diff_groups(installed.groups, want.groups)
        meter_changes = [m for m in want.meters if installed.meters.get(m.meter_id) != m]
        changed = not flow_diff.empty or not group_diff.empty or bool(meter_changes)
        if changed:
            self._installed = None  # unknown until the barrier confirms
            self._send(flow_diff, group_diff, meter_changes, installed.meters)
        self._installed = _Installed(
            want.flows,
            {group.group_id: group for group in want.groups},
            {**installed.meters, **{meter.meter_id: meter for meter in want.meters}},
        )
        self._confirmed(active)
        self._qos_plans = plan_ports(active.policy, {port.name: port.link_bps for port in ports})
        reported = (active.version, tuple(ports))
        if reported != self._reported or changed:
            # Reports carry every flow: send one only when something changed.
            self._report(active, want)
            self._reported = reported
        for table_id, name in TABLE_NAMES.items():
            count = sum(1 for flow in want.flows if flow.table_id == table_id)
            self.settings.metrics.flows.labels(self.tag, name).set(count)
        if self.synced_once and reason == "audit" and changed:
            self.settings.metrics.drift_repairs.labels(self.tag, "flows").inc()
        if want.unresolved_rules:
            LOG.warning(
                "switch %s: rules %s name ports this switch lacks; skipped",
                self.tag,
                ", ".join(want.unresolved_rules),
            )
        groups = ""
        if want.groups or not group_diff.empty:
            groups = (
                f", groups +{len(group_diff.add)} ~{len(group_diff.modify)}"
                f" -{len(group_diff.delete)}"
            )
        return (
            f"+{len(flow_diff.add)} -{len(flow_diff.delete)} ={flow_diff.unchanged} flows{groups}"
        )

    def _send(
        self,
        flows: FlowDiff,
        groups: GroupDiff,
        meters: Sequence[MeterEntry],
        installed_meters: dict[int, MeterEntry],
    ) -> None:
        """Meters and groups before the flows that use them; flow adds before deletes, so
        traffic never falls through a gap; groups deleted after the flows that used them."""
        datapath = self.channel.datapath
        batch: list[bytes] = [
            *(
                wire.encode(
                    messages.meter_modify(datapath, m)
                    if m.meter_id in installed_meters
                    else messages.meter_add(datapath, m)
                )
                for m in meters
            ),
            *(wire.encode(messages.group_add(datapath, g)) for g in groups.add),
            *(wire.encode(messages.group_modify(datapath, g)) for g in groups.modify),
            *(wire.flow_add(f) for f in flows.add),
            *(wire.flow_delete(k) for k in flows.delete),
            *(
                wire.encode(messages.flow_delete_by_cookie(datapath, t, c))
                for t, c in flows.delete_by_cookie
            ),
            *(wire.encode(messages.group_delete(datapath, gid)) for gid in groups.delete),
        ]
        self.settings.metrics.flow_mods.labels(self.tag, "add").inc(len(flows.add))
        self.settings.metrics.flow_mods.labels(self.tag, "delete").inc(len(flows.delete))
        self.channel.batch(batch)

    def _confirmed(self, active: ActivePolicy) -> None:
        """The switch holds ``active``'s flows (barrier passed, or nothing to change)."""
        if self.applied is not active:
            self.settings.metrics.apply_seconds.observe(time.monotonic() - active.since)
            self.applied = active
        version = active.version if active.version is not None else -1
        self.settings.metrics.applied_version.labels(self.tag).set(version)

    def _report(self, active: ActivePolicy, want: DesiredState) -> None:
        assert self.ports is not None
        bridge = self._bridge() if self.settings.manage_qos else None
        report = SyncReport(
            dpid=self.dpid,
            policy_version=active.version,
            connected_at=self.connected_at,
            ports=tuple(self.ports),
            flows=want.flows,
            queues=tuple(self._qos_plans.values()) if self.settings.manage_qos and bridge else (),
            datapath_type=bridge.datapath_type if bridge else None,
        )
        for observer in self.settings.observers:
            try:
                observer.switch_synced(report)
            except Exception:
                LOG.exception("switch %s: observer %r failed", self.tag, observer)

    def _record_stats(self, counted: list[FlowCounters]) -> None:
        """Per-class counters for Prometheus, from the audit's own read."""
        policy = self.settings.active.policy
        self.settings.metrics.totals.set_classes(self.tag, class_counters(policy, counted))

    # ---- detection --------------------------------------------------------------------

    def _detector_for(self, policy: Policy, spec: DetectionSpec) -> Detector:
        if self.detector is None or self._detector_spec != spec:
            # A new threshold or class starts over: overrides of the old spec go with it.
            # The counters stay (``retune``): a new detector judged every entry still in
            # the counting table on its whole life, and demoted flows that had ended.
            if self.detector is None:
                self.detector = Detector(spec, policy.ports.rate.bps)
            else:
                self.detector.retune(spec, policy.ports.rate.bps)
            self._detector_spec = spec
            self.overrides = {}
            self._want_qos()  # the counting table's cap is OVSDB work
        return self.detector

    def _adopt_overrides(self, installed: list[InstalledFlow]) -> None:
        """Elephants a previous controller demoted stay demoted (the switch remembers them)."""
        policy = self.settings.active.policy
        spec = policy.detection
        adopted = adopted_overrides(policy, installed)
        if spec is None or not adopted:
            return
        detector = self._detector_for(policy, spec)
        detector.adopt(adopted, time.monotonic())
        self.overrides = {**adopted, **self.overrides}
        LOG.info(
            "switch %s: kept %d elephant override(s) found on the switch", self.tag, len(adopted)
        )

    def _detect(self) -> None:
        policy = self.settings.active.policy
        spec = policy.detection
        assert spec is not None
        self.detector = self._detector_for(policy, spec)
        started = time.monotonic()
        datapath = self.channel.datapath
        parser, ofproto = datapath.ofproto_parser, datapath.ofproto
        # The switch dates entries (``duration``) when it answers, right after we ask;
        # taking ``now`` after decoding would shift every flow's start by the decode time.
        now = started
        request = parser.OFPFlowStatsRequest(
            datapath,
            0,
            tables.COUNT,
            ofproto.OFPP_ANY,
            ofproto.OFPG_ANY,
            0,
            0,
            parser.OFPMatch(),
        )
        entries = decode_count_replies(self.channel.request_raw_flow_stats(request))
        samples, claimed = split_samples(entries)
        decisions = self.detector.observe(samples, now)
        metrics = self.settings.metrics
        metrics.detection_poll_seconds.observe(time.monotonic() - started)
        metrics.tracked_flows.labels(self.tag).set(decisions.tracked)
        metrics.overrides_active.labels(self.tag).set(decisions.overrides)
        if decisions.dropped:
            metrics.untracked_flows.labels(self.tag).inc(decisions.dropped)
        outcome = apply_decisions(
            self.dpid,
            self.overrides,
            decisions,
            spec.elephant.traffic_class,
            policy.default_class,
        )
        for demotion in decisions.demote:
            metrics.detections.labels(self.tag, str(demotion.reason)).inc()
        for release in decisions.release:
            metrics.releases.labels(self.tag, str(release.reason)).inc()
        if outcome.changes:
            self.overrides = outcome.overrides
            self._sync("detection", False)
            for change in outcome.changes:
                after = (
                    f", {change.latency_s:.3f} s after its first packet"
                    if change.latency_s is not None
                    else ""
                )
                LOG.info(
                    "switch %s: %s %s -> %s (%s%s)",
                    self.tag,
                    change.flow,
                    change.from_class,
                    change.to_class,
                    change.reason,
                    after,
                )
            for observer in self.settings.observers:
                observer.flows_reclassified(list(outcome.changes))
        self._view(claimed, now)

    def _view(self, claimed: list[Claimed], now: float) -> None:
        """The flow view, every poll for placement and at most once a second for people.

        Building it ranks every tracked flow (a fifth of a 10 000-flow poll's CPU), so
        without placement to feed (``forwarding: normal``, or placement off) it is built
        only when people get it."""
        assert self.detector is not None
        forwarding = self.settings.active.policy.forwarding
        placing = forwarding.fabric and forwarding.placement is not None
        publish = now - self._views_published >= 1.0
        if not placing and not publish:
            return
        view = observed_flows(
            self.detector,
            self.settings.active.policy,
            self.settings.jobs,
            claimed,
            self._claimed_bytes,
            now,
            time.time() - now,
        )
        self._claimed_bytes = view.claimed_bytes
        self.context.flows_seen(self.dpid, view.flows)
        if publish:
            self._views_published = now
            for observer in self.settings.observers:
                observer.flows_observed(self.dpid, list(view.flows))

    def _poll_ports(self) -> None:
        datapath = self.channel.datapath
        parser, ofproto = datapath.ofproto_parser, datapath.ofproto
        now = time.monotonic()
        replies = self.channel.request(parser.OFPPortStatsRequest(datapath, 0, ofproto.OFPP_ANY))
        rates: dict[int, float] = {}
        for stat in replies:
            if stat.port_no > OFPP_MAX:
                continue
            before = self._tx_bytes.get(stat.port_no)
            self._tx_bytes[stat.port_no] = (stat.tx_bytes, now)
            if before is not None and stat.tx_bytes >= before[0] and now > before[1]:
                rates[stat.port_no] = 8 * (stat.tx_bytes - before[0]) / (now - before[1])
        if rates:
            self.context.port_rates(self.dpid, rates)

    # ---- queues (their own thread) -------------------------------------------------------

    def queues_changed(self) -> None:
        """OVSDB says a port of this switch changed QoS (our write or anyone's): OVS drops
        the port's tc filters with its old qdisc, so check queues and filters now."""
        self._want_qos()

    def _want_qos(self) -> None:
        with self._qos_cond:
            self._qos_wanted = True
            self._qos_cond.notify()

    def _run_qos(self) -> None:
        while True:
            with self._qos_cond:
                while not self._stopping and not self._qos_wanted:
                    delay = self._next_queue_read - time.monotonic()
                    if delay <= 0:
                        break
                    self._qos_cond.wait(delay)
                if self._stopping:
                    tc.close()  # this thread's netlink socket: tc calls all run on it
                    return
                wanted, self._qos_wanted = self._qos_wanted, False
            if not wanted:
                self._next_queue_read = time.monotonic() + QUEUE_READ_INTERVAL_S
                try:
                    self._read_queues()
                except Exception:
                    LOG.exception("switch %s: queue telemetry not read", self.tag)
                continue
            try:
                summary = self._sync_qos()
            except Exception:
                LOG.exception("switch %s: queues not set; will retry", self.tag)
                continue
            if summary:
                LOG.debug("switch %s: %s", self.tag, summary)

    def _check_refresh(self, interval_s: float) -> None:
        try:
            refresh = self.settings.ovsdb.revalidation_s()
        except OvsdbError as exc:
            LOG.debug("switch %s: counter refresh not read: %s", self.tag, exc.detail)
            return
        warning = refresh_warning(interval_s, refresh)
        if warning is not None and warning not in _WARNED:
            _WARNED.add(warning)  # one ovs-vswitchd serves every local switch: say it once
            LOG.warning("%s", warning)

    def _sync_qos(self) -> str:
        """Queues to the newest plan of this switch, and the counting table's cap."""
        if not self.settings.manage_qos:
            return ""
        bridge = self._bridge()
        if bridge is None:
            return "QoS skipped (bridge not in the local OVSDB, or OVSDB unreachable)"
        spec = self.settings.active.policy.detection
        if spec is not None and self._count_limit != spec.max_tracked:
            try:
                self.settings.ovsdb.limit_flow_table(bridge.name, tables.COUNT, spec.max_tracked)
                self._count_limit = spec.max_tracked
            except OvsdbError as exc:
                LOG.error("switch %s: counting table not capped: %s", self.tag, exc.detail)
        if spec is not None and self._refresh_checked != spec.interval:
            self._refresh_checked = spec.interval
            self._check_refresh(spec.interval)
        plans = self._qos_plans
        outcome = reconcile_bridge(self.settings.ovsdb, bridge, plans)
        self._qos_applied = plans if outcome.ok and not outcome.vanished else None
        if outcome.vanished:
            LOG.info(
                "switch %s: ports gone before their queues were set: %s",
                self.tag,
                ", ".join(outcome.vanished),
            )
        for port, detail in outcome.failed.items():
            self.settings.metrics.qos_errors.labels(port).inc()
            LOG.error("switch %s port %s: QoS not applied: %s; will retry", self.tag, port, detail)
        if outcome.burst_ports:  # OVS resets the root class's burst on any reconfiguration
            LOG.info("switch %s: HTB burst set on %s", self.tag, ", ".join(outcome.burst_ports))
        if self.synced_once and (outcome.changed_ports or outcome.filtered_ports):
            self.settings.metrics.drift_repairs.labels(self.tag, "qos").inc()
            # Each part names its own ports and an empty one is left out: a "-" for "none"
            # read as a port name gone missing (a kernel datapath never sets filters).
            repairs = (("queues", outcome.changed_ports), ("tc filters", outcome.filtered_ports))
            LOG.info(
                "switch %s: %s",
                self.tag,
                "; ".join(f"{what} set on {', '.join(ports)}" for what, ports in repairs if ports),
            )
        provisioned = len(plans) - len(outcome.failed) - len(outcome.vanished)
        return f"queues on {provisioned}/{len(plans)} ports ({bridge.datapath_type} datapath)"

    def _read_queues(self) -> None:
        """Every queue's counters, backlog and rate from its HTB class, for the metrics, the
        store, and an event when a latency class (HTB priority 0) starts dropping."""
        plans = self._qos_plans
        if not self.settings.manage_qos or not plans or self._bridge() is None:
            return
        now = time.time()
        queues: list[QueueStats] = []
        for port in sorted(plans):
            try:
                classes = tc.class_stats(port)
            except tc.TcError as exc:
                LOG.debug("switch %s: no queue telemetry for %s: %s", self.tag, port, exc)
                continue
            queues += port_queues(
                port, tc.counters_of(classes), plans[port].queues, self._queue_stats, now
            )
            if tc.root_burst_short(classes, plans[port].burst_bytes):
                self._want_qos()  # OVS reconfigured the port: its root class lost its burst
        dropped = new_drops(queues, self._queue_stats)
        started = [(q, n) for q, n in dropped if (q.port, q.traffic_class) not in self._dropping]
        self._dropping = {(q.port, q.traffic_class) for q, _ in dropped}
        self._queue_stats = {(q.port, q.traffic_class): q for q in queues}
        self.settings.metrics.totals.set_queues(self.tag, queues)
        for observer in self.settings.observers:
            observer.queues_observed(self.dpid, queues)
            if started:
                observer.queue_drops(self.dpid, started)
        for queue, count in started:
            LOG.warning(
                "switch %s port %s: latency class %s dropped %d packet(s) (backlog %d B)",
                self.tag,
                queue.port,
                queue.traffic_class,
                count,
                queue.backlog_bytes,
            )

    def _bridge(self) -> Bridge | None:
        """The OVSDB bridge of this datapath, looked up once (None: not local, or OVSDB down)."""
        if self.bridge is None:
            try:
                self.bridge = self.settings.ovsdb.bridge_for(self.dpid)
            except OvsdbError as exc:
                LOG.error("switch %s: cannot read OVSDB bridges: %s; will retry", self.tag, exc)
        return self.bridge


_WARNED: set[str] = set()
"""Warnings about the local ovs-vswitchd already logged by this process."""

_FOREIGN_GROUP = GroupEntry(type=GroupType.ALL, buckets=(), group_id=0xFFFFFF00 - 1)
"""Stands for a group flowlane cannot decode: never equal to a planned one, so it is deleted."""


def port_state(desc: Any, ofproto: Any) -> PortState:
    """A port description (reply or port-status) as the controller keeps it."""
    return PortState(
        desc.port_no,
        desc.name.decode(errors="replace"),
        desc.curr_speed * 1000 if desc.curr_speed else None,
        up=not (desc.state & ofproto.OFPPS_LINK_DOWN)
        and not (desc.config & ofproto.OFPPC_PORT_DOWN),
        hw_addr=_mac(desc.hw_addr),
    )


def _mac(value: Any) -> int:
    if isinstance(value, str):
        try:
            return int(value.replace(":", ""), 16)
        except ValueError:
            return 0
    return int(value) if isinstance(value, int) else 0
