"""Which connection serves which datapath id, and what every switch is told: one owner.

The registry is an actor.  It alone decides which connection serves a
datapath id (a twin is probed and refused, a switch that reconnected before
its old connection timed out takes over), holds the active policy and the
registered jobs as one snapshot with one version pair, and forwards policy,
job, fabric and QoS changes to the switches it serves.  Other threads never
write its state: they tell it events; readers (the fabric's packet-outs, the
hub's router) read ``served``, an immutable mapping it replaces whole.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Protocol

from controller.openflow.settings import ActivePolicy, ControllerSettings
from controller.pipeline.desired import FabricInputs
from controller.pipeline.plan import PortState
from controller.policy.jobs import JobSpec
from controller.policy.model import Policy
from controller.policy.warnings import policy_warnings
from controller.qos.plan import port_rate, unmatched_overrides
from controller.switch.events import PolicySnapshot
from controller.switch.state import MAX_XID

LOG = logging.getLogger("flowlane.controller")

PROBE_S = 1.0
"""How long a served connection has to answer when another claims its datapath id."""

PROBE_XID = MAX_XID
"""Transaction ids from here up are the registry's probes; a switch's own stay below."""

OFPT_BARRIER_REQUEST = 20
OFPT_BARRIER_REPLY = 21


class Conn(Protocol):
    """What the registry needs of a connection (``controller.openflow.hub.Connection``)."""

    dpid: int
    address: str

    def send(self, data: bytes) -> bool: ...

    def close(self) -> None: ...


class SwitchRef(Protocol):
    """What the registry needs of a switch actor's reference."""

    def tell(self, event: Any) -> None: ...

    def stop(self) -> None: ...


class Switches(Protocol):
    """The events the registry sends a switch actor; the app adapts them to its events."""

    def serve(self, ref: SwitchRef, dpid: int, snapshot: PolicySnapshot) -> None: ...

    def policy(self, ref: SwitchRef, snapshot: PolicySnapshot) -> None: ...

    def fabric(self, ref: SwitchRef, inputs: FabricInputs | None) -> None: ...

    def qos_changed(self, ref: SwitchRef, ports: frozenset[str]) -> None: ...

    def disconnected(self, ref: SwitchRef, gone: bool) -> None: ...


# ---- events -------------------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    """A connection finished its handshake; ``ref`` is its switch actor, not yet serving."""

    conn: Conn
    ref: SwitchRef


@dataclass(frozen=True)
class Gone:
    conn: Conn
    ref: SwitchRef


@dataclass(frozen=True)
class ProbeAnswered:
    conn: Conn


@dataclass(frozen=True)
class ProbeExpired:
    dpid: int
    conn: Conn


@dataclass(frozen=True)
class PolicyArrived:
    policy: Policy
    version: int | None


@dataclass(frozen=True)
class JobsArrived:
    jobs: tuple[JobSpec, ...]


@dataclass(frozen=True)
class FabricPublished:
    inputs: Mapping[int, FabricInputs | None]


@dataclass(frozen=True)
class QosChanged:
    ports: frozenset[str]


@dataclass(frozen=True)
class PortsKnown:
    dpid: int
    ports: tuple[PortState, ...]


@dataclass(frozen=True)
class Refused:
    """A connection refused before it was served (a certificate naming another switch)."""

    conn: Conn
    reason: str


RegistryEvent = (
    Claim
    | Gone
    | ProbeAnswered
    | ProbeExpired
    | PolicyArrived
    | JobsArrived
    | FabricPublished
    | QosChanged
    | PortsKnown
    | Refused
)


@dataclass(frozen=True)
class Served:
    conn: Conn
    ref: SwitchRef


@dataclass
class _Contest:
    old: Served
    new: Served
    cancel: Callable[[], None]


@dataclass
class _Said:
    version: int | None = None
    warnings: set[str] = field(default_factory=set)


class Registry:
    """The connections' owner (see the module docstring); runs as one actor."""

    def __init__(
        self,
        settings: ControllerSettings,
        switches: Switches,
        schedule: Callable[[float, RegistryEvent], Callable[[], None]],
        fabric_policy: Callable[[Policy], None],
        fabric_jobs: Callable[[tuple[JobSpec, ...]], None] | None = None,
        served_changed: Callable[[], None] | None = None,
    ) -> None:
        """``fabric_jobs`` tells the fabric's owner every new job set (placement keeps a
        job's flows together)."""
        self.settings = settings
        self._switches = switches
        self._schedule = schedule
        self._fabric_policy = fabric_policy
        self._fabric_jobs = fabric_jobs
        self._served_changed = served_changed
        """Mastership: told after every change of ``served`` (a switch's role goes to the
        actor that serves it)."""
        self._served: dict[int, Served] = {}
        self.served: Mapping[int, Served] = MappingProxyType({})
        """Read by other threads: replaced whole on every change, never mutated."""
        self._contests: dict[int, _Contest] = {}
        self._fabric: dict[int, FabricInputs | None] = {}
        self._ports: dict[int, tuple[PortState, ...]] = {}
        self._said = _Said()
        self._probes = 0
        active = settings.active
        self.snapshot = PolicySnapshot(
            active.policy, active.version, settings.jobs, 0, active.plans, active.since
        )
        """Policy and jobs as one value: what every switch plans with, and is told whole."""

    def receive(self, event: RegistryEvent) -> None:
        match event:
            case Claim(conn, ref):
                self._claim(Served(conn, ref))
            case Gone(conn, ref):
                self._gone(conn, ref)
            case ProbeAnswered(conn):
                self._answered(conn)
            case ProbeExpired(dpid, conn):
                self._expired(dpid, conn)
            case PolicyArrived(policy, version):
                self._set_policy(policy, version)
            case JobsArrived(jobs):
                self.settings.jobs = jobs
                self.snapshot = replace(
                    self.snapshot, jobs=jobs, jobs_version=self.snapshot.jobs_version + 1
                )
                LOG.info("jobs: %s", ", ".join(job.name for job in jobs) or "none")
                if self._fabric_jobs is not None:
                    self._fabric_jobs(jobs)
                self._tell_policy()
            case FabricPublished(inputs):
                self._fabric.update(inputs)
                for dpid, view in inputs.items():
                    target = self._served.get(dpid)
                    if target is not None:
                        self._switches.fabric(target.ref, view)
            case QosChanged(ports):
                for dpid, served in self._served.items():
                    if any(port.name in ports for port in self._ports.get(dpid, ())):
                        self._switches.qos_changed(served.ref, ports)
            case PortsKnown(dpid, ports):
                if dpid in self._served:
                    self._ports[dpid] = ports
                    self._warn_policy()
            case Refused(conn, reason):
                self._refuse(conn, reason)

    # ---- connections ------------------------------------------------------------------

    def _publish(self) -> None:
        self.served = MappingProxyType(dict(self._served))
        self.settings.metrics.switches.set(len(self._served))
        if self._served_changed is not None:
            self._served_changed()

    def _claim(self, new: Served) -> None:
        dpid = new.conn.dpid
        old = self._served.get(dpid)
        if old is None:
            self._serve(new)
            return
        previous = self._contests.pop(dpid, None)
        if previous is not None:  # a third claim while one is probed: the newest waits
            previous.cancel()
            self._refuse(previous.new.conn, "a newer connection claimed its datapath id")
            previous.new.ref.stop()
        self._probes = (self._probes + 1) % 0x0FFF_FFFF
        old.conn.send(_barrier(PROBE_XID + self._probes))
        cancel = self._schedule(PROBE_S, ProbeExpired(dpid, old.conn))
        self._contests[dpid] = _Contest(old, new, cancel)

    def _serve(self, served: Served) -> None:
        dpid = served.conn.dpid
        self._served[dpid] = served
        self._publish()
        LOG.info("switch %016x connected from %s", dpid, served.conn.address)
        self._switches.serve(served.ref, dpid, self.snapshot)
        if dpid in self._fabric:
            self._switches.fabric(served.ref, self._fabric[dpid])

    def _answered(self, conn: Conn) -> None:
        """The served connection answered the probe: the newcomer is a twin, refused."""
        contest = self._contests.get(conn.dpid)
        if contest is None or contest.old.conn is not conn:
            return
        del self._contests[conn.dpid]
        contest.cancel()
        reason = f"datapath id {conn.dpid:016x} is served on a live connection from {conn.address}"
        self._refuse(contest.new.conn, reason)
        contest.new.ref.stop()

    def _expired(self, dpid: int, conn: Conn) -> None:
        """The served connection did not answer: the switch restarted, the new one serves."""
        contest = self._contests.get(dpid)
        if contest is None or contest.old.conn is not conn:
            return
        del self._contests[dpid]
        LOG.warning(
            "switch %016x connected again from %s; its connection from %s does not answer,"
            " so the new one takes over",
            dpid,
            contest.new.conn.address,
            conn.address,
        )
        self._retire(contest.old)
        self._serve(contest.new)

    def _retire(self, served: Served) -> None:
        """A connection another took over from: its actor stops, and publishes no goodbye
        (the switch is still served, by the new connection's actor)."""
        self._switches.disconnected(served.ref, gone=False)
        served.conn.close()

    def _gone(self, conn: Conn, ref: SwitchRef) -> None:
        dpid = conn.dpid
        contest = self._contests.get(dpid)
        if contest is not None and contest.new.conn is conn:
            del self._contests[dpid]
            contest.cancel()
        served = self._served.get(dpid)
        if served is None or served.conn is not conn:
            ref.stop()
            return
        del self._served[dpid]
        self._ports.pop(dpid, None)
        self._publish()
        # The switch's own actor says goodbye (report, views, metrics, fabric), after all it
        # published: told here, the goodbye could overtake its last report.
        self._switches.disconnected(ref, gone=True)
        LOG.info("switch %016x disconnected", dpid)
        if contest is not None and contest.old.conn is conn:
            # The probed connection went away before answering: the newcomer serves.
            del self._contests[dpid]
            contest.cancel()
            self._serve(contest.new)

    def _refuse(self, conn: Conn, reason: str) -> None:
        """Hang up on a connection that may not serve its datapath id: logged, counted and
        recorded as a switch-refused event, so an operator sees why a switch is not served."""
        LOG.warning("refused a switch connection from %s: %s", conn.address, reason)
        self.settings.metrics.refused_connections.labels(f"{conn.dpid:016x}").inc()
        for observer in self.settings.observers:
            observer.switch_refused(conn.dpid, conn.address, reason)
        conn.close()

    # ---- policy -----------------------------------------------------------------------

    def _set_policy(self, policy: Policy, version: int | None) -> None:
        active = ActivePolicy(policy, version)
        self.settings.active = active
        self.snapshot = replace(
            self.snapshot,
            policy=policy,
            version=version,
            base_plans=active.plans,
            since=active.since,
        )
        self._warn_unmatched_overrides(policy)
        self._warn_policy()
        self._fabric_policy(policy)
        LOG.info(
            "policy version %s is active; applying to %d switch(es)", version, len(self._served)
        )
        self._tell_policy()

    def _tell_policy(self) -> None:
        for served in self._served.values():
            self._switches.policy(served.ref, self.snapshot)

    def _all_ports(self) -> list[PortState]:
        return [port for ports in self._ports.values() for port in ports]

    def _warn_unmatched_overrides(self, policy: Policy) -> None:
        ports = {port.name for port in self._all_ports()}
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
        ceilings = {
            port.name: port_rate(active.policy, port.name, port.link_bps)[0]
            for port in self._all_ports()
        }
        if self._said.version != active.version:
            self._said = _Said(active.version)
        for warning in map(str, policy_warnings(active.policy, ceilings)):
            if warning not in self._said.warnings:
                self._said.warnings.add(warning)
                LOG.warning("policy version %s: %s", active.version, warning)


def _barrier(xid: int) -> bytes:
    return struct.pack("!BBHI", 4, OFPT_BARRIER_REQUEST, 8, xid)


def probe_reply(data: bytes | memoryview) -> bool:
    """Whether a message is the answer to a registry probe (not a switch actor's)."""
    if len(data) < 8:
        return False
    _version, kind, _length, xid = struct.unpack_from("!BBHI", data)
    return bool(kind == OFPT_BARRIER_REPLY and xid >= PROBE_XID)
