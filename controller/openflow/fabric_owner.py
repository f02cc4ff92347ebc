"""The fabric's one owner: discovery, hosts, ARP, link load and placement, one event at a time.

Everything decided here is decided by the pure core (``controller.fabric``,
``controller.pipeline.fabric``): the owner keeps the inputs — which ports are
up and since when, which LLDP frames arrived when, which hosts spoke where,
what the port and flow counters say, which flows are pinned — builds a new
``Topology`` value when they change, and hands every switch the
``FabricInputs`` it plans from.  It never sends a flow mod; it only sends
packet-outs (LLDP probes, ARP answers and floods).

It is an actor (``receive``): its state is read and written by whatever
thread runs its mailbox, one event at a time, so it needs no lock, and a
policy change can no longer fall between reading the pins and writing them
back.  Time arrives in the events; the owner asks for its next discovery and
placement rounds with ``schedule``.  Outputs go through injected callables:

- ``send_packet(dpid, ports, frame)``: a packet-out (xid 0, straight on the
  connection);
- ``publish(dpids, inputs_by_dpid)``: after any event that changed what a
  switch plans from, the switches whose ``FabricInputs`` changed, and the
  inputs of every known switch;
- observers: ``fabric_events`` (links, hosts, placements, as they happen) and
  ``fabric_changed`` (an immutable ``FabricSnapshot`` for the API, every
  discovery round), plus the fabric metrics;
- ``share(offer)``: with several controllers, the pins and hosts of the switches
  this instance masters, and the switches it is ready to master, for the others
  (``controller.mastership.pins``, ``hosts``; ``FabricOffer``).

With several controllers every instance learns the whole topology itself (slaves
read ports and get packet-ins too: ``controller.switch.slave``), but what it learns
alone is not enough to plan a switch it takes over:

- only the master of a flow's source switch sees its counters, so pins are shared:
  ``FabricShared`` says which switches this instance masters and brings every
  instance's pins.  The owner places the elephants of its own switches, plans every
  switch with every instance's pins, and on taking a switch over adopts the pins its
  previous master published (kept until the flow shows up in this instance's
  counters, then judged by placement as its own): a takeover re-places nothing;
- a host is learned from its packet-ins, and a host whose routes are installed
  sends none: an instance that starts (or restarts) would not know it for as long as
  it stays silent.  So the master of each switch publishes the hosts at it, and every
  instance adds those it does not know (``_shared_hosts``);
- what is shared, and how it is read and offered, is pure: ``controller.fabric.sharing``
  (the owner passes in its topology, what it follows, its pins and its times);
- a new instance takes a share of the switches (a rebalance) only once it is
  *ready* for them: it has followed each for one link timeout (its links and edge
  ports are known) and has read the shared hosts; until then the live owners keep
  them (``controller.mastership.assign``);
- one instance's connection to a switch dropping says nothing about the switch: it
  stays in the fabric, with its links and hosts, while another instance is connected
  to it (``FabricShared.attached``); only when no live lease has listed it for one link
  timeout does it go (one reading is no evidence: right after a Redis failover the
  instances renew one by one);
- packet-outs (LLDP, ARP answers and floods) go only to switches that confirmed this
  instance as master (``MasterConfirmed``, until ``MasterLeft``): a switch refuses a
  slave's, and until it answers the role request it may still hold another master;
- LLDP out of a switch is sent by its master alone, so when that master stops (a
  pause, a kill) every link out of the switch falls silent at once, though none
  failed.  A link is declared down on silence only when its ends are heard
  otherwise (other probes from its source and to its destination arrive); a switch
  silent as a whole is given a second timeout, by which its new master, which
  probes at once when the switch confirms it (``MasterConfirmed``), is heard.
  Port status still takes a link down at once.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Protocol

from controller.classify.records import ObservedFlow
from controller.fabric.model import Host, Link, PortRef, Topology
from controller.fabric.placement import Elephant, Pin, PlacementSettings, place
from controller.fabric.sharing import (
    SharedHosts,
    attached_records,
    build_offer,
    inherited_pins,
    local_pins,
    merge_shared_hosts,
    offer_changed,
    pin_paths,
)
from controller.fabric.snapshot import (
    FabricEvent,
    FabricSnapshot,
    build_snapshot,
    topology_events,
)
from controller.flowid import FlowId
from controller.metrics import ControllerMetrics
from controller.openflow import frames
from controller.openflow.fabric_events import (
    UNSTAMPED,
    DiscoveryTick,
    FabricMessage,
    FabricOffer,
    FabricShared,
    FlowsSeen,
    JobsChanged,
    MasterConfirmed,
    MasterLeft,
    PacketIn,
    PlacementTick,
    PolicyChanged,
    PortRates,
    SwitchGone,
    SwitchPorts,
)
from controller.openflow.fabric_inputs import (
    changed_switches,
    edge_ports,
    next_settle,
    settle_s,
    switch_inputs,
)
from controller.openflow.fabric_placement import (
    PinInfo,
    elephants,
    pinned_views,
    placement_events,
)
from controller.pipeline.desired import FabricInputs
from controller.pipeline.plan import PortState
from controller.policy.jobs import JobSpec
from controller.policy.model import Policy
from controller.qos.plan import port_rate

LOG = logging.getLogger("flowlane.fabric")

ARP_REQUEST = 1
ARP_REPLY = 2

PLACEMENT_OFF_INTERVAL_S = 1.0
"""How often a placement round checks whether placement was turned on."""

STALLED_INTERVALS = 2.5
"""A discovery round this many LLDP intervals after the previous one: the process was
stalled (paused, starved) meanwhile (several controllers: see ``_silent``, ``_ready``)."""

SendPacket = Callable[[int, Sequence[int], bytes], None]
"""(dpid, output ports, frame): a packet-out."""

_lldp_frame = lru_cache(maxsize=1 << 16)(frames.lldp_frame)
"""A port's probe is the same every round: built once (os-ken's encoder takes most of a
round at 100 switches otherwise), bounded so ports that come and go cannot grow it."""
Publish = Callable[[frozenset[int], Mapping[int, FabricInputs]], None]
"""(switches whose inputs changed, the inputs of every known switch)."""
Share = Callable[[FabricOffer], None]
"""What this instance offers the others, when it changed: see ``FabricShared``."""
INHERITED_GRACE_S = 10.0
"""How long a pin taken over with its switch is kept without its flow showing up in this
instance's counters (the first detection polls after a takeover), before it goes."""
Schedule = Callable[[float, FabricMessage], object]
"""(delay in seconds, event): tell the owner ``event`` after the delay (``Ref.tell_after``)."""


class FabricObserver(Protocol):
    """What the owner tells the rest of the controller (``SwitchObserver`` is one)."""

    def fabric_changed(self, snapshot: FabricSnapshot) -> None: ...

    def fabric_events(self, events: list[FabricEvent]) -> None: ...


@dataclass
class _Switch:
    ports: dict[int, PortState]
    up_since: dict[int, float]
    """When each port was last seen coming up: a port is an edge port only once settled."""
    observed: tuple[ObservedFlow, ...] = ()
    tx_bps: Mapping[int, float] | None = None
    attached_since: float = -math.inf
    """When this instance's connection to it last reported its ports."""
    attached: bool = True
    """This instance is connected to it (several controllers: a switch whose connection
    here dropped is kept while another instance is connected to it)."""


class FabricOwner:
    """The only reader and writer of the fabric's state; see the module's docstring."""

    def __init__(
        self,
        policy: Policy,
        *,
        send_packet: SendPacket,
        publish: Publish,
        schedule: Schedule,
        metrics: ControllerMetrics,
        observers: Sequence[FabricObserver] = (),
        controller_id: str | None = None,
        wall: Callable[[], float] = time.time,
        clock: Callable[[], float] | None = None,
        jobs: Sequence[JobSpec] = (),
        share: Share | None = None,
    ) -> None:
        """``observers`` is kept by reference (the settings' list: observers added later are
        told too).  ``wall`` gives Unix time for what the owner shows (a pin's ``since``, a
        snapshot's ``updated``); no decision reads it.

        ``clock`` (monotonic) stamps events told without a time (``UNSTAMPED``), as the
        switch actors do; the owner's own ticks are then told unstamped, so a late timer's
        round is dated when it runs.  Without it every event must carry its time, and a
        tick carries the time it is due (tests).

        ``jobs``: the registered jobs at start; ``JobsChanged`` brings every change.

        ``share``: several controllers (see the module's docstring); None: the only one."""
        self._policy = policy
        self._jobs = _job_endpoints(jobs)
        self._pin_job: dict[FlowId, str] = {}
        """The job of each pinned flow that is in one (for the API's view of a job)."""
        self._grouped: frozenset[str] = frozenset()
        """The jobs whose flows were among the last round's candidates."""
        self._regroup = False
        """A job registered or ended, or a link failed: place every job's flows again."""
        self._send_packet = send_packet
        self._publish_inputs_to = publish
        self._schedule = schedule
        self._metrics = metrics
        self._observers = observers
        self.controller_id = controller_id or f"{socket.gethostname()}:{os.getpid()}"
        self._wall = wall
        self._clock = clock
        self._now = -math.inf
        """The latest time any event carried: time never runs backwards in here, even when a
        timer event (due time) is handled after a packet-in stamped a little later."""
        self._topology = Topology()
        self._switches: dict[int, _Switch] = {}
        self._link_seen: dict[Link, float] = {}
        self._pins: dict[FlowId, Pin] = {}
        """The pins this instance placed (of the switches it masters, with several)."""
        self._share = share
        self._mastered: frozenset[int] | None = None
        """Switches this instance masters (None: the only controller, or not told yet)."""
        self._shared: dict[int, dict[FlowId, Pin]] = {}
        """Every instance's published pins by source switch, on this owner's clock."""
        self._inherited: dict[FlowId, tuple[Pin, float]] = {}
        """Pins taken over with their source switch, not yet seen here, and since when."""
        self._offered: FabricOffer | None = None
        self._several = share is not None
        self._shared_read = False
        """A ``FabricShared`` arrived: the hosts the other instances know are adopted."""
        self._unlisted_since: dict[int, float] = {}
        """Switches disconnected here and listed in no live lease, since when (see
        ``_fabric_shared``: forgetting one needs that absence to last)."""
        self._confirmed: set[int] = set()
        """Switches that confirmed this instance as their master (several controllers): the
        only ones its packet-outs go to, since a switch refuses a slave's (and an equal's
        would be a second copy of the master's probe or flood)."""
        self._heard_from: dict[int, float] = {}
        """When an LLDP probe sent out of each switch last arrived (its master sends)."""
        self._heard_at: dict[int, float] = {}
        """When an LLDP probe last arrived at each switch (its connection here answers)."""
        self._offered_topology: Topology | None = None
        self._last_tick = -math.inf
        self._awake_since = -math.inf
        """Since when this owner runs its rounds again after a stall (a ``SIGSTOP``): what
        it heard before is old news, what it did not hear meanwhile is no news."""
        self._pin_info: dict[FlowId, PinInfo] = {}
        self._published: dict[int, FabricInputs] = {}
        """What each switch was last handed, so only a change is published."""
        self._dirty = False
        """Topology, ports, pins or policy changed since the inputs were last computed."""
        self._settle_due = math.inf
        """When the next port settles (becomes an edge port) by time alone."""

    # ---- the actor ----------------------------------------------------------------------

    def start(self, now: float = UNSTAMPED) -> None:
        """Ask for the first discovery and placement rounds (once, from any thread, before
        or after the owner is spawned: it only calls ``schedule``).  ``now``: the time they
        carry, needed when the owner has no clock."""
        if math.isnan(now) and self._clock is None:
            raise ValueError("start needs a time when the owner has no clock")
        self._schedule(0.0, DiscoveryTick(now))
        self._schedule(0.0, PlacementTick(now))

    def receive(self, event: FabricMessage) -> None:
        if not isinstance(event, PolicyChanged):
            now = event.now
            if math.isnan(now):
                if self._clock is None:
                    raise ValueError(f"{type(event).__name__} without a time, and no clock")
                now = self._clock()
            self._now = max(self._now, now)
        if isinstance(event, SwitchPorts):
            self._switch_ports(event.dpid, event.ports)
        elif isinstance(event, SwitchGone):
            self._switch_gone(event.dpid)
        elif isinstance(event, FlowsSeen):
            self._flows_seen(event.dpid, event.flows)
        elif isinstance(event, PortRates):
            self._port_rates(event.dpid, event.tx_bps)
        elif isinstance(event, PolicyChanged):
            self._policy_changed(event.policy)
        elif isinstance(event, JobsChanged):
            self._jobs_changed(event.jobs)
        elif isinstance(event, PacketIn):
            self._packet_in(event.dpid, event.in_port, event.data)
        elif isinstance(event, DiscoveryTick):
            self._discovery_tick()
        elif isinstance(event, FabricShared):
            self._fabric_shared(event)
        elif isinstance(event, MasterConfirmed):
            self._master_confirmed(event.dpid)
        elif isinstance(event, MasterLeft):
            self._confirmed.discard(event.dpid)
        else:
            self._placement_tick()
        if self._regroup and self.enabled and not isinstance(event, PlacementTick):
            self._place(self._now)  # at once: a job's flows need not wait for the next round
        if self._offered_topology is not self._topology:
            self._offer()  # hosts learned or gone at a switch this instance masters
        self._publish_inputs()

    @property
    def enabled(self) -> bool:
        return self._policy.forwarding.fabric

    # ---- what switches report -----------------------------------------------------------

    def _switch_ports(self, dpid: int, ports: Sequence[PortState]) -> None:
        """Adopt the switch's ports; drop what went down; probe what came up at once."""
        now = self._now
        switch = self._switches.setdefault(dpid, _Switch({}, {}, attached_since=now))
        if not switch.attached:
            switch.attached, switch.attached_since = True, now  # connected here again
        topology = self._topology.with_switch(dpid)
        current = {port.number: port for port in ports}
        for number, old in list(switch.ports.items()):
            new = current.get(number)
            if new is None or (old.up and not new.up):
                topology = topology.without_port(PortRef(dpid, number))
                switch.up_since.pop(number, None)
                self._forget_lldp(PortRef(dpid, number))
        newly_up: list[PortState] = []
        for number, port in current.items():
            if port.up and number not in switch.up_since:
                switch.up_since[number] = now
                newly_up.append(port)
            if not port.up:
                switch.up_since.pop(number, None)
                topology = topology.without_port(PortRef(dpid, number))
        switch.ports = current
        self._dirty = True  # ports settle from here: edge ports may change with no topology
        self._adopt(topology.with_capacities(self._capacities()), f"ports of {dpid:016x}")
        for port in newly_up:
            self._probe(dpid, port)  # find the link now, not at the next round

    def _switch_gone(self, dpid: int) -> None:
        """Alone: the switch is gone.  With several controllers: only this instance's
        connection is; the switch goes once no live instance has listed it for a while
        (``_fabric_shared``)."""
        self._confirmed.discard(dpid)
        switch = self._switches.get(dpid)
        if self._several and switch is not None:
            switch.attached = False
            self._published.pop(dpid, None)
            self._dirty = True
            LOG.info(
                "fabric: switch %016x disconnected from this instance; kept while another"
                " instance is connected to it",
                dpid,
            )
            return
        self._forget_switch(dpid)

    def _forget_switch(self, dpid: int) -> None:
        self._switches.pop(dpid, None)
        self._heard_from.pop(dpid, None)
        self._heard_at.pop(dpid, None)
        self._published.pop(dpid, None)
        self._link_seen = {
            link: seen
            for link, seen in self._link_seen.items()
            if dpid not in (link.src.dpid, link.dst.dpid)
        }
        self._dirty = True
        self._adopt(self._topology.without_switch(dpid), f"switch {dpid:016x} gone")

    def _flows_seen(self, dpid: int, flows: tuple[ObservedFlow, ...]) -> None:
        switch = self._switches.get(dpid)
        if switch is not None:
            switch.observed = flows

    def _port_rates(self, dpid: int, tx_bps: Mapping[int, float]) -> None:
        switch = self._switches.get(dpid)
        if switch is None:
            return
        switch.tx_bps = tx_bps
        fabric = self._topology.fabric_ports(dpid)
        metrics, tag = self._metrics, f"{dpid:016x}"
        for number, rate in tx_bps.items():
            if number in fabric:
                port = switch.ports[number].name if number in switch.ports else str(number)
                metrics.link_tx_bits.labels(tag, port).set(rate)
                capacity = self._topology.capacity(PortRef(dpid, number))
                if capacity > 0:
                    metrics.link_utilization.labels(tag, port).set(rate / capacity)

    def _policy_changed(self, policy: Policy) -> None:
        """Port capacities follow the policy's rates; with placement (or the fabric) off, the
        pins go here and now, where placement makes them: no round can bring them back."""
        self._policy = policy
        self._topology = self._topology.with_capacities(self._capacities())
        if not policy.forwarding.fabric or policy.forwarding.placement is None:
            self._clear_pins()
        if not policy.forwarding.fabric:
            self._published.clear()  # switches plan without the fabric; all anew when it is on
        self._dirty = True

    def _jobs_changed(self, jobs: Sequence[JobSpec]) -> None:
        """A job registered, ended or changed its endpoints: its flows (and every other job's,
        which share the links) are placed again.  A renewal changes nothing."""
        endpoints = _job_endpoints(jobs)
        if endpoints != self._jobs:
            self._jobs = endpoints
            self._regroup = True

    # ---- packet-ins ---------------------------------------------------------------------

    def _packet_in(self, dpid: int, in_port: int, data: bytes) -> None:
        if not self.enabled:
            return
        metrics = self._metrics
        seen = frames.parse_lldp(data)
        if seen is not None:
            metrics.packet_ins.labels("lldp").inc()
            self._lldp(PortRef(seen[0], seen[1]), PortRef(dpid, in_port))
            return
        arp = frames.parse_arp(data)
        if arp is not None:
            metrics.packet_ins.labels("arp").inc()
            self._arp(dpid, in_port, arp, data)
            return
        summary = frames.parse_ethernet(data)
        if summary is None:
            return
        metrics.packet_ins.labels("unknown").inc()
        if not summary.eth_src & (1 << 40):  # not a multicast source (invalid anyway)
            self._learn(dpid, in_port, summary.eth_src, summary.ipv4_src)

    def _lldp(self, src: PortRef, dst: PortRef) -> None:
        link = Link(src, dst)
        self._link_seen[link] = self._now
        self._heard_from[src.dpid] = self._now
        self._heard_at[dst.dpid] = self._now
        # Even from a switch not (yet) connected: the receiving port faces a switch, so it
        # must stop being an edge port; the link carries traffic once both ends are known.
        self._adopt(self._topology.with_link(link), f"link {src} -> {dst}")

    def _learn(self, dpid: int, port: int, mac: int, ipv4: int | None) -> bool:
        """Learn a host at an edge port; False when the port is not one (yet)."""
        if port not in self._edge_ports(dpid, self._now):
            return False
        known = self._topology.host(mac)
        if ipv4 is None or ipv4 == 0:
            ipv4 = known.ipv4 if known is not None else None
        host = Host(mac, PortRef(dpid, port), ipv4)
        if known != host:
            self._adopt(self._topology.with_host(host), f"host {frames.mac_text(mac)}")
        return True

    def _arp(self, dpid: int, in_port: int, arp: frames.ArpPacket, data: bytes) -> None:
        """Answer from the host table, or hand the packet to edge ports only: ARP never
        floods the fabric, so no loop can multiply it."""
        if not self._learn(dpid, in_port, arp.sha, arp.spa or None):
            return  # not from an edge port: a frame we sent, looping back, or too early
        topology = self._topology
        if arp.op == ARP_REQUEST:
            target = topology.host_by_ip(arp.tpa)
            if target is not None and target.mac != arp.sha:
                self._send(dpid, [in_port], frames.arp_reply(arp, target.mac))
                return
            if arp.tpa == arp.spa:
                return  # gratuitous: learned, nobody to tell
        elif arp.op == ARP_REPLY:
            target = topology.host(arp.tha)
            if target is not None:
                self._send(target.at.dpid, [target.at.port], data)
                return
        self._flood_edges(data, PortRef(dpid, in_port))

    def _flood_edges(self, data: bytes, origin: PortRef) -> None:
        for dpid in self._attached():
            ports = sorted(
                p for p in self._edge_ports(dpid, self._now) if PortRef(dpid, p) != origin
            )
            if ports:
                self._send(dpid, ports, data)

    # ---- the topology -------------------------------------------------------------------

    def _adopt(self, after: Topology, reason: str) -> None:
        """Make ``after`` current; if it changed, tell observers (switches hear at the end of
        the event, from ``_publish_inputs``)."""
        before = self._topology
        if after == before:
            return
        self._topology = after
        self._dirty = True
        if self._pins and before.usable_links - after.usable_links:
            self._regroup = True  # a link failed: jobs over it are placed again, together
        LOG.debug("fabric changed: %s", reason)
        events = topology_events(before, after)
        for event in events:
            LOG.info("fabric: %s %s", event.kind, event.data)
        self._emit(events)
        self._metrics.fabric_links.set(len(after.usable_links) // 2)
        self._metrics.fabric_hosts.set(len(after.hosts))

    def _forget_lldp(self, port: PortRef) -> None:
        """A port went down: its links are gone now, not when their LLDP times out."""
        self._link_seen = {
            link: seen for link, seen in self._link_seen.items() if port not in (link.src, link.dst)
        }

    def _edge_ports(self, dpid: int, now: float) -> frozenset[int]:
        """Up, settled for 1.5 LLDP intervals, and facing no switch."""
        switch = self._switches.get(dpid)
        if switch is None:
            return frozenset()
        return edge_ports(switch.up_since, self._topology.fabric_ports(dpid), now, self._settle_s())

    def _settle_s(self) -> float:
        return settle_s(self._policy.forwarding.discovery.lldp_interval)

    def _capacities(self) -> dict[PortRef, int]:
        capacities = {}
        for dpid, switch in self._switches.items():
            for number, port in switch.ports.items():
                capacities[PortRef(dpid, number)] = port_rate(
                    self._policy, port.name, port.link_bps
                )[0]
        return capacities

    # ---- what switches plan from ----------------------------------------------------------

    def _publish_inputs(self) -> None:
        """Hand the switches whose inputs changed their new ``FabricInputs`` (one publish for
        a port settling, however many events come before the next round)."""
        if not self.enabled or (not self._dirty and self._now < self._settle_due):
            return
        now, settle = self._now, self._settle_s()
        up_since = {
            dpid: switch.up_since for dpid, switch in self._switches.items() if switch.attached
        }
        inputs = switch_inputs(self._topology, up_since, self.pins(), now, settle)
        changed = changed_switches(self._published, inputs)
        self._published = inputs
        self._dirty = False
        self._settle_due = next_settle(up_since.values(), now, settle)
        if changed:
            self._publish_inputs_to(changed, MappingProxyType(dict(inputs)))

    # ---- discovery ------------------------------------------------------------------------

    def _send(self, dpid: int, ports: Sequence[int], frame: bytes) -> None:
        """A packet-out, where the switch takes it from this instance: alone, every switch
        (each connection is its only controller); with several, only a switch that
        confirmed this instance as master (not one merely assigned: until the switch
        answers the role request, it may still hold another master and refuse ours)."""
        if not self._several or dpid in self._confirmed:
            self._send_packet(dpid, ports, frame)

    def _probe(self, dpid: int, port: PortState) -> None:
        self._send(dpid, [port.number], _lldp_frame(dpid, port.number, port.hw_addr))

    def _discovery_tick(self) -> None:
        """Next round first (a failing round must not end discovery), then this one."""
        discovery = self._policy.forwarding.discovery
        self._schedule(discovery.lldp_interval, DiscoveryTick(self._due(discovery.lldp_interval)))
        last, self._last_tick = self._last_tick, self._now
        stalled = self._now - last > STALLED_INTERVALS * discovery.lldp_interval
        if self._several and stalled and last > -math.inf:
            LOG.warning(
                "fabric: no discovery round for %.1f s (this process was paused or starved):"
                " links are judged, and switches taken, once probes had time to arrive again",
                self._now - last,
            )
            self._awake_since = self._now
        if not self.enabled:
            return
        probes = [
            (dpid, port)
            for dpid, switch in self._switches.items()
            if switch.attached
            for port in switch.ports.values()
            if port.up
        ]
        expired = [
            link
            for link, seen in self._link_seen.items()
            if self._silent(link, seen, discovery.link_timeout)
        ]
        for link in expired:
            del self._link_seen[link]
        # Only links still in use are news: a port-status event removed the others already.
        stale = [link for link in expired if link in self._topology.links]
        for dpid, port in probes:
            self._probe(dpid, port)
        if stale:
            LOG.warning(
                "fabric: no LLDP for %.1f s on %s: link down",
                discovery.link_timeout,
                ", ".join(f"{link.src}->{link.dst}" for link in stale),
            )
            self._adopt(self._topology.without_links(stale), "LLDP timeout")
        # Every round, changed or not (building one costs milliseconds at 100 switches, too
        # much for every LLDP frame of a fabric coming up): the API's view is at most one
        # round old, and ``updated`` tells it the controller is alive.
        self._publish_snapshot()
        self._offer()  # switches become ready with time

    def _silent(self, link: Link, seen: float, timeout: float) -> bool:
        """Whether ``link`` is down for want of LLDP (see the module's docstring).

        Alone, this instance sends every probe: silence past ``timeout`` is down.  With
        several controllers, only the source's master sends, and only a connection to the
        destination hears: a link into a switch not connected here is never judged here
        (the other end's port status, or the switch gone everywhere, takes it down); a
        link whose source or destination is silent as a whole is given a second timeout
        (its source's master stopped: the next one probes when confirmed)."""
        now = self._now
        if now - seen <= timeout:
            return False
        if not self._several:
            return True
        dst = self._switches.get(link.dst.dpid)
        if dst is None or not dst.attached:
            return False
        since = max(seen, dst.attached_since, self._awake_since)
        if now - since <= timeout:
            return False  # connected here again since: its probes had no time to arrive
        heard = min(
            self._heard_from.get(link.src.dpid, -math.inf),
            self._heard_at.get(link.dst.dpid, -math.inf),
        )
        return now - heard <= timeout or now - since > 2 * timeout

    def _master_confirmed(self, dpid: int) -> None:
        """Probe every up port of a switch this instance just became master of: the links
        out of it are silent since its previous master stopped."""
        self._confirmed.add(dpid)  # even before its ports are known: they are probed then
        switch = self._switches.get(dpid)
        if not self.enabled or switch is None or not switch.attached:
            return
        for port in switch.ports.values():
            if port.up:
                self._probe(dpid, port)

    def _attached(self) -> list[int]:
        """The switches this instance is connected to."""
        return [dpid for dpid, switch in self._switches.items() if switch.attached]

    def _due(self, delay_s: float) -> float:
        """The time a tick told ``delay_s`` from now carries (see ``clock``)."""
        return UNSTAMPED if self._clock is not None else self._now + delay_s

    # ---- placement ------------------------------------------------------------------------

    def _placement_tick(self) -> None:
        now = self._now
        spec = self._policy.forwarding.placement
        interval = spec.interval if spec is not None else PLACEMENT_OFF_INTERVAL_S
        self._schedule(interval, PlacementTick(self._due(interval)))
        if self.enabled:
            self._place(now)

    def elephants(self) -> list[tuple[Elephant, str]]:
        """This round's candidates (on the owner's thread: tests, ``_place``)."""
        observed = {dpid: switch.observed for dpid, switch in self._switches.items()}
        return elephants(self._policy, self._topology, observed, self._placing(), self._jobs)

    def _place(self, now: float) -> None:
        asked, self._regroup = self._regroup, False
        policy = self._policy
        spec = policy.forwarding.placement
        if spec is None:
            self._clear_pins()
            return
        candidates = self.elephants()
        seen = {e.flow for e, _ in candidates}
        # Pins taken over are placement's own once their flows show up; until then kept.
        placing = {flow: pin for flow, pin in self._placing().items() if flow in seen}
        placing.update(self._own())
        grouped = frozenset(e.job for e, _ in candidates if e.job is not None)
        # Jobs whose flows appear (a job registered: its flows are named a poll later) or
        # vanish are news as much as the registration itself.
        regroup = asked or grouped != self._grouped
        self._grouped = grouped
        old_pins, pinned_info = placing, self._pin_info
        result = place(
            self._topology,
            [elephant for elephant, _ in candidates],
            old_pins,
            self._link_loads(),
            now,
            PlacementSettings(
                hold_s=spec.hold,
                min_rate_bps=spec.min_rate.bps,
                release_after_s=policy.detection.release_after if policy.detection else math.inf,
            ),
            regroup=regroup,
        )
        info = {e.flow: (cls, e.rate_bps, e.demand_bps) for e, cls in candidates}
        self._pins = dict(result.pins)
        waiting = {
            flow: (pin, at)
            for flow, (pin, at) in self._inherited.items()
            if flow not in seen and now - at < INHERITED_GRACE_S and self._masters(pin)
        }
        if waiting.keys() != self._inherited.keys():
            self._dirty = True  # adopted (same path: nothing changes) or gone
        self._inherited = waiting
        self._offer()
        self._pin_info = {flow: info[flow] for flow in self._pins if flow in info}
        self._pin_job = {
            e.flow: e.job for e, _ in candidates if e.job is not None and e.flow in self._pins
        }
        self._metrics.pinned_flows.set(len(result.pins))
        if not (result.moves or result.released):
            return
        self._dirty = True
        for move in result.moves:
            if move.old is None:
                self._metrics.placements.labels(move.reason).inc()
            else:
                self._metrics.reroutes.labels(move.reason).inc()
        self._emit(
            placement_events(
                result, old_pins, info, pinned_info, self._port_names(), now, self._wall_at
            )
        )

    def _clear_pins(self) -> None:
        """Placement (or the fabric) is off: every pin goes, silently, as its entries do."""
        self._inherited = {}
        if not self._pins:
            return
        self._pins, self._pin_info, self._pin_job = {}, {}, {}
        self._metrics.pinned_flows.set(0)
        self._dirty = True

    def _link_loads(self) -> dict[Link, float]:
        loads: dict[Link, float] = {}
        for link in self._topology.usable_links:
            switch = self._switches.get(link.src.dpid)
            if switch is not None and switch.tx_bps is not None:
                loads[link] = switch.tx_bps.get(link.src.port, 0.0)
        return loads

    # ---- pins shared between controllers ------------------------------------------------

    def pins(self) -> Mapping[FlowId, Pin]:
        """The pins every switch plans with: this instance's, and (with several
        controllers) those of the switches others master and those taken over."""
        if self._mastered is None and not self._inherited:
            return self._pins
        pins: dict[FlowId, Pin] = {}
        for source, shared in self._shared.items():
            if self._mastered is not None and source not in self._mastered:
                pins.update(shared)
        pins.update({flow: pin for flow, (pin, _) in self._inherited.items()})
        pins.update(self._own())
        return pins

    def _masters(self, pin: Pin) -> bool:
        """Whether this instance masters the pin's source switch (always, alone)."""
        return self._mastered is None or (bool(pin.path) and pin.path[0][0] in self._mastered)

    def _own(self) -> dict[FlowId, Pin]:
        """This instance's pins of the switches it still masters."""
        return {flow: pin for flow, pin in self._pins.items() if self._masters(pin)}

    def _placing(self) -> dict[FlowId, Pin]:
        """The pins placement starts from: its own, and those taken over with a switch."""
        pins = {flow: pin for flow, (pin, _) in self._inherited.items() if self._masters(pin)}
        pins.update(self._own())
        return pins

    def _fabric_shared(self, event: FabricShared) -> None:
        self._shared_read = True
        self._forget_unlisted(event.attached)
        if self.enabled:
            # Only the records of switches some instance is connected to count.
            self._shared_hosts(attached_records(event.hosts, event.attached))
        self._pins_shared(event)  # and offers what this instance now masters

    def _forget_unlisted(self, attached: frozenset[int] | None) -> None:
        """Forget a switch disconnected here once no live lease has listed it for one link
        timeout.  One reading is no evidence: right after a Redis failover every lease has
        run out and the instances renew on the new primary one by one, so a reading may
        list only some of them; forgetting a switch forgets its hosts, and the routes to
        them go from every switch this instance masters."""
        detached = {dpid for dpid, switch in self._switches.items() if not switch.attached}
        unlisted = detached - attached if attached is not None else set()
        now, patience = self._now, self._policy.forwarding.discovery.link_timeout
        self._unlisted_since = {d: self._unlisted_since.get(d, now) for d in sorted(unlisted)}
        for dpid, since in list(self._unlisted_since.items()):
            if now - since >= patience:
                LOG.info("fabric: switch %016x is connected to no instance: gone", dpid)
                del self._unlisted_since[dpid]
                self._forget_switch(dpid)

    def _shared_hosts(self, shared: SharedHosts) -> None:
        """Adopt the hosts the masters of the switches published (``merge_shared_hosts``:
        this instance's own view stands at the switches it follows)."""
        followed = {
            dpid: frozenset(number for number, port in switch.ports.items() if port.up)
            for dpid, switch in self._switches.items()
            if switch.attached
        }
        topology = merge_shared_hosts(self._topology, followed, shared)
        self._adopt(topology, "hosts published by the other instances")

    def _pins_shared(self, event: FabricShared) -> None:
        now = self._now
        shared = local_pins(event.pins, now, self._wall())
        before = self._mastered
        taken = event.mastered - (before or frozenset())
        inherited = inherited_pins(shared, taken, self._pins)
        self._inherited.update({flow: (pin, now) for flow, pin in inherited.items()})
        self._mastered = event.mastered
        if pin_paths(shared) != pin_paths(self._shared) or taken or before != event.mastered:
            self._dirty = True
        self._shared = shared
        self._offer()

    def _offer(self) -> None:
        """Publish (through ``share``) what the others need of this instance, when it
        changed: the pins of every switch it masters (its own and those taken over; none:
        the switch's record is emptied), the hosts at them, and the switches it is ready
        to master."""
        if self._share is None or self._mastered is None:
            return
        self._offered_topology = self._topology
        offer = build_offer(
            self._topology, self._mastered, self._placing(), self._ready(), self._wall_at
        )
        if not offer_changed(self._offered, offer):
            return
        self._offered = offer
        self._share(offer)

    def _ready(self) -> frozenset[int]:
        """The switches this instance could master without losing anything: connected here
        for one link timeout (its links were probed for as long as a link lives, its ports
        settled), the others' hosts read.  Without the fabric there is nothing to know."""
        attached = [dpid for dpid, switch in self._switches.items() if switch.attached]
        if not self.enabled:
            return frozenset(attached)
        if not self._shared_read:
            return frozenset()
        discovery = self._policy.forwarding.discovery
        warm = max(discovery.link_timeout, self._settle_s())
        awake = self._awake_since
        return frozenset(
            dpid
            for dpid in attached
            if self._now - max(self._switches[dpid].attached_since, awake) >= warm
        )

    # ---- what observers see ---------------------------------------------------------------

    def _wall_at(self, at: float) -> float:
        """Unix time of ``at``, a time the events carried: pins are timed on the monotonic
        clock (a hold time must not jump with NTP), views and events carry wall time."""
        return self._wall() - (self._now - at)

    def _port_names(self) -> dict[PortRef, str]:
        return {
            PortRef(dpid, number): port.name
            for dpid, switch in self._switches.items()
            for number, port in switch.ports.items()
        }

    def _publish_snapshot(self) -> None:
        names = self._port_names()
        snapshot = build_snapshot(
            self.controller_id,
            self._wall(),
            self._topology,
            names,
            self._link_loads(),
            pinned_views(self.pins(), self._pin_info, names, self._wall_at, self._pin_job),
        )
        for observer in self._observers:
            try:
                observer.fabric_changed(snapshot)
            except Exception:
                LOG.exception("observer %r failed on the fabric snapshot", observer)

    def _emit(self, events: list[FabricEvent]) -> None:
        if not events:
            return
        for observer in self._observers:
            try:
                observer.fabric_events(events)
            except Exception:
                LOG.exception("observer %r failed on fabric events", observer)


def _job_endpoints(jobs: Sequence[JobSpec]) -> dict[str, tuple[str, ...]]:
    """What of the jobs placement depends on: their names and endpoints (a renewal, a new
    TTL or weight, is no reason to move flows)."""
    return {
        job.name: tuple(sorted(endpoint.model_dump_json() for endpoint in job.endpoints))
        for job in jobs
    }
