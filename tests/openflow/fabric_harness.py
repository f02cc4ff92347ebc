"""A ``FabricOwner`` with nothing around it: what it sends and publishes is recorded.

Time only moves when a test says so (``clock.now``); every event is handed to
``receive`` on the test's own thread, as the owner's mailbox would; the
ticks it schedules are recorded, not delivered.

The fabric of most tests: two leaves (11, 12) under one spine (1).  Leaf
port 1 faces the spine; spine port ``i`` faces leaf ``10 + i``; leaf ports 5
and 6 face hosts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from os_ken.lib.packet import arp, ether_types, ethernet, packet
from prometheus_client import CollectorRegistry

from controller.classify.records import ObservedFlow
from controller.fabric.model import Link, PortRef, Topology
from controller.fabric.snapshot import PLACEMENT, REROUTE, FabricEvent, FabricSnapshot, PinnedView
from controller.flowid import FlowId
from controller.metrics import ControllerMetrics
from controller.openflow import frames
from controller.openflow.fabric_events import (
    DiscoveryTick,
    FabricMessage,
    FlowsSeen,
    PacketIn,
    PlacementTick,
    PolicyChanged,
    PortRates,
    SwitchGone,
    SwitchPorts,
)
from controller.openflow.fabric_owner import FabricObserver, FabricOwner, Share
from controller.openflow.fabric_placement import pinned_views
from controller.pipeline.desired import FabricInputs
from controller.pipeline.plan import PortState
from controller.policy.load import parse_policy
from controller.policy.model import Policy

SPINE = 1
SPINE_2 = 2
LEAF_A, LEAF_B = 11, 12
UPLINK = 1
HOST_PORTS = (5, 6)
LLDP_INTERVAL = 1.0
LINK_TIMEOUT = 3.5
SETTLE = 1.5 * LLDP_INTERVAL
EPOCH = 1_700_000_000.0
"""Unix time when the monotonic clock read 0: the fake wall clock is ``EPOCH + now``."""

MAC_A, IP_A = 0x0A0000000001, 0x0A000001  # 10.0.0.1, on leaf 11 port 5
MAC_B, IP_B = 0x0A0000000002, 0x0A000002  # 10.0.0.2, on leaf 12 port 5
IP_UNKNOWN = 0x0A000063  # 10.0.0.99
BROADCAST = 0xFFFFFFFFFFFF

POLICY = {
    "classes": {
        "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
        "training": {"priority": 1, "dscp": 26, "min_rate": "70%"},
    },
    "default_class": "inference",
    "detection": {"elephant": {"bytes": "10MiB", "class": "training"}},
    "forwarding": {
        "mode": "fabric",
        "discovery": {"lldp_interval": f"{LLDP_INTERVAL}s", "link_timeout": f"{LINK_TIMEOUT}s"},
    },
}


def policy(**changes: Any) -> Policy:
    return parse_policy({**POLICY, **changes}, source="test")


@dataclass
class Clock:
    now: float = 1000.0


@dataclass
class Recorder:
    """What the owner sent, published, scheduled and told observers, in order."""

    packets: list[tuple[int, list[int], bytes]] = field(default_factory=list)
    publishes: list[frozenset[int]] = field(default_factory=list)
    latest: dict[int, FabricInputs] = field(default_factory=dict)
    """What each switch was last handed: what it plans from."""
    everyone: Mapping[int, FabricInputs] = field(default_factory=dict)
    """The inputs of every known switch, as of the last publish."""
    scheduled: list[tuple[float, FabricMessage]] = field(default_factory=list)
    snapshots: list[FabricSnapshot] = field(default_factory=list)
    events: list[FabricEvent] = field(default_factory=list)

    def send_packet(self, dpid: int, ports: Sequence[int], data: bytes) -> None:
        self.packets.append((dpid, list(ports), data))

    def publish(self, dpids: frozenset[int], inputs: Mapping[int, FabricInputs]) -> None:
        assert dpids, "a publish names the switches it is for"
        assert dpids <= inputs.keys()
        self.publishes.append(dpids)
        self.latest.update({dpid: inputs[dpid] for dpid in dpids})
        self.everyone = inputs

    def schedule(self, delay_s: float, event: FabricMessage) -> None:
        self.scheduled.append((delay_s, event))

    # observers

    def fabric_changed(self, snapshot: FabricSnapshot) -> None:
        self.snapshots.append(snapshot)

    def fabric_events(self, events: list[FabricEvent]) -> None:
        self.events.extend(events)

    def clear(self) -> None:
        self.packets.clear()
        self.publishes.clear()
        self.scheduled.clear()
        self.snapshots.clear()
        self.events.clear()


@dataclass
class Fabric:
    """The owner, its clock and what it did; one method per event kind."""

    owner: FabricOwner
    clock: Clock
    sent: Recorder
    metrics: ControllerMetrics
    observers: list[FabricObserver]
    """The list the owner was given (it keeps it, not a copy)."""

    def tell(self, event: FabricMessage) -> None:
        self.owner.receive(event)

    def ports(self, dpid: int, ports: Sequence[PortState]) -> None:
        self.tell(SwitchPorts(dpid, tuple(ports), self.clock.now))

    def gone(self, dpid: int) -> None:
        self.tell(SwitchGone(dpid, self.clock.now))

    def packet_in(self, dpid: int, in_port: int, data: bytes) -> None:
        self.tell(PacketIn(dpid, in_port, data, self.clock.now))

    def flows(self, dpid: int, flows: Sequence[ObservedFlow]) -> None:
        self.tell(FlowsSeen(dpid, tuple(flows), self.clock.now))

    def rates(self, dpid: int, tx_bps: Mapping[int, float]) -> None:
        self.tell(PortRates(dpid, tx_bps, self.clock.now))

    def set_policy(self, new: Policy) -> None:
        self.tell(PolicyChanged(new))

    def discover(self) -> None:
        """A discovery round now."""
        self.tell(DiscoveryTick(self.clock.now))

    def place(self) -> None:
        """A placement round now."""
        self.tell(PlacementTick(self.clock.now))

    # what the world sees

    def inputs(self, dpid: int) -> FabricInputs:
        return self.sent.latest[dpid]

    @property
    def topology(self) -> Topology:
        """The topology of the last publish (every switch's inputs share it)."""
        topologies = [inputs.topology for inputs in self.sent.everyone.values()]
        if not topologies:
            return Topology()
        assert all(topology is topologies[0] for topology in topologies)
        topology = topologies[0]
        return topology

    @property
    def snapshot(self) -> FabricSnapshot:
        return self.sent.snapshots[-1]

    def pinned(self) -> list[PinnedView]:
        """The pins as the next snapshot will show them (read on the owner's thread: this
        one; snapshots go out once per discovery round)."""
        owner = self.owner
        return pinned_views(
            owner._pins, owner._pin_info, owner._port_names(), owner._wall_at, owner._pin_job
        )

    def placement_events(self) -> list[FabricEvent]:
        return [event for event in self.sent.events if event.kind in (PLACEMENT, REROUTE)]


def new_fabric(
    start: Policy | None = None,
    *,
    now: float = 1000.0,
    share: Share | None = None,
    wall_origin: float = 0.0,
) -> Fabric:
    """An owner with no switch yet, its monotonic clock at ``now``; its wall clock reads
    ``EPOCH`` at monotonic ``wall_origin`` (several instances, each with its own monotonic
    clock, agree on the wall when each passes its own ``now``).  ``share``: where it sends
    what it offers the other instances (``FabricShared`` tests)."""
    clock, sent = Clock(now), Recorder()
    metrics = ControllerMetrics(registry=CollectorRegistry())
    observers: list[FabricObserver] = [sent]
    owner = FabricOwner(
        start or policy(),
        send_packet=sent.send_packet,
        publish=sent.publish,
        schedule=sent.schedule,
        metrics=metrics,
        observers=observers,
        controller_id="test",
        wall=lambda: EPOCH + (clock.now - wall_origin),
        share=share,
    )
    assert owner.enabled
    return Fabric(owner, clock, sent, metrics, observers)


def hw(dpid: int, number: int) -> int:
    return 0x020000000000 | (dpid << 16) | number


def port(dpid: int, number: int, up: bool = True) -> PortState:
    return PortState(number, f"s{dpid}-eth{number}", 1_000_000_000, up, hw(dpid, number))


def leaf_ports(dpid: int, up: bool = True, **states: bool) -> list[PortState]:
    """The leaf's uplink and host ports; ``p5=False`` takes one down."""
    return [port(dpid, number, states.get(f"p{number}", up)) for number in (UPLINK, *HOST_PORTS)]


def spine_ports() -> list[PortState]:
    return [port(SPINE, LEAF_A - 10), port(SPINE, LEAF_B - 10)]


def ip_text(address: int) -> str:
    return ".".join(str((address >> shift) & 0xFF) for shift in (24, 16, 8, 0))


def arp_frame(
    op: int, sha: int, spa: int, tpa: int, tha: int = 0, eth_dst: int = BROADCAST
) -> bytes:
    frame = packet.Packet()
    frame.add_protocol(
        ethernet.ethernet(
            dst=frames.mac_text(eth_dst),
            src=frames.mac_text(sha),
            ethertype=ether_types.ETH_TYPE_ARP,
        )
    )
    frame.add_protocol(
        arp.arp(
            opcode=op,
            src_mac=frames.mac_text(sha),
            src_ip=ip_text(spa),
            dst_mac=frames.mac_text(tha),
            dst_ip=ip_text(tpa),
        )
    )
    frame.serialize()
    return bytes(frame.data)


def lldp_frame(src: PortRef) -> bytes:
    """The probe the owner sends out of ``src``."""
    return frames.lldp_frame(src.dpid, src.port, hw(src.dpid, src.port))


def lldp(fabric: Fabric, src: PortRef, dst: PortRef) -> None:
    """The probe ``src`` sent arrives at ``dst``."""
    fabric.packet_in(dst.dpid, dst.port, lldp_frame(src))


def cable(fabric: Fabric, a: PortRef, b: PortRef) -> None:
    lldp(fabric, a, b)
    lldp(fabric, b, a)


def uplink(leaf: int) -> tuple[PortRef, PortRef]:
    return PortRef(leaf, UPLINK), PortRef(SPINE, leaf - 10)


def link(a: PortRef, b: PortRef) -> Link:
    return Link(a, b)


def wire(fabric: Fabric) -> Fabric:
    """All three switches up and cabled, host ports settled (a discovery round saw them),
    nothing recorded yet."""
    for dpid, ports in (
        (SPINE, spine_ports()),
        *((leaf, leaf_ports(leaf)) for leaf in (LEAF_A, LEAF_B)),
    ):
        fabric.ports(dpid, ports)
    for leaf in (LEAF_A, LEAF_B):
        cable(fabric, *uplink(leaf))
    fabric.clock.now += SETTLE
    fabric.discover()
    fabric.sent.clear()
    return fabric


def with_hosts(fabric: Fabric) -> Fabric:
    """Hosts A and B announce themselves (gratuitous ARP)."""
    fabric.packet_in(LEAF_A, 5, arp_frame(frames.ARP_REQUEST, MAC_A, IP_A, IP_A))
    fabric.packet_in(LEAF_B, 5, arp_frame(frames.ARP_REQUEST, MAC_B, IP_B, IP_B))
    fabric.sent.clear()
    return fabric


def spines(fabric: Fabric, count: int) -> Fabric:
    """Leaves 11 and 12 under spines 1 to ``count`` (leaf port ``s`` faces spine ``s``):
    ``count`` paths; hosts A and B known."""
    numbers = range(1, count + 1)
    for spine in numbers:
        fabric.ports(spine, [port(spine, LEAF_A - 10), port(spine, LEAF_B - 10)])
    for leaf in (LEAF_A, LEAF_B):
        fabric.ports(leaf, [port(leaf, n) for n in (*numbers, *HOST_PORTS)])
        for spine in numbers:
            cable(fabric, PortRef(leaf, spine), PortRef(spine, leaf - 10))
    fabric.clock.now += SETTLE
    return with_hosts(fabric)


def two_spines(fabric: Fabric) -> Fabric:
    """Spines ``SPINE`` and ``SPINE_2`` (1 and 2): two paths."""
    return spines(fabric, 2)


def observed(flow: FlowId, rate_bps: float, traffic_class: str = "training") -> ObservedFlow:
    return ObservedFlow(flow, traffic_class, "rule:iperf", 1_000_000, rate_bps, 0.0, 0.0)


DATA = FlowId(0x0800, 6, IP_A, IP_B, 40000, 5201)
"""An iperf3 data flow from A to B."""
