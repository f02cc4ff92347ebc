"""The os-ken application: the only module that uses os-ken's app machinery.

It receives switch events, asks the pure core what each switch should have,
sends the difference, and confirms with a barrier.  Each switch is synced on
its own thread under a lock, so a reconnect, a port change and the periodic
audit never interleave their flow mods on one switch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar, cast

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import (
    CONFIG_DISPATCHER,
    DEAD_DISPATCHER,
    MAIN_DISPATCHER,
    set_ev_cls,
)
from os_ken.lib import hub
from os_ken.ofproto import ofproto_v1_3

from controller.classify.detector import Detector
from controller.classify.flows import CounterSample, FlowId, FlowState
from controller.openflow import messages
from controller.openflow.observer import ObservedFlow, PortState, Reclassification, SyncReport
from controller.openflow.replies import ReplyWaiter, RequestFailedError
from controller.openflow.settings import ActivePolicy, ControllerSettings
from controller.openflow.stats import FlowCounters, class_counters
from controller.pipeline import tables
from controller.pipeline.diff import FlowDiff, diff_flows
from controller.pipeline.flows import InstalledFlow
from controller.pipeline.planner import Origin, learned_origin, plan_switch
from controller.pipeline.tables import TABLE_NAMES
from controller.policy.detection import DetectionSpec
from controller.policy.jobs import JobSpec
from controller.policy.model import Policy
from controller.qos.ovsdb import Bridge, OvsdbError
from controller.qos.plan import PortQos
from controller.qos.provision import plan_ports, reconcile_bridge

LOG = logging.getLogger("flowlane.controller")

_Handler = TypeVar("_Handler", bound=Callable[..., None])


def _on(event: Any, dispatchers: Any) -> Callable[[_Handler], _Handler]:
    """os-ken's ``set_ev_cls`` with a type, so mypy keeps checking the handlers."""
    return cast(Callable[[_Handler], _Handler], set_ev_cls(event, dispatchers))


OFPP_MAX = 0xFFFFFF00


@dataclass
class SwitchSession:
    datapath: Any
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Held while flows are read, diffed and sent: one flow sync per switch at a time."""
    qos_lock: threading.Lock = field(default_factory=threading.Lock)
    """Queues are slow (OVSDB, tc); their own lock keeps them off the flow path."""
    qos_plans: dict[str, PortQos] = field(default_factory=dict)
    qos_applied: dict[str, PortQos] | None = None
    """The plans last provisioned without error: a policy change that keeps them skips OVSDB."""
    ports: list[PortState] | None = None
    installed: list[InstalledFlow] | None = None
    generation: int = 0
    """Bumped whenever flow mods go out, so a read taken outside the lock can tell it is stale."""
    detector: Detector | None = None
    detector_spec: DetectionSpec | None = None
    overrides: dict[FlowId, str] = field(default_factory=dict)
    """Detected elephants with their class; part of the plan, so syncs keep them."""
    views_published: float = 0.0
    claimed_bytes: dict[FlowId, tuple[int, float]] = field(default_factory=dict)
    """Bytes of rule- and job-claimed flows at the last view, for their rates."""
    reported: tuple[int | None, int, int] | None = None
    """(version, plan id, ports id) of the last report, so an unchanged switch is not re-sent."""
    """The switch's flows as of our last confirmed sync; policy changes diff against this
    instead of reading the table back, and the audit re-reads it to catch drift."""
    bridge: Bridge | None = None
    synced_once: bool = False
    connected_at: float = field(default_factory=time.time)
    applied: ActivePolicy | None = None

    @property
    def dpid(self) -> int:
        return int(self.datapath.id)


class FlowlaneApp(app_manager.OSKenApp):  # type: ignore[misc]
    OFP_VERSIONS: ClassVar[list[int]] = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        settings = kwargs.pop("flowlane")
        super().__init__(*args, **kwargs)
        self.settings: ControllerSettings = settings
        self._sessions: dict[int, SwitchSession] = {}
        self._sessions_lock = threading.Lock()
        self._replies = ReplyWaiter()
        self._gc_lock = threading.Lock()

    # ---- life cycle -------------------------------------------------------

    def start(self) -> Any:
        thread = super().start()
        hub.spawn(self._audit_loop)
        hub.spawn(self._detection_loop)
        # Rows of ports deleted while no controller ran (or before a crash).
        hub.spawn(self._collect_qos_garbage)
        return thread

    def set_policy(self, policy: Policy, version: int | None = None) -> None:
        """Swap the active policy and bring every connected switch to it."""
        self.settings.active = ActivePolicy(policy, version)
        LOG.info(
            "policy version %s is active; applying to %d switch(es)", version, len(self._dpids())
        )
        for dpid in self._dpids():
            hub.spawn(self._sync, dpid, f"policy version {version}")

    def set_jobs(self, jobs: tuple[JobSpec, ...]) -> None:
        """New set of registered jobs: re-plan every switch (only job entries change)."""
        self.settings.jobs = jobs
        LOG.info("jobs: %s", ", ".join(job.name for job in jobs) or "none")
        for dpid in self._dpids():
            hub.spawn(self._sync, dpid, "jobs")

    def _dpids(self) -> list[int]:
        with self._sessions_lock:
            return list(self._sessions)

    def _detection_loop(self) -> None:
        """Every ``detection.interval``: read each switch's counting table, run its detector."""
        while True:
            detection = self.settings.active.policy.detection
            hub.sleep(detection.interval if detection is not None else 1.0)
            if detection is None:
                continue
            for dpid in self._dpids():
                with self._sessions_lock:
                    session = self._sessions.get(dpid)
                if session is None or not session.synced_once:
                    continue
                try:
                    self._detect(session)
                except RequestFailedError as exc:
                    if self._connected(session):
                        LOG.warning("switch %016x: counting table not read: %s", dpid, exc)
                except Exception:
                    LOG.exception("switch %016x: detection failed", dpid)

    def _detect(self, session: SwitchSession) -> None:
        policy = self.settings.active.policy
        spec = policy.detection
        assert spec is not None
        tag = f"{session.dpid:016x}"
        if session.detector is None or session.detector_spec != spec:
            # A new threshold or class starts over: overrides of the old spec go with it.
            session.detector = Detector(spec, policy.ports.rate.bps)
            session.detector_spec = spec
            session.overrides = {}
            if session.bridge is not None and self.settings.manage_qos:
                try:
                    self.settings.ovsdb.limit_flow_table(
                        session.bridge.name, tables.COUNT, spec.max_tracked
                    )
                except OvsdbError as exc:
                    LOG.error("switch %s: counting table not capped: %s", tag, exc.detail)
        started = time.monotonic()
        datapath = session.datapath
        parser, ofproto = datapath.ofproto_parser, datapath.ofproto
        # The switch dates entries (``duration``) when it answers, right after we ask;
        # taking ``now`` after decoding would shift every flow's start by the decode time.
        now = started
        stats = self._request(
            datapath,
            parser.OFPFlowStatsRequest(
                datapath,
                0,
                tables.COUNT,
                ofproto.OFPP_ANY,
                ofproto.OFPG_ANY,
                0,
                0,
                parser.OFPMatch(),
            ),
        )
        samples, claimed = [], []
        for entry in stats:
            flow = FlowId.from_oxm(dict(entry.match.items()))
            if flow is None:
                continue
            age = entry.duration_sec + entry.duration_nsec / 1e9
            sample = CounterSample(flow, entry.byte_count, entry.packet_count, age)
            origin = learned_origin(entry.cookie)
            if origin is None or origin[0] is Origin.DEFAULT:
                samples.append(sample)  # only flows no rule or job claims can be demoted
            else:
                claimed.append((sample, origin))
        decisions = session.detector.observe(samples, now)
        metrics = self.settings.metrics
        metrics.detection_poll_seconds.observe(time.monotonic() - started)
        metrics.tracked_flows.labels(tag).set(decisions.tracked)
        metrics.overrides_active.labels(tag).set(decisions.overrides)
        if decisions.dropped:
            metrics.untracked_flows.labels(tag).inc(decisions.dropped)
        elephant, default = spec.elephant.traffic_class, policy.default_class
        changes = []
        for demotion in decisions.demote:
            session.overrides[demotion.flow] = elephant
            metrics.detections.labels(tag, str(demotion.reason)).inc()
            changes.append(
                Reclassification(
                    session.dpid,
                    demotion.flow,
                    default,
                    elephant,
                    str(demotion.reason),
                    demotion.bytes,
                    demotion.latency_s,
                )
            )
        for release in decisions.release:
            session.overrides.pop(release.flow, None)
            metrics.releases.labels(tag, str(release.reason)).inc()
            changes.append(
                Reclassification(
                    session.dpid, release.flow, elephant, default, str(release.reason), 0, None
                )
            )
        if changes:
            self._sync(session.dpid, "detection")
            for change in changes:
                after = (
                    f", {change.latency_s:.3f} s after its first packet"
                    if change.latency_s is not None
                    else ""
                )
                LOG.info(
                    "switch %s: %s %s -> %s (%s%s)",
                    tag,
                    change.flow,
                    change.from_class,
                    change.to_class,
                    change.reason,
                    after,
                )
            for observer in self.settings.observers:
                observer.flows_reclassified(changes)
        if now - session.views_published >= 1.0:
            session.views_published = now
            observed = self._observed(session, claimed, now, elephant, default)
            for observer in self.settings.observers:
                observer.flows_observed(session.dpid, observed)

    def _observed(
        self,
        session: SwitchSession,
        claimed: list[tuple[CounterSample, tuple[Origin, int]]],
        now: float,
        elephant: str,
        default: str,
    ) -> list[ObservedFlow]:
        """The flow view: the detector's flows, plus those a rule or job claimed (with why)."""
        assert session.detector is not None
        wall = time.time() - now  # monotonic → wall clock, for people
        policy, jobs = self.settings.active.policy, sorted(self.settings.jobs, key=lambda j: j.name)
        observed = [
            ObservedFlow(
                view.flow,
                elephant if view.state is FlowState.ELEPHANT else default,
                "detected" if view.state is FlowState.ELEPHANT else "default",
                view.bytes,
                view.rate_bps,
                wall + view.first_seen,
                wall + view.last_seen,
            )
            for view in session.detector.flows(limit=2000)
        ]
        previous, session.claimed_bytes = session.claimed_bytes, {}
        for sample, (origin, index) in claimed:
            if origin is Origin.RULE and index < len(policy.rules):
                rule = policy.rules[index]
                name, traffic_class = f"rule:{rule.name}", rule.traffic_class
            elif origin is Origin.JOB and index < len(jobs):
                job = jobs[index]
                name, traffic_class = f"job:{job.name}", job.traffic_class
            else:
                continue  # from a policy or job set replaced since
            before = previous.get(sample.flow)
            rate = 0.0
            if before is not None and sample.bytes >= before[0] and now > before[1]:
                rate = 8 * (sample.bytes - before[0]) / (now - before[1])
            session.claimed_bytes[sample.flow] = (sample.bytes, now)
            observed.append(
                ObservedFlow(
                    sample.flow,
                    traffic_class,
                    name,
                    sample.bytes,
                    rate,
                    wall + now - sample.age_s,
                    wall + now,
                )
            )
        return observed

    def _audit_loop(self) -> None:
        while True:
            hub.sleep(self.settings.audit_interval_s)
            for dpid in self._dpids():
                self._sync(dpid, "audit", True)

    # ---- events -------------------------------------------------------------

    @_on(ofp_event.EventOFPStateChange, [MAIN_DISPATCHER, DEAD_DISPATCHER])
    def _state_change(self, ev: Any) -> None:
        datapath = ev.datapath
        if datapath.id is None:
            return
        if ev.state == MAIN_DISPATCHER:
            with self._sessions_lock:
                self._sessions[datapath.id] = SwitchSession(datapath)
                self.settings.metrics.switches.set(len(self._sessions))
            LOG.info("switch %016x connected from %s", datapath.id, datapath.address)
            hub.spawn(self._sync, datapath.id, "connect", True)
        elif ev.state == DEAD_DISPATCHER:
            with self._sessions_lock:
                session = self._sessions.get(datapath.id)
                if session is None or session.datapath is not datapath:
                    return
                del self._sessions[datapath.id]
                self.settings.metrics.switches.set(len(self._sessions))
            self._replies.cancel_all(datapath.id, "switch disconnected")
            LOG.info("switch %016x disconnected", datapath.id)
            for observer in self.settings.observers:
                observer.switch_gone(datapath.id)
            hub.spawn(self._collect_qos_garbage)

    @_on(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def _port_status(self, ev: Any) -> None:
        msg = ev.msg
        reason = {0: "added", 1: "deleted", 2: "modified"}.get(msg.reason, str(msg.reason))
        name = msg.desc.name.decode(errors="replace")
        LOG.info("switch %016x port %s (%d) %s", msg.datapath.id, name, msg.desc.port_no, reason)
        hub.spawn(self._sync, msg.datapath.id, f"port {name} {reason}", True)
        if msg.reason == msg.datapath.ofproto.OFPPR_DELETE:
            hub.spawn(self._collect_qos_garbage)

    @_on(
        [
            ofp_event.EventOFPFlowStatsReply,
            ofp_event.EventOFPPortDescStatsReply,
            ofp_event.EventOFPQueueStatsReply,
        ],
        MAIN_DISPATCHER,
    )
    def _multipart_reply(self, ev: Any) -> None:
        msg = ev.msg
        more = bool(msg.flags & msg.datapath.ofproto.OFPMPF_REPLY_MORE)
        self._replies.part(msg.datapath.id, msg.xid, msg.body, more)

    @_on(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def _barrier_reply(self, ev: Any) -> None:
        self._replies.part(ev.msg.datapath.id, ev.msg.xid, [], False)

    @_on(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _error(self, ev: Any) -> None:
        msg = ev.msg
        reason = f"switch error type={msg.type} code={msg.code} for xid {msg.xid:#x}"
        if not self._replies.fail(msg.datapath.id, msg.xid, reason):
            LOG.error("switch %016x: %s", msg.datapath.id, reason)

    # ---- sync -------------------------------------------------------------

    def _request(self, datapath: Any, msg: Any) -> list[Any]:
        datapath.set_xid(msg)
        self._replies.expect(datapath.id, msg.xid)
        if not datapath.send_msg(msg):
            self._replies.fail(datapath.id, msg.xid, "switch connection is closed")
        return self._replies.wait(datapath.id, msg.xid, self.settings.reply_timeout_s)

    def _ports(self, datapath: Any) -> list[PortState]:
        parser = datapath.ofproto_parser
        ports = self._request(datapath, parser.OFPPortDescStatsRequest(datapath, 0))
        return [
            PortState(
                port.port_no,
                port.name.decode(errors="replace"),
                port.curr_speed * 1000 if port.curr_speed else None,
            )
            for port in ports
            if port.port_no <= OFPP_MAX
        ]

    def _connected(self, session: SwitchSession) -> bool:
        with self._sessions_lock:
            return self._sessions.get(session.dpid) is session

    def _sync(self, dpid: int, reason: str, fresh: bool = False) -> None:
        """``fresh`` re-reads ports and flows from the switch; otherwise the last confirmed
        state is trusted, which keeps a policy change to one round trip (the barrier)."""
        with self._sessions_lock:
            session = self._sessions.get(dpid)
        if session is None:
            return
        started = time.monotonic()
        try:
            snapshot = self._read_switch(session, reason) if fresh else None
            with session.lock:
                summary = self._sync_flows(session, reason, snapshot)
            if self.settings.manage_qos and (fresh or session.qos_applied != session.qos_plans):
                with session.qos_lock:
                    summary += "; " + self._sync_qos(session)
        except RequestFailedError as exc:
            if not self._connected(session):
                LOG.info("switch %016x: sync (%s) stopped: switch disconnected", dpid, reason)
                return
            self.settings.metrics.sync_failures.labels(f"{dpid:016x}").inc()
            LOG.error("switch %016x: sync (%s) failed: %s; will retry", dpid, reason, exc)
            return
        except Exception:
            self.settings.metrics.sync_failures.labels(f"{dpid:016x}").inc()
            LOG.exception("switch %016x: sync (%s) failed; will retry", dpid, reason)
            return
        self.settings.metrics.sync_seconds.observe(time.monotonic() - started)
        if summary.startswith("+0 -0 ") and session.synced_once:
            return
        LOG.info("switch %016x in sync (%s): %s", dpid, reason, summary)
        session.synced_once = True

    def _read_switch(
        self, session: SwitchSession, reason: str
    ) -> tuple[int, list[PortState], list[InstalledFlow]]:
        """Ports and flows as the switch has them, read without holding the sync lock.

        Reading 400 flows from ten switches at once is slow; holding the lock
        meanwhile would make a policy change wait for an audit.  The
        generation tells ``_sync_flows`` whether flow mods went out since.
        """
        datapath, generation = session.datapath, session.generation
        ports = self._ports(datapath)
        polled = time.monotonic()
        stats = self._request(datapath, messages.flow_stats_request(datapath))
        installed = [messages.installed_flow(s) for s in stats]
        if reason == "audit":
            self._record_stats(session, self.settings.active.policy, stats, installed, ports)
            self.settings.metrics.stats_poll_seconds.observe(time.monotonic() - polled)
        return generation, ports, installed

    def _sync_flows(
        self,
        session: SwitchSession,
        reason: str,
        snapshot: tuple[int, list[PortState], list[InstalledFlow]] | None,
    ) -> str:
        """Bring the flow table to the active policy; returns a one-line summary."""
        datapath = session.datapath
        active = self.settings.active
        tag = f"{session.dpid:016x}"
        if snapshot is not None and snapshot[0] == session.generation:
            session.ports, session.installed = snapshot[1], snapshot[2]
        elif snapshot is not None or session.ports is None or session.installed is None:
            session.ports = self._ports(datapath)  # stale read, or nothing known yet
            stats = self._request(datapath, messages.flow_stats_request(datapath))
            session.installed = [messages.installed_flow(s) for s in stats]
        ports, installed = session.ports, session.installed
        plan = plan_switch(
            active.policy,
            {port.name: port.number for port in ports},
            session.overrides,
            self.settings.jobs,
        )
        diff = diff_flows(installed, plan.flows)
        if not diff.empty:
            session.installed = None  # unknown until the barrier confirms
            session.generation += 1
            self._send_diff(datapath, diff)
        session.installed = [InstalledFlow(flow.key, flow.cookie) for flow in plan.flows]
        self._confirmed(session, active)
        qos_plans = plan_ports(active.policy, {port.name: port.link_bps for port in ports})
        session.qos_plans = qos_plans
        bridge = self._bridge(session)
        reported = (active.version, id(plan), hash(tuple(ports)))
        if reported != session.reported or not diff.empty:
            # Reports carry every flow: send one only when something changed.
            self._report(session, active, ports, plan.flows, qos_plans, bridge)
            session.reported = reported
        for table_id, name in TABLE_NAMES.items():
            count = sum(1 for flow in plan.flows if flow.table_id == table_id)
            self.settings.metrics.flows.labels(tag, name).set(count)
        if session.synced_once and reason == "audit" and not diff.empty:
            self.settings.metrics.drift_repairs.labels(tag, "flows").inc()
        if plan.unresolved_rules:
            LOG.warning(
                "switch %s: rules %s name ports this switch lacks; skipped",
                tag,
                ", ".join(plan.unresolved_rules),
            )
        return f"+{len(diff.add)} -{len(diff.delete)} ={diff.unchanged} flows"

    def _confirmed(self, session: SwitchSession, active: ActivePolicy) -> None:
        """The switch holds ``active``'s flows (barrier passed, or nothing to change)."""
        if session.applied is not active:
            self.settings.metrics.apply_seconds.observe(time.monotonic() - active.since)
            session.applied = active
        version = active.version if active.version is not None else -1
        self.settings.metrics.applied_version.labels(f"{session.dpid:016x}").set(version)

    def _report(
        self,
        session: SwitchSession,
        active: ActivePolicy,
        ports: list[PortState],
        flows: tuple[Any, ...],
        queues: dict[str, PortQos],
        bridge: Bridge | None,
    ) -> None:
        report = SyncReport(
            dpid=session.dpid,
            policy_version=active.version,
            connected_at=session.connected_at,
            ports=tuple(ports),
            flows=flows,
            queues=tuple(queues.values()) if self.settings.manage_qos and bridge else (),
            datapath_type=bridge.datapath_type if bridge else None,
        )
        for observer in self.settings.observers:
            try:
                observer.switch_synced(report)
            except Exception:
                LOG.exception("switch %016x: observer %r failed", session.dpid, observer)

    def _record_stats(
        self,
        session: SwitchSession,
        policy: Policy,
        stats: list[Any],
        installed: list[Any],
        ports: list[PortState],
    ) -> None:
        """Per-class and per-queue counters for Prometheus, from the audit's own reads."""
        metrics, tag = self.settings.metrics, f"{session.dpid:016x}"
        counters = [
            FlowCounters(flow, s.packet_count, s.byte_count)
            for flow, s in zip(installed, stats, strict=True)
        ]
        for name, (packets, octets) in class_counters(policy, counters).items():
            metrics.class_packets.labels(tag, name).set(packets)
            metrics.class_bytes.labels(tag, name).set(octets)
        datapath = session.datapath
        parser, ofproto = datapath.ofproto_parser, datapath.ofproto
        try:
            queues = self._request(
                datapath,
                parser.OFPQueueStatsRequest(datapath, 0, ofproto.OFPP_ANY, ofproto.OFPQ_ALL),
            )
        except RequestFailedError as exc:
            LOG.debug("switch %s: no queue statistics: %s", tag, exc)
            return
        names = {port.number: port.name for port in ports}
        for queue in queues:
            labels = (tag, names.get(queue.port_no, str(queue.port_no)), str(queue.queue_id))
            metrics.queue_tx_bytes.labels(*labels).set(queue.tx_bytes)
            metrics.queue_tx_packets.labels(*labels).set(queue.tx_packets)
            metrics.queue_tx_errors.labels(*labels).set(queue.tx_errors)

    def _send_diff(self, datapath: Any, diff: FlowDiff) -> None:
        """Adds first, so traffic never falls through a gap, then deletes, then a barrier.

        Each message is tracked so an error from the switch fails the sync
        instead of leaving it believed-applied.
        """
        tag = f"{datapath.id:016x}"
        sent: list[int] = []
        for msg in [
            *(messages.flow_add(datapath, f) for f in diff.add),
            *(messages.flow_delete(datapath, k) for k in diff.delete),
            *(messages.flow_delete_by_cookie(datapath, t, c) for t, c in diff.delete_by_cookie),
        ]:
            datapath.set_xid(msg)
            self._replies.expect(datapath.id, msg.xid)
            sent.append(msg.xid)
            datapath.send_msg(msg)
        self.settings.metrics.flow_mods.labels(tag, "add").inc(len(diff.add))
        self.settings.metrics.flow_mods.labels(tag, "delete").inc(len(diff.delete))
        barrier = datapath.ofproto_parser.OFPBarrierRequest(datapath)
        try:
            self._request(datapath, barrier)
        finally:
            errors = self._replies.settle(datapath.id, sent)
        if errors:
            raise RequestFailedError(f"{len(errors)} flow mod(s) rejected, first: {errors[0]}")

    def _bridge(self, session: SwitchSession) -> Bridge | None:
        """The OVSDB bridge of this datapath, looked up once (None: not local, or OVSDB down)."""
        if session.bridge is None and self.settings.manage_qos:
            try:
                session.bridge = self.settings.ovsdb.bridge_for(session.dpid)
            except OvsdbError as exc:
                LOG.error(
                    "switch %016x: cannot read OVSDB bridges: %s; will retry",
                    session.dpid,
                    exc.detail,
                )
        return session.bridge

    def _sync_qos(self, session: SwitchSession) -> str:
        """Queues to the newest plan of this switch (a later sync may have replaced ours)."""
        tag, bridge, plans = f"{session.dpid:016x}", session.bridge, session.qos_plans
        if bridge is None:
            return "QoS skipped (bridge not in the local OVSDB, or OVSDB unreachable)"
        outcome = reconcile_bridge(self.settings.ovsdb, bridge, plans)
        session.qos_applied = plans if outcome.ok and not outcome.vanished else None
        if outcome.vanished:
            LOG.info(
                "switch %s: ports gone before their queues were set: %s",
                tag,
                ", ".join(outcome.vanished),
            )
        for port, detail in outcome.failed.items():
            self.settings.metrics.qos_errors.labels(port).inc()
            LOG.error("switch %s port %s: QoS not applied: %s; will retry", tag, port, detail)
        if session.synced_once and (outcome.changed_ports or outcome.filtered_ports):
            self.settings.metrics.drift_repairs.labels(tag, "qos").inc()
            LOG.info(
                "switch %s: queues set on %s, tc filters set on %s",
                tag,
                ", ".join(outcome.changed_ports) or "-",
                ", ".join(outcome.filtered_ports) or "-",
            )
        provisioned = len(plans) - len(outcome.failed) - len(outcome.vanished)
        return f"queues on {provisioned}/{len(plans)} ports ({bridge.datapath_type} datapath)"

    def _collect_qos_garbage(self) -> None:
        """One collection at a time: ten switches leaving at once must not race to destroy
        the same rows."""
        if not self.settings.manage_qos:
            return
        try:
            with self._gc_lock:
                freed = self.settings.ovsdb.collect_garbage()
        except OvsdbError as exc:
            LOG.error("cannot clean up QoS rows of removed ports: %s", exc)
            return
        if freed:
            LOG.info("removed QoS rows of deleted ports: %s", ", ".join(sorted(freed)))
