"""Fabric discovery, host learning and proxy ARP of ``FabricShell``, with no switch at all.

Packet-outs and sync requests are recorded instead of sent, the clock only
moves when a test says so, and the shell's threads are never started: each
test calls what a switch worker or os-ken's event thread would call.

The fabric: two leaves (11, 12) under one spine (1).  Leaf port 1 faces the
spine; spine port ``i`` faces leaf ``10 + i``; leaf ports 5 and 6 face hosts.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from os_ken.lib.packet import arp, ether_types, ethernet, packet
from prometheus_client import CollectorRegistry

from controller.classify.detector import Detector
from controller.classify.reclassify import observed_flows
from controller.classify.records import ObservedFlow
from controller.fabric.model import Host, Link, PortRef
from controller.fabric.placement import Pin
from controller.fabric.snapshot import describe_event
from controller.flowid import FlowId
from controller.metrics import ControllerMetrics
from controller.openflow import frames
from controller.openflow.fabric import FabricShell
from controller.openflow.observer import PortState
from controller.openflow.settings import ActivePolicy, ControllerSettings
from controller.policy.load import parse_policy
from tests.classify.conftest import FakeTable

SPINE = 1
LEAF_A, LEAF_B = 11, 12
UPLINK = 1
HOST_PORTS = (5, 6)
LLDP_INTERVAL = 1.0
LINK_TIMEOUT = 3.5
SETTLE = 1.5 * LLDP_INTERVAL

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


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Recorder:
    """What the shell sent (packet-outs) and asked for (syncs), in order."""

    packets: list[tuple[int, list[int], bytes]] = field(default_factory=list)
    syncs: list[tuple[list[int] | None, str]] = field(default_factory=list)

    def send_packet(self, dpid: int, ports: Sequence[int], data: bytes) -> None:
        self.packets.append((dpid, list(ports), data))

    def request_sync(self, dpids: Iterable[int] | None, reason: str) -> None:
        self.syncs.append((None if dpids is None else sorted(dpids), reason))

    def clear(self) -> None:
        self.packets.clear()
        self.syncs.clear()


@dataclass
class Fabric:
    shell: FabricShell
    clock: Clock
    sent: Recorder


def hw(dpid: int, number: int) -> int:
    return 0x020000000000 | (dpid << 16) | number


def port(dpid: int, number: int, up: bool = True) -> PortState:
    return PortState(number, f"s{dpid}-eth{number}", 1_000_000_000, up, hw(dpid, number))


def leaf_ports(dpid: int, up: bool = True, **states: bool) -> list[PortState]:
    """The leaf's uplink and host ports; ``p5=False`` takes one down."""
    return [port(dpid, number, states.get(f"p{number}", up)) for number in (UPLINK, *HOST_PORTS)]


def spine_ports() -> list[PortState]:
    return [port(SPINE, LEAF_A - 10), port(SPINE, LEAF_B - 10)]


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


def ip_text(address: int) -> str:
    return ".".join(str((address >> shift) & 0xFF) for shift in (24, 16, 8, 0))


def lldp(shell: FabricShell, src: PortRef, dst: PortRef) -> None:
    """The probe ``src`` sent arrives at ``dst``."""
    shell.packet_in(
        dst.dpid, dst.port, frames.lldp_frame(src.dpid, src.port, hw(src.dpid, src.port))
    )


def cable(shell: FabricShell, a: PortRef, b: PortRef) -> None:
    lldp(shell, a, b)
    lldp(shell, b, a)


def uplink(leaf: int) -> tuple[PortRef, PortRef]:
    return PortRef(leaf, UPLINK), PortRef(SPINE, leaf - 10)


def link(a: PortRef, b: PortRef) -> Link:
    return Link(a, b)


@pytest.fixture
def fabric() -> Fabric:
    """Shell with no switch yet, at time 1000."""
    settings = ControllerSettings(
        ActivePolicy(parse_policy(POLICY, source="test")),
        metrics=ControllerMetrics(registry=CollectorRegistry()),
    )
    clock, sent = Clock(), Recorder()
    shell = FabricShell(settings, sent.send_packet, sent.request_sync, clock=clock)
    assert shell.enabled
    return Fabric(shell, clock, sent)


@pytest.fixture
def wired(fabric: Fabric) -> Fabric:
    """All three switches up and cabled, host ports settled, nothing recorded yet."""
    shell = fabric.shell
    shell.switch_ports(SPINE, spine_ports())
    for leaf in (LEAF_A, LEAF_B):
        shell.switch_ports(leaf, leaf_ports(leaf))
    for leaf in (LEAF_A, LEAF_B):
        cable(shell, *uplink(leaf))
    fabric.clock.now += SETTLE
    fabric.sent.clear()
    return fabric


def with_hosts(fabric: Fabric) -> Fabric:
    """Hosts A and B announce themselves (gratuitous ARP)."""
    fabric.shell.packet_in(LEAF_A, 5, arp_frame(frames.ARP_REQUEST, MAC_A, IP_A, IP_A))
    fabric.shell.packet_in(LEAF_B, 5, arp_frame(frames.ARP_REQUEST, MAC_B, IP_B, IP_B))
    fabric.sent.clear()
    return fabric


# --------------------------------------------------------------------------------------------
# Links
# --------------------------------------------------------------------------------------------


def test_a_newly_up_port_is_probed_at_once(fabric: Fabric) -> None:
    fabric.shell.switch_ports(LEAF_A, leaf_ports(LEAF_A, p6=False))
    probes = {(dpid, tuple(ports)): data for dpid, ports, data in fabric.sent.packets}
    assert set(probes) == {(LEAF_A, (UPLINK,)), (LEAF_A, (5,))}  # port 6 is down
    assert frames.parse_lldp(probes[LEAF_A, (UPLINK,)]) == (LEAF_A, UPLINK)
    assert probes[LEAF_A, (UPLINK,)] == frames.lldp_frame(LEAF_A, UPLINK, hw(LEAF_A, UPLINK))

    fabric.sent.clear()
    fabric.clock.now += 0.1
    fabric.shell.switch_ports(LEAF_A, leaf_ports(LEAF_A))  # port 6 comes up; the rest stay up
    assert [(dpid, ports) for dpid, ports, _ in fabric.sent.packets] == [(LEAF_A, [6])]


def test_lldp_both_ways_makes_a_usable_link_and_syncs_every_switch(fabric: Fabric) -> None:
    shell = fabric.shell
    shell.switch_ports(SPINE, spine_ports())
    shell.switch_ports(LEAF_A, leaf_ports(LEAF_A))
    fabric.sent.clear()
    leaf_end, spine_end = uplink(LEAF_A)

    lldp(shell, leaf_end, spine_end)
    assert shell.topology.links == {link(leaf_end, spine_end)}
    assert shell.topology.usable_links == frozenset()

    fabric.sent.syncs.clear()
    lldp(shell, spine_end, leaf_end)
    assert shell.topology.usable_links == {link(leaf_end, spine_end), link(spine_end, leaf_end)}
    assert [dpids for dpids, _ in fabric.sent.syncs] == [None]
    assert fabric.sent.packets == []  # discovery answers nothing
    assert shell.settings.metrics.registry.get_sample_value("flowlane_fabric_links") == 1

    fabric.sent.syncs.clear()
    lldp(shell, spine_end, leaf_end)  # seen again: nothing changed, nothing to sync
    assert fabric.sent.syncs == []


def test_lldp_from_an_unknown_switch_makes_a_fabric_port_but_no_usable_link(
    fabric: Fabric,
) -> None:
    fabric.shell.switch_ports(LEAF_A, leaf_ports(LEAF_A))
    fabric.sent.clear()
    lldp(fabric.shell, PortRef(99, 1), PortRef(LEAF_A, UPLINK))
    topology = fabric.shell.topology
    assert topology.usable_links == frozenset()
    assert UPLINK in topology.fabric_ports(LEAF_A)
    fabric.clock.now += 100.0
    assert UPLINK not in fabric.shell.inputs(LEAF_A).edge_ports


def test_an_lldp_silent_link_times_out_in_the_discovery_round(wired: Fabric) -> None:
    shell, clock = wired.shell, wired.clock
    a_leaf, a_spine = uplink(LEAF_A)
    b_leaf, b_spine = uplink(LEAF_B)
    assert len(shell.topology.usable_links) == 4

    clock.now += LINK_TIMEOUT - SETTLE  # LINK_TIMEOUT after the LLDP: not yet "longer than"
    shell._discovery_round(LINK_TIMEOUT)
    assert len(shell.topology.usable_links) == 4
    # The round probes every up port of every switch.
    probed = sorted((dpid, ports[0]) for dpid, ports, _ in wired.sent.packets)
    assert probed == sorted(
        [(SPINE, 1), (SPINE, 2)] + [(leaf, n) for leaf in (LEAF_A, LEAF_B) for n in (1, 5, 6)]
    )

    cable(shell, b_leaf, b_spine)  # leaf B's link keeps answering, leaf A's went silent
    lldp(shell, a_leaf, a_spine)  # and one direction of A's still arrives
    wired.sent.clear()
    clock.now += 0.5
    shell._discovery_round(LINK_TIMEOUT)
    assert shell.topology.links == {
        link(a_leaf, a_spine),
        link(b_leaf, b_spine),
        link(b_spine, b_leaf),
    }
    assert shell.topology.usable_links == {link(b_leaf, b_spine), link(b_spine, b_leaf)}
    assert (None, "LLDP timeout") in wired.sent.syncs

    clock.now += LINK_TIMEOUT + 0.1
    shell._discovery_round(LINK_TIMEOUT)
    assert shell.topology.links == frozenset()


def test_a_port_going_down_takes_its_links_and_hosts_with_it(wired: Fabric) -> None:
    shell = with_hosts(wired).shell
    assert {host.mac for host in shell.topology.hosts} == {MAC_A, MAC_B}

    shell.switch_ports(LEAF_A, leaf_ports(LEAF_A, p1=False, p5=False))
    topology = shell.topology
    assert all(PortRef(LEAF_A, UPLINK) not in (seen.src, seen.dst) for seen in topology.links)
    assert topology.usable_links == {link(*uplink(LEAF_B)), link(*uplink(LEAF_B)).reversed()}
    assert [host.mac for host in topology.hosts] == [MAC_B]
    assert (None, f"ports of {LEAF_A:016x}") in wired.sent.syncs
    assert wired.sent.packets == []  # nothing came up: no probe

    # A port that vanished from the switch counts as down too.
    shell.switch_ports(LEAF_B, [port(LEAF_B, UPLINK), port(LEAF_B, 6)])
    assert shell.topology.hosts == ()


def test_a_port_coming_back_must_settle_again(wired: Fabric) -> None:
    shell, clock = wired.shell, wired.clock
    shell.switch_ports(LEAF_A, leaf_ports(LEAF_A, p5=False))
    clock.now += 0.1
    shell.switch_ports(LEAF_A, leaf_ports(LEAF_A))
    assert 5 not in shell.inputs(LEAF_A).edge_ports
    clock.now += SETTLE
    assert 5 in shell.inputs(LEAF_A).edge_ports


# --------------------------------------------------------------------------------------------
# Hosts
# --------------------------------------------------------------------------------------------


def test_a_host_is_learned_only_once_its_port_has_settled(fabric: Fabric) -> None:
    shell, clock = fabric.shell, fabric.clock
    up = clock.now
    shell.switch_ports(LEAF_A, leaf_ports(LEAF_A))
    fabric.sent.clear()
    announce = arp_frame(frames.ARP_REQUEST, MAC_A, IP_A, IP_A)

    clock.now = up + SETTLE - 0.01
    shell.packet_in(LEAF_A, 5, announce)
    assert not shell.topology.hosts
    assert fabric.sent.packets == [] and fabric.sent.syncs == []

    clock.now = up + SETTLE
    shell.packet_in(LEAF_A, 5, announce)
    assert shell.topology.hosts == (Host(MAC_A, PortRef(LEAF_A, 5), IP_A),)
    assert [dpids for dpids, _ in fabric.sent.syncs] == [None]
    assert fabric.sent.packets == []  # gratuitous ARP: nobody to tell


def test_a_port_with_a_link_is_never_an_edge_port(wired: Fabric) -> None:
    shell, clock = wired.shell, wired.clock
    clock.now += 100
    assert shell.inputs(LEAF_A).edge_ports == {5, 6}
    assert shell.inputs(SPINE).edge_ports == frozenset()
    shell.packet_in(LEAF_A, UPLINK, arp_frame(frames.ARP_REQUEST, MAC_A, IP_A, IP_B))
    assert shell.topology.hosts == ()
    assert wired.sent.packets == []


def test_one_direction_of_a_link_is_enough_to_stop_host_learning(fabric: Fabric) -> None:
    shell, clock = fabric.shell, fabric.clock
    shell.switch_ports(SPINE, spine_ports())
    shell.switch_ports(LEAF_A, leaf_ports(LEAF_A))
    lldp(shell, PortRef(SPINE, 1), PortRef(LEAF_A, UPLINK))
    clock.now += SETTLE
    assert UPLINK not in shell.inputs(LEAF_A).edge_ports
    fabric.sent.clear()
    shell.packet_in(LEAF_A, UPLINK, arp_frame(frames.ARP_REQUEST, MAC_A, IP_A, IP_A))
    assert shell.topology.hosts == ()


def test_a_host_learned_on_what_turns_out_to_be_a_link_is_forgotten(fabric: Fabric) -> None:
    shell, clock = fabric.shell, fabric.clock
    shell.switch_ports(SPINE, spine_ports())
    shell.switch_ports(LEAF_A, leaf_ports(LEAF_A))
    clock.now += SETTLE
    shell.packet_in(LEAF_A, UPLINK, arp_frame(frames.ARP_REQUEST, MAC_A, IP_A, IP_A))
    assert [host.at for host in shell.topology.hosts] == [PortRef(LEAF_A, UPLINK)]
    lldp(shell, PortRef(SPINE, 1), PortRef(LEAF_A, UPLINK))
    assert shell.topology.hosts == ()


# --------------------------------------------------------------------------------------------
# Proxy ARP
# --------------------------------------------------------------------------------------------


def test_a_request_for_a_known_host_is_answered_on_the_asking_port_only(wired: Fabric) -> None:
    shell = with_hosts(wired).shell
    shell.packet_in(LEAF_A, 5, arp_frame(frames.ARP_REQUEST, MAC_A, IP_A, IP_B))
    [(dpid, ports, data)] = wired.sent.packets
    assert (dpid, ports) == (LEAF_A, [5])
    reply = frames.parse_arp(data)
    assert reply is not None
    assert reply.op == frames.ARP_REPLY == 2
    assert (reply.sha, reply.spa) == (MAC_B, IP_B)
    assert (reply.tha, reply.tpa) == (MAC_A, IP_A)
    assert (reply.eth_src, reply.eth_dst) == (MAC_B, MAC_A)
    assert wired.sent.syncs == []  # A was known already: nothing to re-plan


def test_a_request_for_an_unknown_address_goes_to_every_other_settled_edge_port(
    wired: Fabric,
) -> None:
    shell, clock = wired.shell, wired.clock
    with_hosts(wired)
    # A fourth host port on leaf B that just came up: not settled, not flooded to.
    shell.switch_ports(LEAF_B, [*leaf_ports(LEAF_B), port(LEAF_B, 7)])
    wired.sent.clear()
    clock.now += 0.5
    request = arp_frame(frames.ARP_REQUEST, MAC_A, IP_A, IP_UNKNOWN)
    shell.packet_in(LEAF_A, 5, request)
    assert wired.sent.packets == [(LEAF_A, [6], request), (LEAF_B, [5, 6], request)]


def test_an_unknown_request_from_a_lone_edge_goes_nowhere_on_its_own_switch(
    wired: Fabric,
) -> None:
    shell = wired.shell
    shell.switch_ports(LEAF_A, leaf_ports(LEAF_A, p6=False))
    wired.sent.clear()
    request = arp_frame(frames.ARP_REQUEST, MAC_A, IP_A, IP_UNKNOWN)
    shell.packet_in(LEAF_A, 5, request)
    assert [(dpid, ports) for dpid, ports, _ in wired.sent.packets] == [(LEAF_B, [5, 6])]


def test_a_reply_goes_straight_to_the_host_it_answers(wired: Fabric) -> None:
    shell = with_hosts(wired).shell
    reply = arp_frame(frames.ARP_REPLY, MAC_B, IP_B, IP_A, tha=MAC_A, eth_dst=MAC_A)
    shell.packet_in(LEAF_B, 5, reply)
    assert wired.sent.packets == [(LEAF_A, [5], reply)]


def test_a_request_from_a_fabric_port_is_dropped(wired: Fabric) -> None:
    shell = with_hosts(wired).shell
    shell.packet_in(SPINE, 1, arp_frame(frames.ARP_REQUEST, MAC_A, IP_A, IP_UNKNOWN))
    assert wired.sent.packets == []


# --------------------------------------------------------------------------------------------
# What workers plan from
# --------------------------------------------------------------------------------------------


def test_inputs_report_edge_ports_and_the_topology(wired: Fabric) -> None:
    shell = with_hosts(wired).shell
    inputs = shell.inputs(LEAF_A)
    assert inputs.edge_ports == {5, 6}
    assert inputs.topology == shell.topology
    assert inputs.topology.switches == {SPINE, LEAF_A, LEAF_B}
    assert len(inputs.topology.usable_links) == 4
    assert {host.mac: host.at for host in inputs.topology.hosts} == {
        MAC_A: PortRef(LEAF_A, 5),
        MAC_B: PortRef(LEAF_B, 5),
    }
    assert inputs.pinned == {}
    assert shell.inputs(SPINE).edge_ports == frozenset()
    unknown = shell.inputs(77)
    assert unknown.edge_ports == frozenset()
    assert unknown.topology == shell.topology


def test_inputs_before_ports_settle_have_no_edge_ports(fabric: Fabric) -> None:
    fabric.shell.switch_ports(LEAF_A, leaf_ports(LEAF_A))
    assert fabric.shell.inputs(LEAF_A).edge_ports == frozenset()
    topology = fabric.shell.inputs(LEAF_A).topology
    assert topology.switches == {LEAF_A}
    assert not topology.links and not topology.hosts
    assert set(topology.capacity_bps) == {PortRef(LEAF_A, n) for n in (UPLINK, *HOST_PORTS)}


def test_ports_settling_ask_for_one_sync_of_their_switch(fabric: Fabric) -> None:
    shell, clock = fabric.shell, fabric.clock
    shell.switch_ports(LEAF_A, leaf_ports(LEAF_A))
    shell.inputs(LEAF_A)  # the worker planned with no edge ports yet
    fabric.sent.clear()
    clock.now += SETTLE
    shell._discovery_round(LINK_TIMEOUT)
    assert fabric.sent.syncs == [([LEAF_A], "edge ports settled")]
    shell.inputs(LEAF_A)  # the worker re-planned with them
    fabric.sent.clear()
    clock.now += LLDP_INTERVAL
    shell._discovery_round(LINK_TIMEOUT)
    assert fabric.sent.syncs == []


def observed(flow: FlowId, rate_bps: float, traffic_class: str = "training") -> ObservedFlow:
    return ObservedFlow(flow, traffic_class, "rule:iperf", 1_000_000, rate_bps, 0.0, 0.0)


def test_a_tcp_flows_acks_are_not_placed_on_their_own(wired: Fabric) -> None:
    """Data and ACK directions of one connection share a class (bidirectional rules): only the
    data direction is an elephant; its ACKs follow its path backwards."""
    shell = with_hosts(wired).shell
    data = FlowId(0x0800, 6, IP_A, IP_B, 40000, 5201)
    shell.flows_seen(LEAF_A, [observed(data, 9e6)])
    shell.flows_seen(LEAF_B, [observed(data.reversed(), 4e5)])
    assert [elephant.flow for elephant, _ in shell.elephants()] == [data]


def test_flows_below_the_minimum_rate_or_of_other_classes_are_not_elephants(
    wired: Fabric,
) -> None:
    shell = with_hosts(wired).shell
    small = FlowId(0x0800, 6, IP_A, IP_B, 40001, 5201)
    latency = FlowId(0x0800, 6, IP_A, IP_B, 40002, 8000)
    shell.flows_seen(LEAF_A, [observed(small, 1e5), observed(latency, 9e6, "inference")])
    assert shell.elephants() == []


def test_a_pinned_flow_stays_an_elephant_through_a_poll_that_read_no_growth(
    wired: Fabric,
) -> None:
    shell = with_hosts(wired).shell
    data = FlowId(0x0800, 6, IP_A, IP_B, 40000, 5201)
    shell._pins[data] = Pin(((LEAF_A, UPLINK),), 0.0)
    shell.flows_seen(LEAF_A, [observed(data, 0.0)])
    assert [elephant.flow for elephant, _ in shell.elephants()] == [data]
    shell.flows_seen(LEAF_A, [])  # its counting entry expired: the flow is gone
    assert shell.elephants() == []


def test_a_flow_of_small_packets_is_an_ack_stream_not_an_elephant(wired: Fabric) -> None:
    """Seen alone (its data direction not polled yet), a busy ACK stream is still no elephant."""
    shell = with_hosts(wired).shell
    acks = FlowId(0x0800, 6, IP_A, IP_B, 5201, 40000)
    data = FlowId(0x0800, 6, IP_A, IP_B, 40001, 5201)
    shell.flows_seen(
        LEAF_A,
        [
            ObservedFlow(acks, "training", "rule:iperf", 66_000, 2e6, 0.0, 0.0, packets=1000),
            ObservedFlow(data, "training", "rule:iperf", 1_500_000, 9e6, 0.0, 0.0, packets=1000),
        ],
    )
    assert [elephant.flow for elephant, _ in shell.elephants()] == [data]


# --------------------------------------------------------------------------------------------
# Pinned flows as the API and the events show them
# --------------------------------------------------------------------------------------------


@dataclass
class EventRecorder:
    """An observer that keeps the fabric events the shell emits."""

    events: list[Any] = field(default_factory=list)

    def fabric_events(self, events: Sequence[Any]) -> None:
        self.events.extend(events)


def test_a_pins_since_is_wall_time_not_the_monotonic_clock(wired: Fabric) -> None:
    """Pins are timed on the monotonic clock (hold times), which starts near boot: shown as
    Unix time it read as "pinned for 20792d" (the age of the epoch) in `flowlane topology`."""
    shell = with_hosts(wired).shell
    data = FlowId(0x0800, 6, IP_A, IP_B, 40000, 5201)
    shell._pins[data] = Pin(((LEAF_A, UPLINK),), wired.clock.now - 5.0)
    [view] = shell.pinned()
    assert view.since == pytest.approx(time.time() - 5.0, abs=1.0)
    [snapshot_view] = shell.snapshot().pinned
    assert snapshot_view.since == pytest.approx(time.time() - 5.0, abs=1.0)


def test_a_released_flow_keeps_its_class_rate_and_pin_time_in_the_event(wired: Fabric) -> None:
    """A flow that stopped being an elephant is released with what it was pinned with: the
    event read ``[, 0bit/s] released`` with blanks in their place."""
    shell = with_hosts(wired).shell
    recorder = EventRecorder()
    shell.settings.observers.append(recorder)
    data = FlowId(0x0800, 6, IP_A, IP_B, 40000, 5201)
    shell._pins[data] = Pin(((LEAF_A, UPLINK),), wired.clock.now - 60.0)
    shell._pin_info[data] = ("training", 9e6, 2e7)
    shell._place()  # no flow seen: the pinned one is gone
    [event] = recorder.events
    assert event.data["op"] == "released"
    assert event.data["reason"] == "gone"
    assert event.data["class"] == "training"
    assert event.data["rate_bps"] == 9e6
    assert describe_event(event.kind, event.data) == (
        f"{data} [training, 9Mbit/s] released: {event.data['path']} (gone)"
    )
    assert shell.pinned() == []


# --------------------------------------------------------------------------------------------
# A pin's life: it ends with its flow
# --------------------------------------------------------------------------------------------

SPINE_2 = 2
RELEASE_AFTER = 30.0  # POLICY's detection: the default release_after


def two_spines(fabric: Fabric) -> FabricShell:
    """Leaves 11 and 12 under spines 1 and 2 (leaf port ``s`` faces spine ``s``): two paths."""
    shell, clock = fabric.shell, fabric.clock
    for spine in (SPINE, SPINE_2):
        shell.switch_ports(spine, [port(spine, LEAF_A - 10), port(spine, LEAF_B - 10)])
    for leaf in (LEAF_A, LEAF_B):
        shell.switch_ports(leaf, [port(leaf, n) for n in (SPINE, SPINE_2, *HOST_PORTS)])
        for spine in (SPINE, SPINE_2):
            cable(shell, PortRef(leaf, spine), PortRef(spine, leaf - 10))
    clock.now += SETTLE
    with_hosts(fabric)
    return shell


def test_a_pin_whose_flow_ended_is_released_after_release_after_with_an_event(
    fabric: Fabric,
) -> None:
    """The flow stopped, but its counting entry is still listed at 0 bit/s (OVS keeps an
    entry until its idle timeout, a connection can stay open): the pin stayed, at 0 bit/s,
    until a link failure released it.  It ends ``release_after`` into the quiet spell."""
    shell = two_spines(fabric)
    recorder = EventRecorder()
    shell.settings.observers.append(recorder)
    data = FlowId(0x0800, 6, IP_A, IP_B, 40000, 5201)
    shell.flows_seen(LEAF_A, [observed(data, 9e6)])
    shell._place()
    [pinned] = shell.pinned()
    assert pinned.flow == str(data) and pinned.rate_bps == 9e6
    quiet_from = fabric.clock.now + 0.5  # the first round that reads no growth

    while fabric.clock.now < quiet_from + RELEASE_AFTER - 0.5:
        fabric.clock.now += 0.5
        shell.flows_seen(LEAF_A, [observed(data, 0.0)])
        shell._place()
        [pinned] = shell.pinned()  # a quiet spell (a poll without growth) is no end
        assert pinned.rate_bps == 0.0
    fabric.clock.now += 0.5
    shell.flows_seen(LEAF_A, [observed(data, 0.0)])
    shell._place()
    assert shell.pinned() == []
    pinned_event, released = recorder.events
    assert pinned_event.data["op"] == "pinned"
    assert released.data["op"] == "released"
    assert released.data["reason"] == "ended"
    assert released.data["flow"] == str(data)
    assert released.data["class"] == "training"
    assert released.data["rate_bps"] == 0.0  # what it sent when it was released
    assert fabric.sent.syncs[-1] == (None, "placement")  # its path entries go


def test_a_pin_survives_quiet_spells_shorter_than_release_after(fabric: Fabric) -> None:
    shell = two_spines(fabric)
    data = FlowId(0x0800, 6, IP_A, IP_B, 40000, 5201)
    shell.flows_seen(LEAF_A, [observed(data, 9e6)])
    shell._place()
    before = dict(shell._pins)
    for _ in range(3):
        for rate in [0.0] * 59 + [9e6]:  # 29.5 s without growth, then it sends again
            fabric.clock.now += 0.5
            shell.flows_seen(LEAF_A, [observed(data, rate)])
            shell._place()
    assert shell._pins == before  # same path, same time, and no longer quiet


def test_a_pin_whose_override_the_detector_released_goes_at_once(fabric: Fabric) -> None:
    """Released by the detector, the flow is back in the default class: no longer placed."""
    shell = two_spines(fabric)
    recorder = EventRecorder()
    shell.settings.observers.append(recorder)
    data = FlowId(0x0800, 6, IP_A, IP_B, 40000, 5201)
    shell.flows_seen(LEAF_A, [observed(data, 9e6)])
    shell._place()
    fabric.clock.now += 0.5
    shell.flows_seen(LEAF_A, [observed(data, 0.0, traffic_class="inference")])
    shell._place()
    assert shell.pinned() == []
    released = recorder.events[-1]
    assert (released.data["op"], released.data["reason"]) == ("released", "gone")
    # The rate it had as a placed elephant: the view no longer lists it as one.
    assert (released.data["class"], released.data["rate_bps"]) == ("training", 9e6)


def test_an_elephant_the_detector_releases_loses_its_pin_in_the_next_round(
    fabric: Fabric,
) -> None:
    """End to end through the worker's path: counting table, detector, flow view, placement."""
    document = {
        **POLICY,
        "detection": {
            "elephant": {"rate": "5Mbit", "class": "training"},
            "release_after": "5s",
        },
    }
    fabric.shell.settings.active = ActivePolicy(parse_policy(document, source="test"))
    policy = fabric.shell.settings.active.policy
    assert policy.detection is not None
    shell = two_spines(fabric)
    recorder = EventRecorder()
    shell.settings.observers.append(recorder)
    detector = Detector(policy.detection, policy.ports.rate.bps)
    table = FakeTable()
    data = table.start(FlowId(0x0800, 6, IP_A, IP_B, 40000, 5201), rate_mbit=9)
    pinned_at = released_at = None
    for step in range(60):
        if step == 20:
            table.rate(data, 0)  # it ends at 10 s; its counting entry stays listed
        table.advance(0.5)
        fabric.clock.now += 0.5
        detector.observe(table.samples(), table.now)
        view = observed_flows(detector, policy, (), [], {}, table.now, 0.0)
        shell.flows_seen(LEAF_A, view.flows)
        shell._place()
        if pinned_at is None and shell.pinned():
            pinned_at = table.now
        if pinned_at is not None and released_at is None and not shell.pinned():
            released_at = table.now
    assert pinned_at == 1.0  # demoted after two bulk windows, placed in the same round
    assert released_at == 15.0  # idle from its last growth at 10 s for release_after
    assert [event.data["op"] for event in recorder.events] == ["pinned", "released"]
    assert recorder.events[-1].data["reason"] == "gone"
    assert recorder.events[-1].data["flow"] == str(data)
