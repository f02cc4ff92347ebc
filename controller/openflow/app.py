"""The os-ken application: the only module that uses os-ken's app machinery.

It turns switch events into requests to each switch's worker
(``controller.openflow.worker``) and packet-ins into calls on the fabric
shell; the workers ask the pure core what each switch should have and send
the difference.  No handler here does I/O of its own beyond a packet-out.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any, ClassVar

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import (
    DEAD_DISPATCHER,
    MAIN_DISPATCHER,
)
from os_ken.ofproto import ofproto_v1_3

from controller.classify.records import ObservedFlow
from controller.openflow import messages
from controller.openflow.audit import audit_step_s, next_in_turn
from controller.openflow.channel import Channel
from controller.openflow.fabric import FabricShell
from controller.openflow.flowstats import RawFlowStats
from controller.openflow.handlers import on_event
from controller.openflow.inline_replies import InlineReplies
from controller.openflow.observer import PortState
from controller.openflow.replies import ReplyWaiter
from controller.openflow.settings import ActivePolicy, ControllerSettings
from controller.openflow.worker import SwitchWorker, port_state
from controller.pipeline.desired import FabricInputs
from controller.policy.jobs import JobSpec
from controller.policy.model import Policy
from controller.policy.warnings import policy_warnings
from controller.qos.ovsdb import OvsdbError
from controller.qos.plan import port_rate, unmatched_overrides

LOG = logging.getLogger("flowlane.controller")

PROBE_S = 1.0
"""How long a served connection has to answer when another claims its datapath id."""


class FlowlaneApp(app_manager.OSKenApp):  # type: ignore[misc]
    OFP_VERSIONS: ClassVar[list[int]] = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        settings = kwargs.pop("flowlane")
        super().__init__(*args, **kwargs)
        self.settings: ControllerSettings = settings
        self._workers: dict[int, SwitchWorker] = {}
        self._workers_lock = threading.Lock()
        self._replies = ReplyWaiter()
        self._raw_flow_stats = RawFlowStats()
        self._raw_flow_stats.install()
        self._inline = InlineReplies(self._replies, lambda dp: self._served(dp) is not None)
        self._stopping = threading.Event()
        self.fabric = FabricShell(settings, self._packet_out, self._request_sync)
        self._threads: list[threading.Thread] = []
        self._warned_lock = threading.Lock()
        self._warned: tuple[int | None, set[str]] = (None, set())
        """Policy warnings logged for this version: each is said once, not per switch."""

    # ---- life cycle -------------------------------------------------------

    def start(self) -> Any:
        self._inline.attach()
        thread = super().start()
        self._spawn(self._audit_loop, "audit")
        if self.settings.manage_qos:
            # On connect (rows of ports deleted while no controller ran) and then whenever
            # OVSDB says a Port, QoS or Queue row changed: no timer, no thread of ours.
            self.settings.ovsdb.collect_garbage_on_change(self._qos_collected)
            self.settings.ovsdb.watch_port_qos(self._port_qos_changed)
        self.fabric.start()
        return thread

    def stop(self) -> None:
        """Stop every worker and loop (SIGTERM): switches keep what they hold."""
        self._stopping.set()
        # Signal everyone first, then wait once: one deadline for all, not two seconds each.
        deadline = time.monotonic() + 1.0
        workers = self._all_workers()
        for worker in workers:
            worker.stop(0.0)
        self.fabric.stop(0.0)
        for worker in workers:
            worker.stop(max(0.0, deadline - time.monotonic()))
        self.fabric.stop(max(0.0, deadline - time.monotonic()))
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._inline.detach()
        self.settings.ovsdb.close()
        super().stop()

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        """Start a loop or a one-off job; finished ones are forgotten, so the list stays short."""
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]

    def set_policy(self, policy: Policy, version: int | None = None) -> None:
        """Swap the active policy and bring every connected switch to it."""
        self.settings.active = ActivePolicy(policy, version)
        self._warn_unmatched_overrides(policy)
        self._warn_policy()
        self.fabric.policy_changed()
        LOG.info(
            "policy version %s is active; applying to %d switch(es)",
            version,
            len(self._all_workers()),
        )
        self._request_sync(None, f"policy version {version}")

    def _warn_unmatched_overrides(self, policy: Policy) -> None:
        ports = {port.name for worker in self._all_workers() for port in worker.ports or []}
        missing = unmatched_overrides(policy, ports) if ports else []
        if missing:
            LOG.warning(
                "ports.overrides names %s, which no connected switch has: a typo, or a switch"
                " not connected yet (its rate applies to nothing until one has the port)",
                ", ".join(missing),
            )

    def _warn_policy(self) -> None:
        """Log what in the active policy will never act on the ports known so far; a warning
        is logged once per policy version (a switch that connects later can add one)."""
        active = self.settings.active
        policy = active.policy
        ceilings = {
            port.name: port_rate(policy, port.name, port.link_bps)[0]
            for worker in self._all_workers()
            for port in worker.ports or []
        }
        found = [str(warning) for warning in policy_warnings(policy, ceilings)]
        with self._warned_lock:
            version, said = self._warned
            if version != active.version:
                said = set()
                self._warned = (active.version, said)
            fresh = [warning for warning in found if warning not in said]
            said.update(fresh)
        for warning in fresh:
            LOG.warning("policy version %s: %s", active.version, warning)

    def set_jobs(self, jobs: tuple[JobSpec, ...]) -> None:
        """New set of registered jobs: re-plan every switch (only job entries change)."""
        self.settings.jobs = jobs
        LOG.info("jobs: %s", ", ".join(job.name for job in jobs) or "none")
        self._request_sync(None, "jobs")

    def _all_workers(self) -> list[SwitchWorker]:
        with self._workers_lock:
            return list(self._workers.values())

    def _request_sync(self, dpids: Iterable[int] | None, reason: str, fresh: bool = False) -> None:
        with self._workers_lock:
            workers = (
                list(self._workers.values())
                if dpids is None
                else [self._workers[d] for d in dpids if d in self._workers]
            )
        for worker in workers:
            worker.request_sync(reason, fresh)

    def _audit_loop(self) -> None:
        """Every switch re-read and repaired once per interval, one at a time (see
        ``audit``); a request each, so a stuck switch stalls none."""
        last: int | None = None
        while True:
            step = audit_step_s(self.settings.audit_interval_s, len(self._all_workers()))
            if self._stopping.wait(step):
                return
            with self._workers_lock:
                last = next_in_turn(self._workers, last)
                worker = self._workers.get(last) if last is not None else None
            if worker is not None:
                worker.request_sync("audit", fresh=True)

    # ---- what workers ask of the controller (SwitchContext) ----------------------------

    def fabric_inputs(self, dpid: int) -> FabricInputs | None:
        return self.fabric.inputs(dpid) if self.fabric.enabled else None

    def switch_ports(self, dpid: int, ports: Sequence[PortState]) -> None:
        self.fabric.switch_ports(dpid, ports)
        self._warn_policy()  # a port slower than the policy can make a setting void

    def flows_seen(self, dpid: int, flows: Sequence[ObservedFlow]) -> None:
        self.fabric.flows_seen(dpid, flows)

    def port_rates(self, dpid: int, tx_bps: dict[int, float]) -> None:
        self.fabric.port_rates(dpid, tx_bps)

    # ---- events -------------------------------------------------------------

    @on_event(ofp_event.EventOFPStateChange, [MAIN_DISPATCHER, DEAD_DISPATCHER])
    def _state_change(self, ev: Any) -> None:
        datapath = ev.datapath
        if datapath.id is None:
            return
        if ev.state == MAIN_DISPATCHER:
            if self.settings.bind_dpid and not self._certified(datapath):
                return
            with self._workers_lock:
                old = self._workers.get(datapath.id)
            if old is not None and old.channel.datapath is not datapath:
                # Off the event thread: the probe waits for the old connection's answer.
                self._spawn(partial(self._contest, datapath, old), f"contest-{datapath.id:016x}")
                return
            self._serve(datapath)
        elif ev.state == DEAD_DISPATCHER:
            with self._workers_lock:
                gone = self._workers.get(datapath.id)
                if gone is None or gone.channel.datapath is not datapath:
                    return
                del self._workers[datapath.id]
                self.settings.metrics.switches.set(len(self._workers))
            gone.stop(0.0)
            self.settings.metrics.totals.forget(f"{datapath.id:016x}")
            self._replies.cancel_all(datapath.id, "switch disconnected")
            LOG.info("switch %016x disconnected", datapath.id)
            self.fabric.switch_gone(datapath.id)
            for observer in self.settings.observers:
                observer.switch_gone(datapath.id)

    def _serve(self, datapath: Any) -> None:
        worker = SwitchWorker(
            Channel(datapath, self._replies, self.settings.reply_timeout_s, self._raw_flow_stats),
            self,
        )
        with self._workers_lock:
            old = self._workers.get(datapath.id)
            self._workers[datapath.id] = worker
            self.settings.metrics.switches.set(len(self._workers))
        if old is not None:
            old.stop(0.0)
            with contextlib.suppress(OSError):
                old.channel.datapath.close()
        LOG.info("switch %016x connected from %s", datapath.id, _address(datapath))
        worker.start()
        worker.request_sync("connect", fresh=True)

    def _contest(self, datapath: Any, old: SwitchWorker) -> None:
        """A second connection claims a served datapath id: who is the switch?

        The connection being served keeps the id if it still answers (a barrier
        within ``PROBE_S``); the newcomer is then an impostor or a misconfigured
        twin, and is closed. A served connection that no longer answers is a
        switch that restarted before its old TCP connection timed out: the new
        one takes over, as it must for a reconnect to be quick.
        """
        if self._stopping.is_set():
            return
        if not old.channel.answers(PROBE_S):
            LOG.warning(
                "switch %016x connected again from %s; its connection from %s does not"
                " answer, so the new one takes over",
                datapath.id,
                _address(datapath),
                _address(old.channel.datapath),
            )
            self._serve(datapath)
            return
        reason = (
            f"datapath id {datapath.id:016x} is served on a live connection from"
            f" {_address(old.channel.datapath)}"
        )
        self._refuse(datapath, reason)

    def _refuse(self, datapath: Any, reason: str) -> None:
        """Hang up on a connection that may not serve its datapath id: logged, counted and
        recorded as a switch-refused event, so an operator sees why a switch is not served."""
        LOG.warning("refused a switch connection from %s: %s", _address(datapath), reason)
        self.settings.metrics.refused_connections.labels(f"{datapath.id:016x}").inc()
        for observer in self.settings.observers:
            observer.switch_refused(datapath.id, _address(datapath), reason)
        with contextlib.suppress(OSError):
            datapath.close()
            datapath.socket.close()

    def _certified(self, datapath: Any) -> bool:
        """Whether the switch's certificate names the datapath id it claims (--ofp-bind-dpid);
        one that does not is refused, logged, counted and recorded as a switch-refused event,
        before any of its messages is taken for that switch's."""
        from controller.auth.certs import dpid_binding_error  # cryptography: only when bound

        getpeercert = getattr(datapath.socket, "getpeercert", None)
        cert = getpeercert(binary_form=True) if callable(getpeercert) else None
        reason = dpid_binding_error(cert, datapath.id)
        if reason is None:
            return True
        self._refuse(datapath, reason)
        return False

    def _served(self, datapath: Any) -> SwitchWorker | None:
        """The worker of this very connection; None for a connection not (or no longer)
        served, whose messages are ignored, so a refused twin cannot answer our requests."""
        with self._workers_lock:
            worker = self._workers.get(datapath.id)
        return worker if worker is not None and worker.channel.datapath is datapath else None

    @on_event(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def _port_status(self, ev: Any) -> None:
        msg = ev.msg
        datapath = msg.datapath
        ofproto = datapath.ofproto
        reason = {0: "added", 1: "deleted", 2: "modified"}.get(msg.reason, str(msg.reason))
        port = port_state(msg.desc, ofproto)
        state = "up" if port.up else "down"
        LOG.info(
            "switch %016x port %s (%d) %s, %s", datapath.id, port.name, port.number, reason, state
        )
        worker = self._served(datapath)
        if worker is None:
            return
        deleted = msg.reason == ofproto.OFPPR_DELETE
        worker.port_status(port, deleted, f"port {port.name} {reason} {state}")

    @on_event(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def _packet_in(self, ev: Any) -> None:
        msg = ev.msg
        if not self.fabric.enabled or self._served(msg.datapath) is None:
            return
        in_port, data = messages.packet_in_summary(msg)
        try:
            self.fabric.packet_in(msg.datapath.id, in_port, data)
        except Exception:
            LOG.exception("switch %016x: packet-in not handled", msg.datapath.id)

    def _packet_out(self, dpid: int, ports: Sequence[int], data: bytes) -> None:
        with self._workers_lock:
            worker = self._workers.get(dpid)
        if worker is None:
            return
        datapath = worker.channel.datapath
        worker.channel.send(messages.packet_out(datapath, ports, data))

    # ---- queues of deleted ports ---------------------------------------------------

    def _port_qos_changed(self, ports: frozenset[str]) -> None:
        """Ports whose QoS changed in OVSDB (on the OVSDB connection's thread): their switches'
        workers check queues and tc filters now, not at the next audit."""
        for worker in self._all_workers():
            if any(port.name in ports for port in worker.ports or ()):
                worker.queues_changed()

    @staticmethod
    def _qos_collected(freed: list[str], error: OvsdbError | None) -> None:
        """After a collection the OVSDB connection ran on a change (on its own thread)."""
        if error is not None:
            LOG.error("cannot clean up QoS rows of removed ports: %s", error)
        elif freed:
            LOG.info("removed QoS rows of deleted ports: %s", ", ".join(sorted(freed)))


def _address(datapath: Any) -> str:
    """``host:port`` of a connection, with the TLS version when it is one."""
    host, port = datapath.address[:2]
    version = getattr(datapath.socket, "version", None)
    tls = f" over {version()}" if callable(version) and version() else ""
    return f"{host}:{port}{tls}"
