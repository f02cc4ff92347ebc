"""Fabric discovery, host learning, proxy ARP and placement of ``FabricOwner``, with no switch.

Each test hands the owner the events a switch's actor, the hub or a timer
would (``tests.openflow.fabric_harness``); packet-outs, publishes and
snapshots are recorded instead of sent, and the clock only moves when a test
says so.  What a switch "plans from" is what the owner last published to it.
"""

from __future__ import annotations

import pytest

from controller.classify.detector import Detector
from controller.classify.reclassify import observed_flows
from controller.classify.records import ObservedFlow
from controller.fabric.model import Host, PortRef
from controller.fabric.placement import Pin
from controller.fabric.snapshot import describe_event
from controller.flowid import FlowId
from controller.openflow import frames
from tests.classify.conftest import FakeTable
from tests.openflow.fabric_harness import (
    DATA,
    EPOCH,
    HOST_PORTS,
    IP_A,
    IP_B,
    IP_UNKNOWN,
    LEAF_A,
    LEAF_B,
    LINK_TIMEOUT,
    LLDP_INTERVAL,
    MAC_A,
    MAC_B,
    SETTLE,
    SPINE,
    UPLINK,
    Fabric,
    arp_frame,
    cable,
    hw,
    leaf_ports,
    link,
    lldp,
    new_fabric,
    observed,
    policy,
    port,
    spine_ports,
    two_spines,
    uplink,
    wire,
    with_hosts,
)

EVERY_SWITCH = frozenset({SPINE, LEAF_A, LEAF_B})


@pytest.fixture
def fabric() -> Fabric:
    """Owner with no switch yet, at time 1000."""
    return new_fabric()


@pytest.fixture
def wired(fabric: Fabric) -> Fabric:
    """All three switches up and cabled, host ports settled, nothing recorded yet."""
    return wire(fabric)


# --------------------------------------------------------------------------------------------
# Links
# --------------------------------------------------------------------------------------------


def test_a_newly_up_port_is_probed_at_once(fabric: Fabric) -> None:
    fabric.ports(LEAF_A, leaf_ports(LEAF_A, p6=False))
    probes = {(dpid, tuple(ports)): data for dpid, ports, data in fabric.sent.packets}
    assert set(probes) == {(LEAF_A, (UPLINK,)), (LEAF_A, (5,))}  # port 6 is down
    assert frames.parse_lldp(probes[LEAF_A, (UPLINK,)]) == (LEAF_A, UPLINK)
    assert probes[LEAF_A, (UPLINK,)] == frames.lldp_frame(LEAF_A, UPLINK, hw(LEAF_A, UPLINK))

    fabric.sent.clear()
    fabric.clock.now += 0.1
    fabric.ports(LEAF_A, leaf_ports(LEAF_A))  # port 6 comes up; the rest stay up
    assert [(dpid, ports) for dpid, ports, _ in fabric.sent.packets] == [(LEAF_A, [6])]


def test_lldp_both_ways_makes_a_usable_link_and_replans_every_switch(fabric: Fabric) -> None:
    fabric.ports(SPINE, spine_ports())
    fabric.ports(LEAF_A, leaf_ports(LEAF_A))
    fabric.sent.clear()
    leaf_end, spine_end = uplink(LEAF_A)

    lldp(fabric, leaf_end, spine_end)
    assert fabric.topology.links == {link(leaf_end, spine_end)}
    assert fabric.topology.usable_links == frozenset()

    fabric.sent.publishes.clear()
    lldp(fabric, spine_end, leaf_end)
    assert fabric.topology.usable_links == {link(leaf_end, spine_end), link(spine_end, leaf_end)}
    assert fabric.sent.publishes == [{SPINE, LEAF_A}]
    assert fabric.sent.packets == []  # discovery answers nothing
    assert fabric.metrics.registry.get_sample_value("flowlane_fabric_links") == 1

    fabric.sent.publishes.clear()
    lldp(fabric, spine_end, leaf_end)  # seen again: nothing changed, nothing to publish
    assert fabric.sent.publishes == []


def test_lldp_from_an_unknown_switch_makes_a_fabric_port_but_no_usable_link(
    fabric: Fabric,
) -> None:
    fabric.ports(LEAF_A, leaf_ports(LEAF_A))
    fabric.sent.clear()
    lldp(fabric, PortRef(99, 1), PortRef(LEAF_A, UPLINK))
    topology = fabric.topology
    assert topology.usable_links == frozenset()
    assert UPLINK in topology.fabric_ports(LEAF_A)
    fabric.clock.now += 100.0
    lldp(fabric, PortRef(99, 1), PortRef(LEAF_A, UPLINK))  # it keeps arriving
    assert UPLINK not in fabric.inputs(LEAF_A).edge_ports
    assert fabric.inputs(LEAF_A).edge_ports == set(HOST_PORTS)


def test_an_lldp_silent_link_times_out_in_the_discovery_round(wired: Fabric) -> None:
    clock = wired.clock
    a_leaf, a_spine = uplink(LEAF_A)
    b_leaf, b_spine = uplink(LEAF_B)
    assert len(wired.topology.usable_links) == 4

    clock.now += LINK_TIMEOUT - SETTLE  # LINK_TIMEOUT after the LLDP: not yet "longer than"
    wired.discover()
    assert len(wired.topology.usable_links) == 4
    # The round probes every up port of every switch.
    probed = sorted((dpid, ports[0]) for dpid, ports, _ in wired.sent.packets)
    assert probed == sorted(
        [(SPINE, 1), (SPINE, 2)] + [(leaf, n) for leaf in (LEAF_A, LEAF_B) for n in (1, 5, 6)]
    )

    cable(wired, b_leaf, b_spine)  # leaf B's link keeps answering, leaf A's went silent
    lldp(wired, a_leaf, a_spine)  # and one direction of A's still arrives
    wired.sent.clear()
    clock.now += 0.5
    wired.discover()
    assert wired.topology.links == {
        link(a_leaf, a_spine),
        link(b_leaf, b_spine),
        link(b_spine, b_leaf),
    }
    assert wired.topology.usable_links == {link(b_leaf, b_spine), link(b_spine, b_leaf)}
    assert EVERY_SWITCH in wired.sent.publishes

    clock.now += LINK_TIMEOUT + 0.1
    wired.discover()
    assert wired.topology.links == frozenset()


def test_a_port_going_down_takes_its_links_and_hosts_with_it(wired: Fabric) -> None:
    fabric = with_hosts(wired)
    assert {host.mac for host in fabric.topology.hosts} == {MAC_A, MAC_B}

    fabric.ports(LEAF_A, leaf_ports(LEAF_A, p1=False, p5=False))
    topology = fabric.topology
    assert all(PortRef(LEAF_A, UPLINK) not in (seen.src, seen.dst) for seen in topology.links)
    assert topology.usable_links == {link(*uplink(LEAF_B)), link(*uplink(LEAF_B)).reversed()}
    assert [host.mac for host in topology.hosts] == [MAC_B]
    assert fabric.sent.publishes == [EVERY_SWITCH]
    assert fabric.sent.packets == []  # nothing came up: no probe

    # A port that vanished from the switch counts as down too.
    fabric.ports(LEAF_B, [port(LEAF_B, UPLINK), port(LEAF_B, 6)])
    assert fabric.topology.hosts == ()


def test_a_port_coming_back_must_settle_again(wired: Fabric) -> None:
    clock = wired.clock
    wired.ports(LEAF_A, leaf_ports(LEAF_A, p5=False))
    clock.now += 0.1
    wired.ports(LEAF_A, leaf_ports(LEAF_A))
    assert 5 not in wired.inputs(LEAF_A).edge_ports
    clock.now += SETTLE
    wired.discover()
    assert 5 in wired.inputs(LEAF_A).edge_ports


# --------------------------------------------------------------------------------------------
# Hosts
# --------------------------------------------------------------------------------------------


def test_a_host_is_learned_only_once_its_port_has_settled(fabric: Fabric) -> None:
    clock = fabric.clock
    up = clock.now
    fabric.ports(LEAF_A, leaf_ports(LEAF_A))
    fabric.sent.clear()
    announce = arp_frame(frames.ARP_REQUEST, MAC_A, IP_A, IP_A)

    clock.now = up + SETTLE - 0.01
    fabric.packet_in(LEAF_A, 5, announce)
    assert not fabric.topology.hosts
    assert fabric.sent.packets == [] and fabric.sent.publishes == []

    clock.now = up + SETTLE
    fabric.packet_in(LEAF_A, 5, announce)
    assert fabric.topology.hosts == (Host(MAC_A, PortRef(LEAF_A, 5), IP_A),)
    assert fabric.sent.publishes == [{LEAF_A}]  # every switch the owner knows
    assert fabric.sent.packets == []  # gratuitous ARP: nobody to tell


def test_a_port_with_a_link_is_never_an_edge_port(wired: Fabric) -> None:
    wired.clock.now += 100
    for leaf in (LEAF_A, LEAF_B):
        cable(wired, *uplink(leaf))  # LLDP keeps arriving
    assert wired.inputs(LEAF_A).edge_ports == {5, 6}
    assert wired.inputs(SPINE).edge_ports == frozenset()
    wired.sent.clear()
    wired.packet_in(LEAF_A, UPLINK, arp_frame(frames.ARP_REQUEST, MAC_A, IP_A, IP_B))
    assert wired.topology.hosts == ()
    assert wired.sent.packets == []


def test_one_direction_of_a_link_is_enough_to_stop_host_learning(fabric: Fabric) -> None:
    fabric.ports(SPINE, spine_ports())
    fabric.ports(LEAF_A, leaf_ports(LEAF_A))
    lldp(fabric, PortRef(SPINE, 1), PortRef(LEAF_A, UPLINK))
    fabric.clock.now += SETTLE
    fabric.discover()
    assert UPLINK not in fabric.inputs(LEAF_A).edge_ports
    fabric.sent.clear()
    fabric.packet_in(LEAF_A, UPLINK, arp_frame(frames.ARP_REQUEST, MAC_A, IP_A, IP_A))
    assert fabric.topology.hosts == ()


def test_a_host_learned_on_what_turns_out_to_be_a_link_is_forgotten(fabric: Fabric) -> None:
    fabric.ports(SPINE, spine_ports())
    fabric.ports(LEAF_A, leaf_ports(LEAF_A))
    fabric.clock.now += SETTLE
    fabric.packet_in(LEAF_A, UPLINK, arp_frame(frames.ARP_REQUEST, MAC_A, IP_A, IP_A))
    assert [host.at for host in fabric.topology.hosts] == [PortRef(LEAF_A, UPLINK)]
    lldp(fabric, PortRef(SPINE, 1), PortRef(LEAF_A, UPLINK))
    assert fabric.topology.hosts == ()


# --------------------------------------------------------------------------------------------
# Proxy ARP
# --------------------------------------------------------------------------------------------


def test_a_request_for_a_known_host_is_answered_on_the_asking_port_only(wired: Fabric) -> None:
    fabric = with_hosts(wired)
    fabric.packet_in(LEAF_A, 5, arp_frame(frames.ARP_REQUEST, MAC_A, IP_A, IP_B))
    [(dpid, ports, data)] = fabric.sent.packets
    assert (dpid, ports) == (LEAF_A, [5])
    reply = frames.parse_arp(data)
    assert reply is not None
    assert reply.op == frames.ARP_REPLY == 2
    assert (reply.sha, reply.spa) == (MAC_B, IP_B)
    assert (reply.tha, reply.tpa) == (MAC_A, IP_A)
    assert (reply.eth_src, reply.eth_dst) == (MAC_B, MAC_A)
    assert fabric.sent.publishes == []  # A was known already: nothing to re-plan


def test_a_request_for_an_unknown_address_goes_to_every_other_settled_edge_port(
    wired: Fabric,
) -> None:
    fabric = with_hosts(wired)
    # A fourth host port on leaf B that just came up: not settled, not flooded to.
    fabric.ports(LEAF_B, [*leaf_ports(LEAF_B), port(LEAF_B, 7)])
    fabric.sent.clear()
    fabric.clock.now += 0.5
    request = arp_frame(frames.ARP_REQUEST, MAC_A, IP_A, IP_UNKNOWN)
    fabric.packet_in(LEAF_A, 5, request)
    assert fabric.sent.packets == [(LEAF_A, [6], request), (LEAF_B, [5, 6], request)]


def test_an_unknown_request_from_a_lone_edge_goes_nowhere_on_its_own_switch(
    wired: Fabric,
) -> None:
    wired.ports(LEAF_A, leaf_ports(LEAF_A, p6=False))
    wired.sent.clear()
    request = arp_frame(frames.ARP_REQUEST, MAC_A, IP_A, IP_UNKNOWN)
    wired.packet_in(LEAF_A, 5, request)
    assert [(dpid, ports) for dpid, ports, _ in wired.sent.packets] == [(LEAF_B, [5, 6])]


def test_a_reply_goes_straight_to_the_host_it_answers(wired: Fabric) -> None:
    fabric = with_hosts(wired)
    reply = arp_frame(frames.ARP_REPLY, MAC_B, IP_B, IP_A, tha=MAC_A, eth_dst=MAC_A)
    fabric.packet_in(LEAF_B, 5, reply)
    assert fabric.sent.packets == [(LEAF_A, [5], reply)]


def test_a_request_from_a_fabric_port_is_dropped(wired: Fabric) -> None:
    fabric = with_hosts(wired)
    fabric.packet_in(SPINE, 1, arp_frame(frames.ARP_REQUEST, MAC_A, IP_A, IP_UNKNOWN))
    assert fabric.sent.packets == []


# --------------------------------------------------------------------------------------------
# What switches plan from
# --------------------------------------------------------------------------------------------


def test_inputs_report_edge_ports_and_the_topology(wired: Fabric) -> None:
    fabric = with_hosts(wired)
    inputs = fabric.inputs(LEAF_A)
    assert inputs.edge_ports == {5, 6}
    assert inputs.topology == fabric.topology
    assert inputs.topology.switches == {SPINE, LEAF_A, LEAF_B}
    assert len(inputs.topology.usable_links) == 4
    assert {host.mac: host.at for host in inputs.topology.hosts} == {
        MAC_A: PortRef(LEAF_A, 5),
        MAC_B: PortRef(LEAF_B, 5),
    }
    assert inputs.pinned == {}
    assert fabric.inputs(SPINE).edge_ports == frozenset()
    # A switch the owner has not heard from is handed nothing: it plans without the fabric
    # until its ports arrive, and then gets the same topology with no edge port yet.
    assert 77 not in fabric.sent.latest
    fabric.ports(77, [])
    unknown = fabric.inputs(77)
    assert unknown.edge_ports == frozenset()
    assert unknown.topology == fabric.topology == fabric.inputs(LEAF_A).topology


def test_inputs_before_ports_settle_have_no_edge_ports(fabric: Fabric) -> None:
    fabric.ports(LEAF_A, leaf_ports(LEAF_A))
    assert fabric.inputs(LEAF_A).edge_ports == frozenset()
    topology = fabric.inputs(LEAF_A).topology
    assert topology.switches == {LEAF_A}
    assert not topology.links and not topology.hosts
    assert set(topology.capacity_bps) == {PortRef(LEAF_A, n) for n in (UPLINK, *HOST_PORTS)}


def test_ports_settling_publish_once_to_their_switch(fabric: Fabric) -> None:
    clock = fabric.clock
    fabric.ports(LEAF_A, leaf_ports(LEAF_A))
    assert fabric.sent.publishes == [{LEAF_A}]  # the switch plans with no edge ports yet
    fabric.sent.clear()
    clock.now += SETTLE
    fabric.discover()
    assert fabric.sent.publishes == [{LEAF_A}]
    assert fabric.inputs(LEAF_A).edge_ports == {UPLINK, *HOST_PORTS}
    fabric.sent.clear()
    clock.now += LLDP_INTERVAL
    fabric.discover()
    assert fabric.sent.publishes == []


def test_a_tcp_flows_acks_are_not_placed_on_their_own(wired: Fabric) -> None:
    """Data and ACK directions of one connection share a class (bidirectional rules): only the
    data direction is an elephant; its ACKs follow its path backwards."""
    fabric = with_hosts(wired)
    fabric.flows(LEAF_A, [observed(DATA, 9e6)])
    fabric.flows(LEAF_B, [observed(DATA.reversed(), 4e5)])
    assert [elephant.flow for elephant, _ in fabric.owner.elephants()] == [DATA]


def test_flows_below_the_minimum_rate_or_of_other_classes_are_not_elephants(
    wired: Fabric,
) -> None:
    fabric = with_hosts(wired)
    small = FlowId(0x0800, 6, IP_A, IP_B, 40001, 5201)
    latency = FlowId(0x0800, 6, IP_A, IP_B, 40002, 8000)
    fabric.flows(LEAF_A, [observed(small, 1e5), observed(latency, 9e6, "inference")])
    assert fabric.owner.elephants() == []


def test_a_pinned_flow_stays_an_elephant_through_a_poll_that_read_no_growth(
    wired: Fabric,
) -> None:
    fabric = with_hosts(wired)
    fabric.owner._pins[DATA] = Pin(((LEAF_A, UPLINK),), 0.0)
    fabric.flows(LEAF_A, [observed(DATA, 0.0)])
    assert [elephant.flow for elephant, _ in fabric.owner.elephants()] == [DATA]
    fabric.flows(LEAF_A, [])  # its counting entry expired: the flow is gone
    assert fabric.owner.elephants() == []


def test_a_flow_of_small_packets_is_an_ack_stream_not_an_elephant(wired: Fabric) -> None:
    """Seen alone (its data direction not polled yet), a busy ACK stream is still no elephant."""
    fabric = with_hosts(wired)
    acks = FlowId(0x0800, 6, IP_A, IP_B, 5201, 40000)
    data = FlowId(0x0800, 6, IP_A, IP_B, 40001, 5201)
    fabric.flows(
        LEAF_A,
        [
            ObservedFlow(acks, "training", "rule:iperf", 66_000, 2e6, 0.0, 0.0, packets=1000),
            ObservedFlow(data, "training", "rule:iperf", 1_500_000, 9e6, 0.0, 0.0, packets=1000),
        ],
    )
    assert [elephant.flow for elephant, _ in fabric.owner.elephants()] == [data]


# --------------------------------------------------------------------------------------------
# Pinned flows as the API and the events show them
# --------------------------------------------------------------------------------------------


def test_a_pins_since_is_wall_time_not_the_monotonic_clock(fabric: Fabric) -> None:
    """Pins are timed on the monotonic clock (hold times), which starts near boot: shown as
    Unix time it read as "pinned for 20792d" (the age of the epoch) in `flowlane topology`."""
    two_spines(fabric)
    fabric.flows(LEAF_A, [observed(DATA, 9e6)])
    fabric.place()
    fabric.clock.now += 3.0
    fabric.place()  # the flow still sends: same pin, 3 s old
    [view] = fabric.pinned()
    assert view.since == EPOCH + fabric.clock.now - 3.0
    fabric.discover()  # the round publishes the snapshot
    [snapshot_view] = fabric.snapshot.pinned
    assert snapshot_view.since == EPOCH + fabric.clock.now - 3.0
    assert fabric.snapshot.updated == EPOCH + fabric.clock.now


def test_a_released_flow_keeps_its_class_rate_and_pin_time_in_the_event(fabric: Fabric) -> None:
    """A flow that stopped being an elephant is released with what it was pinned with: the
    event read ``[, 0bit/s] released`` with blanks in their place."""
    two_spines(fabric)
    fabric.flows(LEAF_A, [observed(DATA, 9e6)])
    fabric.place()
    fabric.sent.clear()
    fabric.clock.now += 0.5
    fabric.flows(LEAF_A, [])
    fabric.place()  # no flow seen: the pinned one is gone
    [event] = fabric.sent.events
    assert event.data["op"] == "released"
    assert event.data["reason"] == "gone"
    assert event.data["class"] == "training"
    assert event.data["rate_bps"] == 9e6
    assert describe_event(event.kind, event.data) == (
        f"{DATA} [training, 9Mbit/s] released: {event.data['path']} (gone)"
    )
    assert fabric.pinned() == []


# --------------------------------------------------------------------------------------------
# A pin's life: it ends with its flow
# --------------------------------------------------------------------------------------------

RELEASE_AFTER = 30.0  # POLICY's detection: the default release_after


def test_a_pin_whose_flow_ended_is_released_after_release_after_with_an_event(
    fabric: Fabric,
) -> None:
    """The flow stopped, but its counting entry is still listed at 0 bit/s (OVS keeps an
    entry until its idle timeout, a connection can stay open): the pin stayed, at 0 bit/s,
    until a link failure released it.  It ends ``release_after`` into the quiet spell."""
    two_spines(fabric)
    fabric.flows(LEAF_A, [observed(DATA, 9e6)])
    fabric.place()
    [pinned] = fabric.pinned()
    assert pinned.flow == str(DATA) and pinned.rate_bps == 9e6
    quiet_from = fabric.clock.now + 0.5  # the first round that reads no growth

    while fabric.clock.now < quiet_from + RELEASE_AFTER - 0.5:
        fabric.clock.now += 0.5
        fabric.flows(LEAF_A, [observed(DATA, 0.0)])
        fabric.place()
        [pinned] = fabric.pinned()  # a quiet spell (a poll without growth) is no end
        assert pinned.rate_bps == 0.0
    fabric.clock.now += 0.5
    fabric.flows(LEAF_A, [observed(DATA, 0.0)])
    fabric.place()
    assert fabric.pinned() == []
    pinned_event, released = fabric.placement_events()
    assert pinned_event.data["op"] == "pinned"
    assert released.data["op"] == "released"
    assert released.data["reason"] == "ended"
    assert released.data["flow"] == str(DATA)
    assert released.data["class"] == "training"
    assert released.data["rate_bps"] == 0.0  # what it sent when it was released
    # Its path entries go: every switch is handed inputs without the pin.
    assert fabric.sent.publishes[-1] == {SPINE, 2, LEAF_A, LEAF_B}
    assert fabric.inputs(LEAF_A).pinned == {}


def test_a_pin_survives_quiet_spells_shorter_than_release_after(fabric: Fabric) -> None:
    two_spines(fabric)
    fabric.flows(LEAF_A, [observed(DATA, 9e6)])
    fabric.place()
    before = dict(fabric.owner._pins)
    fabric.sent.clear()
    for _ in range(3):
        for rate in [0.0] * 59 + [9e6]:  # 29.5 s without growth, then it sends again
            fabric.clock.now += 0.5
            fabric.flows(LEAF_A, [observed(DATA, rate)])
            fabric.place()
    assert fabric.owner._pins == before  # same path, same time, and no longer quiet
    assert fabric.sent.publishes == []  # no switch had anything to change


def test_a_pin_whose_override_the_detector_released_goes_at_once(fabric: Fabric) -> None:
    """Released by the detector, the flow is back in the default class: no longer placed."""
    two_spines(fabric)
    fabric.flows(LEAF_A, [observed(DATA, 9e6)])
    fabric.place()
    fabric.clock.now += 0.5
    fabric.flows(LEAF_A, [observed(DATA, 0.0, traffic_class="inference")])
    fabric.place()
    assert fabric.pinned() == []
    released = fabric.placement_events()[-1]
    assert (released.data["op"], released.data["reason"]) == ("released", "gone")
    # The rate it had as a placed elephant: the view no longer lists it as one.
    assert (released.data["class"], released.data["rate_bps"]) == ("training", 9e6)


def test_an_elephant_the_detector_releases_loses_its_pin_in_the_next_round(
    fabric: Fabric,
) -> None:
    """End to end through the worker's path: counting table, detector, flow view, placement."""
    active = policy(
        detection={"elephant": {"rate": "5Mbit", "class": "training"}, "release_after": "5s"}
    )
    fabric.set_policy(active)
    assert active.detection is not None
    two_spines(fabric)
    detector = Detector(active.detection, active.ports.rate.bps)
    table = FakeTable()
    data = table.start(FlowId(0x0800, 6, IP_A, IP_B, 40000, 5201), rate_mbit=9)
    pinned_at = released_at = None
    for step in range(60):
        if step == 20:
            table.rate(data, 0)  # it ends at 10 s; its counting entry stays listed
        table.advance(0.5)
        fabric.clock.now += 0.5
        detector.observe(table.samples(), table.now)
        view = observed_flows(detector, active, (), [], {}, table.now, 0.0)
        fabric.flows(LEAF_A, view.flows)
        fabric.place()
        if pinned_at is None and fabric.pinned():
            pinned_at = table.now
        if pinned_at is not None and released_at is None and not fabric.pinned():
            released_at = table.now
    assert pinned_at == 1.0  # demoted after two bulk windows, placed in the same round
    assert released_at == 15.0  # idle from its last growth at 10 s for release_after
    events = fabric.placement_events()
    assert [event.data["op"] for event in events] == ["pinned", "released"]
    assert events[-1].data["reason"] == "gone"
    assert events[-1].data["flow"] == str(data)
