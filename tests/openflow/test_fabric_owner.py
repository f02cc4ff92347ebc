"""``FabricOwner`` as an actor: order of events, policy changes against placement, link
failures under pins, hosts moving, and the rounds it schedules for itself.

The owner is driven as its mailbox would drive it (``tests.openflow.fabric_harness``):
one event at a time on the test's thread, time carried by the events.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from controller.fabric.model import Host, PortRef
from controller.fabric.placement import LINK_DOWN, ONE_PATH, PLACED
from controller.fabric.snapshot import HOST, PLACEMENT, REROUTE, FabricEvent, FabricSnapshot
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
    SwitchPorts,
)
from controller.openflow.fabric_owner import FabricOwner
from tests.openflow.fabric_harness import (
    DATA,
    IP_A,
    IP_B,
    LEAF_A,
    LEAF_B,
    LLDP_INTERVAL,
    MAC_A,
    MAC_B,
    SETTLE,
    SPINE,
    UPLINK,
    Fabric,
    arp_frame,
    cable,
    leaf_ports,
    lldp_frame,
    new_fabric,
    observed,
    policy,
    port,
    spine_ports,
    spines,
    two_spines,
    uplink,
)

T0 = 1000.0


@pytest.fixture
def fabric() -> Fabric:
    return new_fabric()


# --------------------------------------------------------------------------------------------
# Order: several switches' events, in any order, make one fabric
# --------------------------------------------------------------------------------------------


Source = list[FabricMessage]
"""Events from one sender, in the order it sends them (a mailbox keeps each sender's order)."""


def _cabling(now: float) -> list[Source]:
    """Both directions of both uplinks, as LLDP packet-ins (each arrives on its own)."""
    sources: list[Source] = []
    for leaf in (LEAF_A, LEAF_B):
        leaf_end, spine_end = uplink(leaf)
        sources.append([PacketIn(spine_end.dpid, spine_end.port, lldp_frame(leaf_end), now)])
        sources.append([PacketIn(leaf_end.dpid, leaf_end.port, lldp_frame(spine_end), now)])
    return sources


def _connect_phase() -> list[Source]:
    """Three switches report their ports (then their counters), LLDP arrives: all at T0."""
    return [
        [SwitchPorts(SPINE, tuple(spine_ports()), T0)],
        [
            SwitchPorts(LEAF_A, tuple(leaf_ports(LEAF_A)), T0),
            PortRates(LEAF_A, {UPLINK: 1e6}, T0),
        ],
        [
            SwitchPorts(LEAF_B, tuple(leaf_ports(LEAF_B)), T0),
            FlowsSeen(LEAF_B, (observed(DATA.reversed(), 1e5),), T0),
        ],
        *_cabling(T0),
    ]


def _settled_phase() -> list[Source]:
    """Once the host ports settled: hosts announce themselves, LLDP keeps coming, a round."""
    now = T0 + SETTLE
    return [
        [PacketIn(LEAF_A, 5, arp_frame(frames.ARP_REQUEST, MAC_A, IP_A, IP_A), now)],
        [PacketIn(LEAF_B, 5, arp_frame(frames.ARP_REQUEST, MAC_B, IP_B, IP_B), now)],
        *_cabling(now),
        [DiscoveryTick(now)],
    ]


def _turns(sources: list[Source]) -> list[int]:
    """Sender ``i`` once per event it sends: a permutation of this is an interleaving."""
    return [index for index, source in enumerate(sources) for _ in source]


def _interleave(sources: list[Source], turns: list[int]) -> list[FabricMessage]:
    queues = [list(source) for source in sources]
    return [queues[turn].pop(0) for turn in turns]


def _run(*phases: list[FabricMessage]) -> Fabric:
    """The phases in order, then one more round: its snapshot is what the API shows."""
    fabric = new_fabric()
    for phase in phases:
        for event in phase:
            fabric.tell(event)
    fabric.clock.now = T0 + SETTLE
    fabric.discover()
    return fabric


REFERENCE = _run(
    _interleave(_connect_phase(), _turns(_connect_phase())),
    _interleave(_settled_phase(), _turns(_settled_phase())),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    first=st.permutations(_turns(_connect_phase())),
    then=st.permutations(_turns(_settled_phase())),
)
def test_events_in_any_order_make_the_same_fabric(first: list[int], then: list[int]) -> None:
    fabric = _run(_interleave(_connect_phase(), first), _interleave(_settled_phase(), then))
    assert fabric.topology == REFERENCE.topology
    assert {host.mac for host in fabric.topology.hosts} == {MAC_A, MAC_B}
    assert len(fabric.topology.usable_links) == 4
    # Every switch ends up planning from the same inputs, whatever it was handed on the way.
    assert fabric.sent.latest == REFERENCE.sent.latest
    assert fabric.sent.latest.keys() == {SPINE, LEAF_A, LEAF_B}
    assert fabric.inputs(LEAF_A).edge_ports == {5, 6}
    # And the API sees the same fabric, link load included.
    assert fabric.snapshot.model_dump(exclude={"updated"}) == REFERENCE.snapshot.model_dump(
        exclude={"updated"}
    )
    [loaded] = [view for view in fabric.snapshot.links if view.tx_bps]
    assert (loaded.src.ref, loaded.tx_bps) == (PortRef(LEAF_A, UPLINK), 1e6)


def test_an_event_stamped_earlier_does_not_turn_time_back(fabric: Fabric) -> None:
    """A timer's tick carries its due time and can be handled after a packet-in stamped a
    little later: a port that settled stays settled."""
    fabric.ports(LEAF_A, leaf_ports(LEAF_A))
    fabric.clock.now += SETTLE
    fabric.rates(LEAF_A, {})  # any event after the port settled publishes it
    assert fabric.inputs(LEAF_A).edge_ports == {UPLINK, 5, 6}
    # LLDP from a switch not connected yet, stamped before the tick that published the edges.
    fabric.tell(PacketIn(LEAF_A, UPLINK, lldp_frame(PortRef(99, 1)), fabric.clock.now - 0.01))
    assert fabric.inputs(LEAF_A).edge_ports == {5, 6}  # the uplink faces a switch: no edge


def test_a_port_settling_is_published_once_by_whichever_event_comes_first(
    fabric: Fabric,
) -> None:
    fabric.ports(LEAF_A, leaf_ports(LEAF_A))
    fabric.sent.clear()
    fabric.clock.now += SETTLE - 0.1
    fabric.rates(LEAF_A, {UPLINK: 0.0})
    assert fabric.sent.publishes == []  # not yet
    fabric.clock.now += 0.1
    fabric.rates(LEAF_A, {UPLINK: 0.0})
    assert fabric.sent.publishes == [{LEAF_A}]
    fabric.clock.now += LLDP_INTERVAL
    fabric.discover()
    fabric.rates(LEAF_A, {UPLINK: 0.0})
    assert fabric.sent.publishes == [{LEAF_A}]


# --------------------------------------------------------------------------------------------
# Placement: pins, releases, policy changes
# --------------------------------------------------------------------------------------------


EVERY_SWITCH_2 = frozenset({SPINE, 2, LEAF_A, LEAF_B})


def test_placement_pins_an_elephant_and_releases_it_when_it_is_gone(fabric: Fabric) -> None:
    two_spines(fabric)
    fabric.flows(LEAF_A, [observed(DATA, 9e6)])
    fabric.place()
    [event] = fabric.placement_events()
    assert (event.kind, event.data["op"], event.data["reason"]) == (PLACEMENT, "pinned", PLACED)
    assert fabric.sent.publishes == [EVERY_SWITCH_2]
    pinned = fabric.inputs(LEAF_A).pinned
    assert set(pinned) == {DATA, DATA.reversed()}  # its ACKs take the same links back
    path = pinned[DATA]
    assert len(path) == 2 and path[0][0] == LEAF_A and path[1][0] in (SPINE, 2)  # out of A, B
    assert all(fabric.inputs(dpid).pinned == pinned for dpid in EVERY_SWITCH_2)
    assert fabric.metrics.registry.get_sample_value("flowlane_pinned_flows") == 1
    assert (
        fabric.metrics.registry.get_sample_value("flowlane_placements_total", {"reason": PLACED})
        == 1
    )

    fabric.sent.clear()
    fabric.clock.now += 0.5
    fabric.flows(LEAF_A, [])
    fabric.place()
    [released] = fabric.placement_events()
    assert (released.data["op"], released.data["reason"]) == ("released", "gone")
    assert fabric.sent.publishes == [EVERY_SWITCH_2]
    assert fabric.inputs(LEAF_A).pinned == {}
    assert fabric.pinned() == []
    assert fabric.metrics.registry.get_sample_value("flowlane_pinned_flows") == 0


def policy_forwarding() -> dict[str, object]:
    return {
        "mode": "fabric",
        "discovery": {"lldp_interval": f"{LLDP_INTERVAL}s", "link_timeout": "3.5s"},
    }


def _pinned(fabric: Fabric) -> None:
    two_spines(fabric)
    fabric.flows(LEAF_A, [observed(DATA, 9e6)])
    fabric.place()
    assert fabric.inputs(LEAF_A).pinned


def test_placement_turned_off_clears_the_pins_at_once(fabric: Fabric) -> None:
    _pinned(fabric)
    fabric.sent.clear()
    fabric.set_policy(policy(forwarding={**policy_forwarding(), "placement": None}))
    assert fabric.sent.publishes == [EVERY_SWITCH_2]
    assert fabric.inputs(LEAF_A).pinned == {}
    assert fabric.pinned() == []
    assert fabric.metrics.registry.get_sample_value("flowlane_pinned_flows") == 0
    for _ in range(4):  # later rounds, the flow still counted: nothing comes back
        fabric.clock.now += 0.5
        fabric.flows(LEAF_A, [observed(DATA, 9e6)])
        fabric.place()
    assert fabric.inputs(LEAF_A).pinned == {}
    assert fabric.placement_events() == []  # pins of a placement turned off go silently


OFF = "off"
ON = "on"
ROUND = "round"
SEEN = "seen"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from([OFF, ON, ROUND, SEEN]), min_size=1, max_size=12))
def test_a_policy_change_among_placement_rounds_is_never_lost(steps: list[str]) -> None:
    """Whatever the order of policy changes, flow polls and placement rounds, a switch never
    plans with a pin while placement is off, and the owner holds none."""
    fabric = new_fabric()
    _pinned(fabric)
    off = policy(forwarding={**policy_forwarding(), "placement": None})
    on = policy()
    placing = True
    for step in steps:
        fabric.clock.now += 0.25
        if step == OFF:
            fabric.tell(PolicyChanged(off))
            placing = False
        elif step == ON:
            fabric.tell(PolicyChanged(on))
            placing = True
        elif step == ROUND:
            fabric.tell(PlacementTick(fabric.clock.now))
        else:
            fabric.tell(FlowsSeen(LEAF_A, (observed(DATA, 9e6),), fabric.clock.now))
        if not placing:
            assert fabric.owner._pins == {}
            assert all(inputs.pinned == {} for inputs in fabric.sent.latest.values())
            assert fabric.pinned() == []
    if placing:
        fabric.clock.now += 0.25
        fabric.place()  # the flow is still an elephant: placed again
        assert DATA in fabric.inputs(LEAF_A).pinned


# --------------------------------------------------------------------------------------------
# A link down under a pin
# --------------------------------------------------------------------------------------------

SPINES = (1, 2, 3)


def _spine_of(fabric: Fabric) -> int:
    path = fabric.inputs(LEAF_A).pinned[DATA]
    return path[1][0]


def test_a_link_down_reroutes_the_pins_over_it_and_then_releases_them(fabric: Fabric) -> None:
    spines(fabric, len(SPINES))
    fabric.flows(LEAF_A, [observed(DATA, 9e6)])
    fabric.place()
    first = _spine_of(fabric)
    fabric.sent.clear()

    # Leaf A's port to that spine goes down (one end of the link): the link is gone at once.
    fabric.clock.now += 0.5
    fabric.ports(LEAF_A, [port(LEAF_A, n, up=n != first) for n in (*SPINES, 5, 6)])
    assert all(
        first not in (link.src.dpid, link.dst.dpid)
        for link in fabric.topology.links
        if LEAF_A in (link.src.dpid, link.dst.dpid)
    )
    fabric.place()
    [moved] = fabric.placement_events()
    assert (moved.kind, moved.data["reason"]) == (REROUTE, LINK_DOWN)
    second = _spine_of(fabric)
    assert second != first
    assert (
        fabric.metrics.registry.get_sample_value("flowlane_reroutes_total", {"reason": LINK_DOWN})
        == 1
    )
    # ACKs follow the new path back.
    back = fabric.inputs(LEAF_B).pinned[DATA.reversed()]
    assert back[1][0] == second

    # The next spine's link fails too: one path left, nothing to choose, the pin goes.
    fabric.sent.clear()
    fabric.clock.now += 0.5
    fabric.ports(LEAF_A, [port(LEAF_A, n, up=n not in (first, second)) for n in (*SPINES, 5, 6)])
    fabric.place()
    [released] = fabric.placement_events()
    assert (released.data["op"], released.data["reason"]) == ("released", ONE_PATH)
    assert fabric.inputs(LEAF_A).pinned == {}
    assert fabric.pinned() == []


def test_an_lldp_timeout_under_a_pin_reroutes_it(fabric: Fabric) -> None:
    """The other way a link dies: LLDP stops (a cable cut the switch did not notice)."""
    spines(fabric, len(SPINES))
    fabric.flows(LEAF_A, [observed(DATA, 9e6)])
    fabric.place()
    first = _spine_of(fabric)
    fabric.sent.clear()
    for _ in range(4):  # LLDP keeps coming on every link but the pinned one's
        fabric.clock.now += 1.0
        for leaf in (LEAF_A, LEAF_B):
            for spine in SPINES:
                if (leaf, spine) == (LEAF_A, first):
                    continue
                cable(fabric, PortRef(leaf, spine), PortRef(spine, leaf - 10))
        fabric.discover()
    fabric.place()
    [moved] = fabric.placement_events()
    assert moved.data["reason"] == LINK_DOWN
    assert _spine_of(fabric) != first


# --------------------------------------------------------------------------------------------
# Hosts moving
# --------------------------------------------------------------------------------------------


def test_a_host_moving_ports_is_followed_and_answered_for_at_its_new_port(
    fabric: Fabric,
) -> None:
    two_spines(fabric)
    assert fabric.topology.host(MAC_A) == Host(MAC_A, PortRef(LEAF_A, 5), IP_A)
    # A's cable moves to leaf B port 6: its next ARP comes from there.
    fabric.packet_in(LEAF_B, 6, arp_frame(frames.ARP_REQUEST, MAC_A, IP_A, IP_B))
    assert fabric.topology.host(MAC_A) == Host(MAC_A, PortRef(LEAF_B, 6), IP_A)
    [moved] = [event for event in fabric.sent.events if event.kind == HOST]
    assert moved.data["op"] == "moved"
    assert moved.data["from"] == str(PortRef(LEAF_A, 5))
    assert fabric.sent.publishes == [EVERY_SWITCH_2]
    # The request is answered where A is now.
    [(dpid, ports, data)] = fabric.sent.packets
    assert (dpid, ports) == (LEAF_B, [6])
    reply = frames.parse_arp(data)
    assert reply is not None and reply.tha == MAC_A and reply.sha == MAC_B
    # And B's answer to A goes to A's new port.
    fabric.sent.clear()
    answer = arp_frame(frames.ARP_REPLY, MAC_B, IP_B, IP_A, tha=MAC_A, eth_dst=MAC_A)
    fabric.packet_in(LEAF_B, 5, answer)
    assert fabric.sent.packets == [(LEAF_B, [6], answer)]


def test_a_host_moving_to_an_unsettled_port_is_not_followed_until_it_settles(
    fabric: Fabric,
) -> None:
    two_spines(fabric)
    fabric.ports(LEAF_B, [port(LEAF_B, n) for n in (1, 2, 5, 6, 7)])  # port 7 just came up
    announce = arp_frame(frames.ARP_REQUEST, MAC_A, IP_A, IP_A)
    fabric.packet_in(LEAF_B, 7, announce)
    assert fabric.topology.host(MAC_A) == Host(MAC_A, PortRef(LEAF_A, 5), IP_A)
    fabric.clock.now += SETTLE
    fabric.packet_in(LEAF_B, 7, announce)
    assert fabric.topology.host(MAC_A) == Host(MAC_A, PortRef(LEAF_B, 7), IP_A)


# --------------------------------------------------------------------------------------------
# Rounds, switches leaving, the fabric turned off
# --------------------------------------------------------------------------------------------


def test_each_round_asks_for_the_next_one(fabric: Fabric) -> None:
    fabric.discover()
    fabric.place()
    assert fabric.sent.scheduled == [
        (LLDP_INTERVAL, DiscoveryTick(fabric.clock.now + LLDP_INTERVAL)),
        (0.5, PlacementTick(fabric.clock.now + 0.5)),  # placement's default interval
    ]


def test_rounds_go_on_while_the_fabric_is_off_and_do_nothing(fabric: Fabric) -> None:
    fabric.ports(LEAF_A, leaf_ports(LEAF_A))
    fabric.set_policy(policy(forwarding="normal"))
    fabric.sent.clear()
    snapshots = len(fabric.sent.snapshots)
    fabric.clock.now += SETTLE
    fabric.discover()
    fabric.place()
    fabric.packet_in(LEAF_A, 5, arp_frame(frames.ARP_REQUEST, MAC_A, IP_A, IP_A))
    assert fabric.sent.packets == [] and fabric.sent.publishes == []
    assert len(fabric.sent.snapshots) == snapshots  # none new: the API keeps the last one
    assert [delay for delay, _ in fabric.sent.scheduled] == [LLDP_INTERVAL, 0.5]
    # Turned on again: every switch is handed its inputs anew.
    fabric.set_policy(policy())
    assert fabric.sent.publishes == [{LEAF_A}]
    assert fabric.inputs(LEAF_A).edge_ports == {UPLINK, 5, 6}


def test_a_switch_gone_takes_its_links_and_hosts_and_is_handed_nothing_more(
    fabric: Fabric,
) -> None:
    two_spines(fabric)
    fabric.gone(LEAF_B)
    topology = fabric.topology
    assert LEAF_B not in topology.switches
    assert all(LEAF_B not in (link.src.dpid, link.dst.dpid) for link in topology.links)
    assert [host.mac for host in topology.hosts] == [MAC_A]
    assert fabric.sent.publishes == [{SPINE, 2, LEAF_A}]
    assert LEAF_B not in fabric.sent.everyone


def test_an_observer_that_fails_does_not_stop_the_others(fabric: Fabric) -> None:
    class Broken:
        def fabric_changed(self, snapshot: FabricSnapshot) -> None:
            raise RuntimeError("down")

        def fabric_events(self, events: list[FabricEvent]) -> None:
            raise RuntimeError("down")

    # The owner keeps the list it was given: an observer added later is told too.
    fabric.observers.insert(0, Broken())
    fabric.ports(SPINE, spine_ports())
    fabric.ports(LEAF_A, leaf_ports(LEAF_A))
    cable(fabric, *uplink(LEAF_A))
    fabric.discover()
    assert [event.data["op"] for event in fabric.sent.events] == ["up"]
    assert fabric.snapshot.links


def test_with_a_clock_unstamped_events_are_stamped_when_handled() -> None:
    """As the switch actors do: a sender may leave the time out, and the owner's own ticks
    are told unstamped, so a round that runs late is dated when it runs."""
    readings = iter([T0, T0 + SETTLE, T0 + SETTLE + 1.0])
    scheduled: list[tuple[float, FabricMessage]] = []
    published: list[dict[int, frozenset[int]]] = []
    owner = FabricOwner(
        policy(),
        send_packet=lambda *_: None,
        publish=lambda dpids, inputs: published.append(
            {dpid: inputs[dpid].edge_ports for dpid in dpids}
        ),
        schedule=lambda delay, event: scheduled.append((delay, event)),
        metrics=ControllerMetrics(registry=CollectorRegistry()),
        clock=lambda: next(readings),
    )
    owner.receive(SwitchPorts(LEAF_A, tuple(leaf_ports(LEAF_A))))  # up at T0
    owner.receive(DiscoveryTick())  # handled at T0 + SETTLE: the ports have settled
    assert published == [{LEAF_A: frozenset()}, {LEAF_A: frozenset({UPLINK, 5, 6})}]
    [(delay, tick)] = scheduled
    assert delay == LLDP_INTERVAL
    assert isinstance(tick, DiscoveryTick) and math.isnan(tick.now)


def test_without_a_clock_an_unstamped_event_is_refused(fabric: Fabric) -> None:
    with pytest.raises(ValueError, match="without a time"):
        fabric.tell(DiscoveryTick())


def test_port_rates_of_fabric_ports_are_link_load_metrics_and_placement_input(
    fabric: Fabric,
) -> None:
    two_spines(fabric)
    fabric.rates(LEAF_A, {SPINE: 4e8, 5: 9e8})  # uplink to spine 1, and a host port
    sample = fabric.metrics.registry.get_sample_value
    uplink_labels = {"switch": f"{LEAF_A:016x}", "port": f"s{LEAF_A}-eth{SPINE}"}
    assert sample("flowlane_link_tx_bits_per_second", uplink_labels) == 4e8
    assert sample("flowlane_link_utilization_ratio", uplink_labels) == pytest.approx(0.4)
    host_labels = {"switch": f"{LEAF_A:016x}", "port": f"s{LEAF_A}-eth5"}
    assert sample("flowlane_link_tx_bits_per_second", host_labels) is None
    # The loaded uplink is avoided: the elephant goes by spine 2.
    fabric.flows(LEAF_A, [observed(DATA, 9e6)])
    fabric.place()
    assert _spine_of(fabric) == 2
    fabric.discover()
    [loaded] = [view for view in fabric.snapshot.links if view.tx_bps]
    assert (loaded.src.ref, loaded.tx_bps, loaded.utilization) == (
        PortRef(LEAF_A, SPINE),
        4e8,
        pytest.approx(0.4),
    )


def test_start_asks_for_the_first_rounds_at_once(fabric: Fabric) -> None:
    fabric.owner.start(fabric.clock.now)
    assert fabric.sent.scheduled == [
        (0.0, DiscoveryTick(fabric.clock.now)),
        (0.0, PlacementTick(fabric.clock.now)),
    ]
    with pytest.raises(ValueError, match="needs a time"):
        fabric.owner.start()
