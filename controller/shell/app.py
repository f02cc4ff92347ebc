"""The controller's shell: the hub's connections, routed to actors that own everything.

Threads are fixed whatever the number of switches: the hub's one selector
thread, the runtime's pool, timer and blocking threads, and the Redis link's.
Who owns what:

- each switch's state: its ``SwitchActor`` (``controller.switch``);
- which connection serves which datapath id, and the policy-and-jobs
  snapshot every switch is told: the ``Registry`` actor;
- topology, hosts and placements: the ``FabricOwner`` actor;
- the route from a connection to its switch actor: the hub thread (written
  only in ``connected`` and ``disconnected``, which run there).

Nothing here computes a plan; the handlers only turn what arrives into
events for the owner it concerns.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

from controller.actors.runtime import ActorSystem, Ref
from controller.mastership.hosts import HostStore
from controller.mastership.keeper import LeaseKeeper
from controller.mastership.leases import Leases
from controller.mastership.pins import PinStore
from controller.openflow import fabric_events as fabric
from controller.openflow import messages
from controller.openflow.fabric_owner import FabricOwner
from controller.openflow.hub import Connection
from controller.openflow.osken_internals import DATAPATH, encode, parse
from controller.openflow.settings import ControllerSettings
from controller.pipeline.desired import FabricInputs
from controller.policy.jobs import JobSpec
from controller.policy.model import Policy
from controller.qos.ovsdb import OvsdbError
from controller.shell.mastership import (
    Assigned,
    FabricExchange,
    Mastership,
    MastershipEvent,
    ServedChanged,
)
from controller.shell.mastership import Refused as MastershipRefused
from controller.shell.registry import (
    Claim,
    FabricPublished,
    Gone,
    JobsArrived,
    PolicyArrived,
    PortsKnown,
    ProbeAnswered,
    QosChanged,
    Refused,
    Registry,
    RegistryEvent,
    SwitchRef,
    probe_reply,
)
from controller.switch import commands as switch_commands
from controller.switch import events as switch_events
from controller.switch.actor import OnceLog, SayOnce, SwitchServices, spawn_switch
from controller.switch.events import PolicySnapshot
from controller.switch.slave import slave_keeps
from controller.switch.state import SwitchConfig, initial_state

LOG = logging.getLogger("flowlane.controller")

OFPT_PACKET_IN = 10

_GOLDEN = 0x9E3779B97F4A7C15
"""Spreads datapath ids over the audit interval (Fibonacci hashing)."""


def audit_phase(dpid: int, interval_s: float) -> float:
    """When in the audit interval this switch is audited: switches spread out, so an audit
    of a hundred switches is never a hundred table reads at once."""
    return ((dpid * _GOLDEN) % 2**64) / 2**64 * interval_s


class _SwitchEvents:
    """The registry's words, as events of a switch actor."""

    def __init__(self, audit_interval_s: float) -> None:
        self._audit_interval_s = audit_interval_s

    def serve(self, ref: SwitchRef, dpid: int, snapshot: PolicySnapshot) -> None:
        ref.tell(switch_events.PolicyChanged(snapshot))
        phase = audit_phase(dpid, self._audit_interval_s)
        ref.tell(switch_events.Connected(wall=time.time(), audit_phase_s=phase))

    def policy(self, ref: SwitchRef, snapshot: PolicySnapshot) -> None:
        ref.tell(switch_events.PolicyChanged(snapshot))

    def fabric(self, ref: SwitchRef, inputs: FabricInputs | None) -> None:
        ref.tell(switch_events.FabricChanged(inputs))

    def qos_changed(self, ref: SwitchRef, ports: frozenset[str]) -> None:
        ref.tell(switch_events.QosChanged())

    def disconnected(self, ref: SwitchRef, gone: bool) -> None:
        ref.tell(switch_events.Disconnected(gone))


class FlowlaneController:
    """The hub's handler (``controller.openflow.hub.HubHandler``) and the actors' wiring."""

    def __init__(
        self, settings: ControllerSettings, runtime: ActorSystem, leases: Leases | None = None
    ) -> None:
        """``leases``: several controllers share the switches (mastership, issue 22); None:
        the only controller, master of every switch as before."""
        self.settings = settings
        self.runtime = runtime
        self._once: Ref[SayOnce] = runtime.spawn("once", OnceLog())
        self._routes: dict[Connection, Ref[switch_events.Event]] = {}
        """Hub thread only: the switch actor of each connection that finished its handshake."""
        self._config = SwitchConfig(
            audit_interval_s=settings.audit_interval_s,
            reply_timeout_s=settings.reply_timeout_s,
            manage_qos=settings.manage_qos,
            roles=leases is not None,
        )
        self.keeper: LeaseKeeper | None = None
        self._mastership: Ref[MastershipEvent] | None = None
        self.mastership: Mastership | None = None
        self.pins: FabricExchange | None = None
        if leases is not None:
            self.mastership = Mastership(
                lambda: self.registry.served, self._wake_keeper, self._refused
            )
            self._mastership = runtime.spawn("mastership", self.mastership)
            self.keeper = LeaseKeeper(
                leases,
                connected=lambda: frozenset(self.registry.served),
                publish=lambda roles: self._tell_mastership(Assigned(roles)),
                ready=lambda: self.pins.ready() if self.pins is not None else frozenset(),
            )
            # Pins and hosts go to the others and come from them after each renewal.
            keeper = self.keeper
            self.pins = FabricExchange(
                PinStore(leases),
                HostStore(leases),
                lambda event: self._fabric.tell(event),
                reading=lambda: keeper.reading,
            )
            self.keeper.watch(self.pins)
        self.registry = Registry(
            settings,
            _SwitchEvents(settings.audit_interval_s),
            schedule=lambda delay, event: self._registry.tell_after(delay, event),
            fabric_policy=lambda policy: self._fabric.tell(fabric.PolicyChanged(policy)),
            fabric_jobs=lambda jobs: self._fabric.tell(fabric.JobsChanged(jobs)),
            served_changed=(
                (lambda: self._tell_mastership(ServedChanged())) if leases is not None else None
            ),
        )
        self._registry: Ref[RegistryEvent] = runtime.spawn("registry", self.registry)
        self.fabric = FabricOwner(
            settings.active.policy,
            send_packet=self._packet_out,
            publish=self._fabric_published,
            schedule=lambda delay, event: self._fabric.tell_after(delay, event),
            metrics=settings.metrics,
            observers=settings.observers,
            clock=time.monotonic,
            jobs=settings.jobs,
            share=self.pins.offer if self.pins is not None else None,
        )
        self._fabric: Ref[fabric.FabricMessage] = runtime.spawn("fabric", self.fabric)
        self._services = SwitchServices(
            runtime=runtime,
            config=self._config,
            metrics=settings.metrics,
            observers=settings.observers,
            ovsdb=settings.ovsdb if settings.manage_qos else None,
            fabric=self._switch_learned,
            gone=lambda dpid: self._fabric.tell(fabric.SwitchGone(dpid)),
            say_once=self._once.tell,
            stepped_down=lambda command: self._tell_mastership(MastershipRefused(command.dpid)),
            may_write_qos=self.keeper.may_write if self.keeper is not None else lambda _d: True,
        )

    # ---- mastership (only with ``leases``) -------------------------------------------

    def _tell_mastership(self, event: MastershipEvent) -> None:
        if self._mastership is not None:
            self._mastership.tell(event)

    def _wake_keeper(self) -> None:
        if self.keeper is not None:
            self.keeper.wake()

    def _refused(self, dpid: int) -> None:
        if self.keeper is not None:
            self.keeper.stepped_down(dpid)

    # ---- life cycle ---------------------------------------------------------------

    def start(self) -> None:
        self.fabric.start()
        if self.settings.manage_qos:
            # On connect (rows of ports deleted while no controller ran) and then whenever
            # OVSDB says a Port, QoS or Queue row changed: no timer, no thread of ours.
            self.settings.ovsdb.collect_garbage_on_change(self._qos_collected)
            self.settings.ovsdb.watch_port_qos(self._port_qos_changed)

    def stop(self) -> None:
        self.settings.ovsdb.close()

    # ---- what the Redis link and SIGHUP say ------------------------------------------

    def set_policy(self, policy: Policy, version: int | None = None) -> None:
        self._registry.tell(PolicyArrived(policy, version))

    def set_jobs(self, jobs: tuple[JobSpec, ...]) -> None:
        self._registry.tell(JobsArrived(jobs))

    # ---- the hub's callbacks (hub thread: tell, never block) -------------------------

    def connected(self, conn: Connection) -> None:
        if self.settings.bind_dpid:
            from controller.auth.certs import dpid_binding_error  # cryptography: when bound

            reason = dpid_binding_error(conn.peer_certificate(), conn.dpid)
            if reason is not None:
                self._registry.tell(Refused(conn, reason))
                return
        state = initial_state(conn.dpid, self.registry.snapshot)
        _actor, ref = spawn_switch(
            f"switch-{conn.dpid:016x}-{id(conn):x}", conn, state, self._services
        )
        self._routes[conn] = ref
        self._registry.tell(Claim(conn, ref))

    def received(self, conn: Connection, data: bytes) -> None:
        if probe_reply(data):
            self._registry.tell(ProbeAnswered(conn))
            return
        ref = self._routes.get(conn)
        if ref is None:
            return
        if data[1] == OFPT_PACKET_IN:
            self._packet_in(conn, data)
            return
        ref.tell(switch_events.Received(data))

    def disconnected(self, conn: Connection) -> None:
        ref = self._routes.pop(conn, None)
        if ref is not None:
            self._registry.tell(Gone(conn, ref))

    def _packet_in(self, conn: Connection, data: bytes) -> None:
        """Fabric discovery's frames (LLDP, ARP) go to the fabric owner, from served
        connections only: a refused twin's packet-ins are not taken for the switch's."""
        served = self.registry.served.get(conn.dpid)
        if served is None or served.conn is not conn:
            return
        if not self.settings.active.policy.forwarding.fabric:  # the registry's to write
            return
        mastership = self.mastership
        slave = mastership is not None and conn.dpid not in mastership.masters
        if slave and not slave_keeps(data):
            return  # a slave's unknown unicast, not even parsed (controller.switch.slave)
        try:
            in_port, frame = messages.packet_in_summary(parse(data))
        except Exception:
            LOG.exception("switch %016x: packet-in not decoded", conn.dpid)
            return
        self._fabric.tell(fabric.PacketIn(conn.dpid, in_port, frame))

    # ---- between actors ------------------------------------------------------------

    def _switch_learned(self, learned: switch_commands.FabricInput) -> None:
        """What a switch actor read that the fabric owner and the registry want."""
        item = learned.item  # already the fabric's own event
        self._fabric.tell(item)
        if isinstance(item, fabric.SwitchPorts):
            self._registry.tell(PortsKnown(item.dpid, item.ports))

    def _fabric_published(
        self, changed: frozenset[int], inputs: Mapping[int, FabricInputs]
    ) -> None:
        self._registry.tell(FabricPublished({dpid: inputs.get(dpid) for dpid in changed}))

    def _packet_out(self, dpid: int, ports: Sequence[int], data: bytes) -> None:
        """LLDP probes and ARP answers, straight on the served connection (xid 0: no
        reply is expected, and a switch's own xids never use it)."""
        served = self.registry.served.get(dpid)
        if served is None:
            return
        if self.mastership is not None and dpid not in self.mastership.masters:
            return  # a slave's packet-outs are refused (OFPBRC_IS_SLAVE): the master sends
        msg = messages.packet_out(DATAPATH, ports, data)
        served.conn.send(encode(msg, 0))

    def _port_qos_changed(self, ports: frozenset[str]) -> None:
        """Ports whose QoS changed in OVSDB (on the OVSDB connection's thread): their
        switches check queues and tc filters now, not at the next audit."""
        self._registry.tell(QosChanged(ports))

    @staticmethod
    def _qos_collected(freed: list[str], error: OvsdbError | None) -> None:
        """After a collection the OVSDB connection ran on a change (on its own thread)."""
        if error is not None:
            LOG.error("cannot clean up QoS rows of removed ports: %s", error)
        elif freed:
            LOG.info("removed QoS rows of deleted ports: %s", ", ".join(sorted(freed)))
