"""Fabric forwarding's shell: discovery, hosts, ARP, link load and placement rounds.

Everything decided here is decided by the pure core (``controller.fabric``,
``controller.pipeline.fabric``): this module keeps the inputs — which ports
are up, which LLDP frames arrived when, which hosts spoke where, what the
port counters and flow counters say — builds a new ``Topology`` value when
they change, and asks the switch workers to sync.  It never sends a flow
mod itself; it only sends packet-outs (LLDP probes, ARP answers).
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from controller.classify.records import ObservedFlow
from controller.fabric.demand import FlowDemandInput, estimate_demands
from controller.fabric.model import Host, Link, Path, PortRef, Topology
from controller.fabric.paths import pinned_paths
from controller.fabric.placement import Elephant, Pin, PlacementSettings, place
from controller.fabric.snapshot import (
    FabricEvent,
    FabricSnapshot,
    PinnedView,
    build_snapshot,
    path_view,
    pinned_view,
    placement_event,
    reroute_event,
    topology_events,
)
from controller.flowid import ETH_TYPE_IPV4, IP_PROTO_TCP, FlowId
from controller.openflow import frames
from controller.openflow.observer import PortState
from controller.openflow.settings import ControllerSettings
from controller.pipeline.desired import FabricInputs
from controller.qos.plan import port_rate

LOG = logging.getLogger("flowlane.fabric")

ACK_STREAM_BYTES = 200
"""Average packet size below which a flow is an ACK stream: data fills packets (~1500 B)."""

ARP_REQUEST = 1
ARP_REPLY = 2

SendPacket = Callable[[int, Sequence[int], bytes], None]
"""(dpid, output ports, frame): a packet-out."""
RequestSync = Callable[[Iterable[int] | None, str], None]
"""(dpids or None for all, reason): ask switch workers to sync."""


@dataclass
class _Switch:
    ports: dict[int, PortState]
    up_since: dict[int, float]
    """When each port was last seen coming up: a port is an edge port only once settled."""
    observed: tuple[ObservedFlow, ...] = ()
    tx_bps: dict[int, float] | None = None
    edge: frozenset[int] = frozenset()
    """Edge ports as last planned, so a port settling triggers one sync."""


class FabricShell:
    def __init__(
        self,
        settings: ControllerSettings,
        send_packet: SendPacket,
        request_sync: RequestSync,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self._send_packet = send_packet
        self._request_sync = request_sync
        self._clock = clock
        self._lock = threading.RLock()
        self._topology = Topology()
        self._switches: dict[int, _Switch] = {}
        self._link_seen: dict[Link, float] = {}
        self._pins: dict[FlowId, Pin] = {}
        self._pin_info: dict[FlowId, tuple[str, float, float]] = {}
        """(class, rate, demand) of each pinned flow, for the snapshot."""
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self.controller_id = f"{socket.gethostname()}:{os.getpid()}"

    # ---- life cycle ---------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        return self.settings.active.policy.forwarding.fabric

    def start(self) -> None:
        for target, name in ((self._discovery_loop, "lldp"), (self._placement_loop, "placement")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout_s: float = 2.0) -> None:
        self._stopping.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    @property
    def topology(self) -> Topology:
        with self._lock:
            return self._topology

    # ---- what workers ask ------------------------------------------------------------

    def inputs(self, dpid: int) -> FabricInputs:
        with self._lock:
            switch = self._switches.get(dpid)
            edge = self._edge_ports(dpid, self._clock()) if switch else frozenset()
            if switch is not None:
                switch.edge = edge
            return FabricInputs(self._topology, edge, self._pinned_paths())

    def _pinned_paths(self) -> dict[FlowId, Path]:
        return pinned_paths(self._topology, {flow: pin.path for flow, pin in self._pins.items()})

    def switch_ports(self, dpid: int, ports: Sequence[PortState]) -> None:
        """The worker read (or updated) the switch's ports: adopt them, drop what went down."""
        now = self._clock()
        with self._lock:
            switch = self._switches.setdefault(dpid, _Switch({}, {}))
            before = self._topology
            topology = before.with_switch(dpid)
            current = {port.number: port for port in ports}
            for number, old in list(switch.ports.items()):
                new = current.get(number)
                if new is None or (old.up and not new.up):
                    topology = topology.without_port(PortRef(dpid, number))
                    switch.up_since.pop(number, None)
                    self._forget_lldp(PortRef(dpid, number))
            for number, port in current.items():
                if port.up and number not in switch.up_since:
                    switch.up_since[number] = now
                if not port.up:
                    switch.up_since.pop(number, None)
                    topology = topology.without_port(PortRef(dpid, number))
            switch.ports = current
            topology = topology.with_capacities(self._capacities(topology))
            newly_up = [
                port
                for number, port in current.items()
                if port.up and switch.up_since[number] == now
            ]
        self._adopt(before, topology, "ports of " + f"{dpid:016x}")
        for port in newly_up:
            self._probe(dpid, port)  # find the link now, not at the next round

    def switch_gone(self, dpid: int) -> None:
        with self._lock:
            before = self._topology
            self._switches.pop(dpid, None)
            self._link_seen = {
                link: seen
                for link, seen in self._link_seen.items()
                if dpid not in (link.src.dpid, link.dst.dpid)
            }
            after = before.without_switch(dpid)
        self._adopt(before, after, f"switch {dpid:016x} gone")

    def flows_seen(self, dpid: int, flows: Sequence[ObservedFlow]) -> None:
        with self._lock:
            switch = self._switches.get(dpid)
            if switch is not None:
                switch.observed = tuple(flows)

    def port_rates(self, dpid: int, tx_bps: dict[int, float]) -> None:
        with self._lock:
            switch = self._switches.get(dpid)
            if switch is None:
                return
            switch.tx_bps = dict(tx_bps)
            fabric = self._topology.fabric_ports(dpid)
            names = {n: p.name for n, p in switch.ports.items()}
            capacity = {n: self._topology.capacity(PortRef(dpid, n)) for n in tx_bps}
        metrics, tag = self.settings.metrics, f"{dpid:016x}"
        for number, rate in tx_bps.items():
            if number in fabric:
                port = names.get(number, str(number))
                metrics.link_tx_bits.labels(tag, port).set(rate)
                if capacity[number] > 0:
                    metrics.link_utilization.labels(tag, port).set(rate / capacity[number])

    def policy_changed(self) -> None:
        """Port capacities follow the policy's rates; pins of classes no longer placed go."""
        with self._lock:
            before = self._topology
            after = before.with_capacities(self._capacities(before))
            if not self.settings.active.policy.forwarding.fabric:
                self._pins.clear()
            self._topology = after

    # ---- packet-ins (os-ken's event thread) -------------------------------------------

    def packet_in(self, dpid: int, in_port: int, data: bytes) -> None:
        metrics = self.settings.metrics
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
        with self._lock:
            self._link_seen[link] = self._clock()
            # Even from a switch not (yet) connected: the receiving port faces a switch, so it
            # must stop being an edge port; the link carries traffic once both ends are known.
            before = self._topology
            after = before.with_link(link)
        self._adopt(before, after, f"link {src} -> {dst}")

    def _learn(self, dpid: int, port: int, mac: int, ipv4: int | None) -> bool:
        """Learn a host at an edge port; False when the port is not one (yet)."""
        with self._lock:
            if port not in self._edge_ports(dpid, self._clock()):
                return False
            before = self._topology
            known = before.host(mac)
            if ipv4 is None or ipv4 == 0:
                ipv4 = known.ipv4 if known is not None else None
            host = Host(mac, PortRef(dpid, port), ipv4)
            if known == host:
                return True
            after = before.with_host(host)
        self._adopt(before, after, f"host {frames.mac_text(mac)}")
        return True

    def _arp(self, dpid: int, in_port: int, arp: frames.ArpPacket, data: bytes) -> None:
        """Answer from the host table, or hand the packet to edge ports only: ARP never
        floods the fabric, so no loop can multiply it."""
        if not self._learn(dpid, in_port, arp.sha, arp.spa or None):
            return  # not from an edge port: a frame we sent, looping back, or too early
        topology = self.topology
        if arp.op == ARP_REQUEST:
            target = topology.host_by_ip(arp.tpa)
            if target is not None and target.mac != arp.sha:
                self._send_packet(dpid, [in_port], frames.arp_reply(arp, target.mac))
                return
            if arp.tpa == arp.spa:
                return  # gratuitous: learned, nobody to tell
        elif arp.op == ARP_REPLY:
            target = topology.host(arp.tha)
            if target is not None:
                self._send_packet(target.at.dpid, [target.at.port], data)
                return
        self._flood_edges(data, PortRef(dpid, in_port))

    def _flood_edges(self, data: bytes, origin: PortRef) -> None:
        with self._lock:
            now = self._clock()
            targets = {
                dpid: sorted(p for p in self._edge_ports(dpid, now) if PortRef(dpid, p) != origin)
                for dpid in self._switches
            }
        for dpid, ports in targets.items():
            if ports:
                self._send_packet(dpid, ports, data)

    # ---- topology changes ---------------------------------------------------------------

    def _adopt(self, before: Topology, after: Topology, reason: str) -> None:
        """Make ``after`` current; if it changed, tell observers and re-plan every switch."""
        with self._lock:
            if self._topology is not before:
                # Someone adopted a newer value meanwhile: apply the change to it.
                after = self._merge(self._topology, before, after)
            if after == self._topology:
                return
            self._topology = after
        events = topology_events(before, after)
        for event in events:
            LOG.info("fabric: %s %s", event.kind, event.data)
        self._emit(events)
        self._metrics()
        self._request_sync(None, reason)

    @staticmethod
    def _merge(current: Topology, before: Topology, after: Topology) -> Topology:
        merged = current
        for link in before.links - after.links:
            merged = merged.without_links([link])
        for link in after.links - before.links:
            merged = merged.with_link(link)
        for switch in after.switches - before.switches:
            merged = merged.with_switch(switch)
        for switch in before.switches - after.switches:
            merged = merged.without_switch(switch)
        for host in set(after.hosts) - set(before.hosts):
            merged = merged.with_host(host)
        for host in set(before.hosts) - set(after.hosts):
            if merged.host(host.mac) == host and after.host(host.mac) is None:
                merged = merged.without_host(host.mac)
        return merged.with_capacities(after.capacity_bps)

    def _forget_lldp(self, port: PortRef) -> None:
        """A port went down: its links are gone now, not when their LLDP times out."""
        self._link_seen = {
            link: seen for link, seen in self._link_seen.items() if port not in (link.src, link.dst)
        }

    def _edge_ports(self, dpid: int, now: float) -> frozenset[int]:
        """Up, settled for two LLDP rounds, and facing no switch."""
        switch = self._switches.get(dpid)
        if switch is None:
            return frozenset()
        settle = 1.5 * self.settings.active.policy.forwarding.discovery.lldp_interval
        fabric = self._topology.fabric_ports(dpid)
        return frozenset(
            number
            for number, since in switch.up_since.items()
            if now - since >= settle and number not in fabric
        )

    def _capacities(self, topology: Topology) -> dict[PortRef, int]:
        policy = self.settings.active.policy
        capacities = {}
        for dpid, switch in self._switches.items():
            for number, port in switch.ports.items():
                capacities[PortRef(dpid, number)] = port_rate(policy, port.name, port.link_bps)[0]
        return capacities

    def _metrics(self) -> None:
        topology = self.topology
        metrics = self.settings.metrics
        metrics.fabric_links.set(len(topology.usable_links) // 2)
        metrics.fabric_hosts.set(len(topology.hosts))

    def _emit(self, events: list[FabricEvent]) -> None:
        if not events:
            return
        for observer in self.settings.observers:
            try:
                observer.fabric_events(events)
            except Exception:
                LOG.exception("observer %r failed on fabric events", observer)

    # ---- discovery loop ------------------------------------------------------------------

    def _probe(self, dpid: int, port: PortState) -> None:
        self._send_packet(dpid, [port.number], frames.lldp_frame(dpid, port.number, port.hw_addr))

    def _discovery_loop(self) -> None:
        while not self._stopping.is_set():
            discovery = self.settings.active.policy.forwarding.discovery
            if self.enabled:
                try:
                    self._discovery_round(discovery.link_timeout)
                except Exception:
                    LOG.exception("fabric discovery round failed")
            self._stopping.wait(discovery.lldp_interval)

    def _discovery_round(self, link_timeout: float) -> None:
        now = self._clock()
        with self._lock:
            probes = [
                (dpid, port)
                for dpid, switch in self._switches.items()
                for port in switch.ports.values()
                if port.up
            ]
            expired = [link for link, seen in self._link_seen.items() if now - seen > link_timeout]
            for link in expired:
                del self._link_seen[link]
            # Only links still in use are news: a port-status event removed the others already.
            stale = [link for link in expired if link in self._topology.links]
            before = self._topology
            after = before.without_links(stale)
            settled = [
                dpid
                for dpid, switch in self._switches.items()
                if self._edge_ports(dpid, now) != switch.edge
            ]
        for dpid, port in probes:
            self._probe(dpid, port)
        if stale:
            LOG.warning(
                "fabric: no LLDP for %.1f s on %s: link down",
                link_timeout,
                ", ".join(f"{link.src}->{link.dst}" for link in stale),
            )
            self._adopt(before, after, "LLDP timeout")
        if settled:
            self._request_sync(settled, "edge ports settled")
        self._publish()

    # ---- placement --------------------------------------------------------------------

    def _placement_loop(self) -> None:
        while not self._stopping.is_set():
            placement = self.settings.active.policy.forwarding.placement
            interval = placement.interval if placement is not None else 1.0
            if self.enabled:
                try:
                    self._place()
                except Exception:
                    LOG.exception("placement round failed")
            self._stopping.wait(interval)

    def elephants(self) -> list[tuple[Elephant, str]]:
        """Flows of the placement classes that are big enough, seen at their source switch."""
        policy = self.settings.active.policy
        spec = policy.forwarding.placement
        classes = policy.forwarding.placement_classes(policy.detection)
        if spec is None or not classes:
            return []
        with self._lock:
            topology = self._topology
            observed = {dpid: switch.observed for dpid, switch in self._switches.items()}
            pinned = set(self._pins)
        found: dict[FlowId, tuple[ObservedFlow, int, int]] = {}
        for dpid, flows in observed.items():
            for flow in flows:
                if flow.traffic_class not in classes or flow.flow.eth_type != ETH_TYPE_IPV4:
                    continue
                # A pinned flow stays a candidate at any rate: OVS refreshes counters in
                # steps, so one poll can read no growth, and unpinning on it would move the
                # flow back to the hash and back again.  Placement releases it once it has
                # been quiet for release_after (it ended, though its entry may linger).
                if flow.flow not in pinned and flow.rate_bps < spec.min_rate.bps:
                    continue
                if flow.packets and flow.bytes < ACK_STREAM_BYTES * flow.packets:
                    continue  # small packets: a TCP connection's ACKs, not its data
                src, dst = topology.host_by_ip(flow.flow.src), topology.host_by_ip(flow.flow.dst)
                if src is None or dst is None or src.at.dpid != dpid or dst.at.dpid == dpid:
                    continue
                found[flow.flow] = (flow, src.at.dpid, dst.at.dpid)
        # A TCP flow's ACKs are a flow too, in the same class by a bidirectional rule: they
        # follow their data flow's path backwards, and are never placed on their own.
        found = {
            flow: entry
            for flow, entry in found.items()
            if flow.reversed() not in found
            or found[flow.reversed()][0].rate_bps < entry[0].rate_bps
            or (found[flow.reversed()][0].rate_bps == entry[0].rate_bps and flow < flow.reversed())
        }
        hosts = {host.ipv4: host for host in topology.hosts if host.ipv4 is not None}

        def nic(address: int) -> float:
            host = hosts.get(address)
            return float(topology.capacity(host.at)) if host else float("inf")

        demands = estimate_demands(
            [
                FlowDemandInput(
                    flow.flow,
                    flow.flow.src,
                    flow.flow.dst,
                    flow.flow.ip_proto == IP_PROTO_TCP,
                    flow.rate_bps,
                )
                for flow, _, _ in found.values()
            ],
            nic,
        )
        return [
            (
                Elephant(flow.flow, src, dst, demands.get(flow.flow, flow.rate_bps), flow.rate_bps),
                flow.traffic_class,
            )
            for flow, src, dst in found.values()
        ]

    def _place(self) -> None:
        policy = self.settings.active.policy
        spec = policy.forwarding.placement
        candidates = self.elephants()
        with self._lock:
            topology, pins = self._topology, dict(self._pins)
            pinned_info = dict(self._pin_info)
            loads = self._link_loads(topology)
        if spec is None:
            if pins:
                with self._lock:
                    self._pins.clear()
                self._request_sync(None, "placement off")
            return
        now = self._clock()
        result = place(
            topology,
            [elephant for elephant, _ in candidates],
            pins,
            loads,
            now,
            PlacementSettings(
                hold_s=spec.hold,
                min_rate_bps=spec.min_rate.bps,
                release_after_s=policy.detection.release_after if policy.detection else math.inf,
            ),
        )
        info = {e.flow: (cls, e.rate_bps, e.demand_bps) for e, cls in candidates}
        with self._lock:
            self._pins = dict(result.pins)
            self._pin_info = {flow: info[flow] for flow in self._pins if flow in info}
        changed = bool(result.moves or result.released)
        metrics = self.settings.metrics
        metrics.pinned_flows.set(len(result.pins))
        if not changed:
            return
        names = self._port_names()
        events: list[FabricEvent] = []
        for move in result.moves:
            cls, rate, demand = info.get(move.flow, ("", 0.0, 0.0))
            view = pinned_view(
                move.flow,
                traffic_class=cls,
                rate_bps=rate,
                demand_bps=demand,
                since=self._wall(now),
                path=move.new,
                port_names=names,
            )
            if move.old is None:
                metrics.placements.labels(move.reason).inc()
                events.append(placement_event("pinned", view, move.reason))
            else:
                metrics.reroutes.labels(move.reason).inc()
                events.append(reroute_event(view, path_view(move.old, names), move.reason))
            LOG.info("fabric: %s %s on %s (%s)", move.reason, move.flow, move.new, move.reason)
        for flow in result.released:
            old = pins.get(flow)
            if old is None:
                continue
            # A flow that stopped being an elephant is not among the candidates: its event
            # carries what it was pinned with (class, last rate), not blanks.
            cls, rate, demand = info.get(flow) or pinned_info.get(flow, ("", 0.0, 0.0))
            view = pinned_view(
                flow,
                traffic_class=cls,
                rate_bps=rate,
                demand_bps=demand,
                since=self._wall(old.since),
                path=old.path,
                port_names=names,
            )
            why = result.reasons[flow]  # gone, ended, or no second path left to choose from
            events.append(placement_event("released", view, why))
            LOG.info("fabric: released %s from %s (%s)", flow, old.path, why)
        self._request_sync(None, "placement")
        self._emit(events)

    def _wall(self, at: float) -> float:
        """Unix time of ``at``, a reading of ``self._clock``: pins are timed on the monotonic
        clock (a hold time must not jump with NTP), views and events carry wall time."""
        return time.time() - (self._clock() - at)

    def _link_loads(self, topology: Topology) -> dict[Link, float]:
        loads: dict[Link, float] = {}
        for link in topology.usable_links:
            switch = self._switches.get(link.src.dpid)
            if switch is not None and switch.tx_bps is not None:
                loads[link] = switch.tx_bps.get(link.src.port, 0.0)
        return loads

    def _port_names(self) -> dict[PortRef, str]:
        with self._lock:
            return {
                PortRef(dpid, number): port.name
                for dpid, switch in self._switches.items()
                for number, port in switch.ports.items()
            }

    def link_tx(self) -> dict[Link, float]:
        with self._lock:
            return self._link_loads(self._topology)

    def pinned(self) -> list[PinnedView]:
        names = self._port_names()
        with self._lock:
            pins, info = dict(self._pins), dict(self._pin_info)
        return [
            pinned_view(
                flow,
                traffic_class=info.get(flow, ("", 0.0, 0.0))[0],
                rate_bps=info.get(flow, ("", 0.0, 0.0))[1],
                demand_bps=info.get(flow, ("", 0.0, 0.0))[2],
                since=self._wall(pin.since),
                path=pin.path,
                port_names=names,
            )
            for flow, pin in sorted(pins.items())
        ]

    def snapshot(self) -> FabricSnapshot:
        return build_snapshot(
            self.controller_id,
            time.time(),
            self.topology,
            self._port_names(),
            self.link_tx(),
            self.pinned(),
        )

    def _publish(self) -> None:
        snapshot = self.snapshot()
        for observer in self.settings.observers:
            try:
                observer.fabric_changed(snapshot)
            except Exception:
                LOG.exception("observer %r failed on the fabric snapshot", observer)
