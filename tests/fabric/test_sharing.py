"""What several controller instances share (``controller.fabric.sharing``), on small
simulated topologies: a leaf this instance follows, a leaf only another instance
follows, one spine between them."""

from __future__ import annotations

from types import MappingProxyType

from controller.fabric.model import Host, Link, PortRef, Topology
from controller.fabric.placement import Pin
from controller.fabric.sharing import (
    FabricOffer,
    SharedHost,
    SharedPin,
    attached_records,
    build_offer,
    inherited_pins,
    local_pins,
    merge_shared_hosts,
    offer_changed,
    offered_hosts,
    offered_pins,
    pin_paths,
    same_paths,
)
from controller.flowid import FlowId

SPINE = 1
LEAF_A = 11
"""Followed here: port 1 faces the spine, ports 3 and 4 are edge ports."""
LEAF_B = 12
"""Not followed here (another instance is connected to it): port 1 faces the spine."""
MAC_1, MAC_2, MAC_3 = 0x0A0000000001, 0x0A0000000002, 0x0A0000000003
IP_1, IP_2, IP_3 = 0x0A000001, 0x0A000002, 0x0A000003

FOLLOWED = {LEAF_A: frozenset({1, 3, 4})}
"""This instance follows leaf A, whose ports 1, 3 and 4 are up."""


def fabric(*hosts: Host) -> Topology:
    """Both leaves cabled to the spine (leaf port 1, spine port = leaf - 10), with ``hosts``."""
    topology = Topology(switches=frozenset({SPINE, LEAF_A, LEAF_B}))
    for leaf in (LEAF_A, LEAF_B):
        a, b = PortRef(leaf, 1), PortRef(SPINE, leaf - 10)
        topology = topology.with_link(Link(a, b)).with_link(Link(b, a))
    for host in hosts:
        topology = topology.with_host(host)
    return topology


def flow(n: int) -> FlowId:
    return FlowId(0x0800, 6, IP_1, IP_2, 40000 + n, 5201)


A_TO_B = ((LEAF_A, 1), (SPINE, 2), (LEAF_B, 3))
B_TO_A = ((LEAF_B, 1), (SPINE, 1), (LEAF_A, 3))


# ---- hosts --------------------------------------------------------------------------------


def test_only_records_of_switches_some_instance_is_connected_to_count() -> None:
    records = {
        LEAF_A: (SharedHost(MAC_1, 3),),
        LEAF_B: (SharedHost(MAC_2, 3),),
    }
    assert attached_records(records, frozenset({LEAF_B})) == {LEAF_B: (SharedHost(MAC_2, 3),)}
    assert attached_records(records, frozenset()) == {}
    assert attached_records(records, None) == records  # not known: every record counts


def test_a_host_learned_at_a_followed_switch_keeps_this_instances_view() -> None:
    here = Host(MAC_1, PortRef(LEAF_A, 3), IP_1)
    merged = merge_shared_hosts(fabric(here), FOLLOWED, {LEAF_A: (SharedHost(MAC_1, 4, IP_2),)})
    assert merged.hosts == (here,)


def test_a_record_gives_its_address_to_a_host_known_here_at_the_same_port_without_one() -> None:
    here = Host(MAC_1, PortRef(LEAF_A, 3))
    merged = merge_shared_hosts(fabric(here), FOLLOWED, {LEAF_A: (SharedHost(MAC_1, 3, IP_1),)})
    assert merged.hosts == (Host(MAC_1, PortRef(LEAF_A, 3), IP_1),)


def test_an_unknown_host_at_an_up_edge_port_of_a_followed_switch_is_adopted() -> None:
    merged = merge_shared_hosts(fabric(), FOLLOWED, {LEAF_A: (SharedHost(MAC_1, 4, IP_1),)})
    assert merged.hosts == (Host(MAC_1, PortRef(LEAF_A, 4), IP_1),)


def test_a_record_of_a_down_port_at_a_followed_switch_is_older_than_its_port_status() -> None:
    down = {LEAF_A: frozenset({1, 3})}  # port 4 went down here since the record was written
    records = {LEAF_A: (SharedHost(MAC_1, 4, IP_1), SharedHost(MAC_2, 7, IP_2))}  # 7: unknown
    assert merge_shared_hosts(fabric(), down, records).hosts == ()


def test_a_record_of_a_fabric_port_at_a_followed_switch_is_not_adopted() -> None:
    records = {LEAF_A: (SharedHost(MAC_1, 1, IP_1),)}  # port 1 is up and faces the spine
    assert merge_shared_hosts(fabric(), FOLLOWED, records).hosts == ()


def test_an_address_another_mac_owns_at_a_followed_switch_is_not_taken() -> None:
    owner = Host(MAC_1, PortRef(LEAF_A, 3), IP_1)
    records = {LEAF_A: (SharedHost(MAC_2, 4, IP_1),)}
    assert merge_shared_hosts(fabric(owner), FOLLOWED, records).hosts == (owner,)


def test_at_an_unfollowed_switch_its_masters_record_replaces_what_was_known() -> None:
    moved = Host(MAC_1, PortRef(LEAF_B, 3), IP_1)
    gone = Host(MAC_2, PortRef(LEAF_B, 4), IP_2)
    elsewhere = Host(MAC_3, PortRef(LEAF_A, 3), IP_3)  # at a followed switch: untouched
    records = {LEAF_B: (SharedHost(MAC_1, 4, IP_1),)}
    merged = merge_shared_hosts(fabric(moved, gone, elsewhere), FOLLOWED, records)
    assert merged.hosts == (Host(MAC_1, PortRef(LEAF_B, 4), IP_1), elsewhere)


def test_an_empty_record_of_an_unfollowed_switch_removes_its_hosts() -> None:
    known = Host(MAC_1, PortRef(LEAF_B, 3), IP_1)
    assert merge_shared_hosts(fabric(known), FOLLOWED, {LEAF_B: ()}).hosts == ()
    # A switch with no record is left as it is: only a record says what is at a switch.
    assert merge_shared_hosts(fabric(known), FOLLOWED, {}).hosts == (known,)


def test_a_host_learned_here_at_a_followed_switch_stands_against_an_unfollowed_record() -> None:
    here = Host(MAC_1, PortRef(LEAF_A, 3), IP_1)
    records = {LEAF_B: (SharedHost(MAC_1, 3, IP_1),)}  # the other instance's stale view
    assert merge_shared_hosts(fabric(here), FOLLOWED, records).hosts == (here,)
    # Once this instance no longer follows leaf A, the record is all there is.
    merged = merge_shared_hosts(fabric(here), {}, records)
    assert merged.hosts == (Host(MAC_1, PortRef(LEAF_B, 3), IP_1),)


def test_at_an_unfollowed_switch_the_record_takes_an_address_from_another_mac() -> None:
    stale = Host(MAC_2, PortRef(LEAF_B, 4), IP_1)  # the address moved to MAC_1
    records = {LEAF_B: (SharedHost(MAC_1, 3, IP_1), SharedHost(MAC_2, 4))}
    merged = merge_shared_hosts(fabric(stale), FOLLOWED, records)
    assert merged.hosts == (Host(MAC_1, PortRef(LEAF_B, 3), IP_1), Host(MAC_2, PortRef(LEAF_B, 4)))


def test_merging_what_is_already_known_changes_nothing() -> None:
    known = fabric(Host(MAC_1, PortRef(LEAF_B, 3), IP_1), Host(MAC_2, PortRef(LEAF_A, 4), IP_2))
    records = {
        LEAF_A: (SharedHost(MAC_2, 4, IP_2),),
        LEAF_B: (SharedHost(MAC_1, 3, IP_1),),
    }
    assert merge_shared_hosts(known, FOLLOWED, records) == known


def test_offered_hosts_are_those_at_mastered_switches_with_a_record_for_each() -> None:
    topology = fabric(Host(MAC_1, PortRef(LEAF_A, 4), IP_1), Host(MAC_2, PortRef(LEAF_B, 3)))
    offered = offered_hosts(topology, frozenset({LEAF_A, SPINE}))
    assert offered == {SPINE: (), LEAF_A: (SharedHost(MAC_1, 4, IP_1),)}
    assert list(offered) == [SPINE, LEAF_A]  # sorted


# ---- pins ---------------------------------------------------------------------------------


def test_published_pins_are_converted_to_this_instances_clock() -> None:
    # Unix time 5000.0 is monotonic 100.0 here: a pin placed at 4990 was placed at 90.
    published = {
        LEAF_A: (SharedPin(flow(1), A_TO_B, 4990.0, 4995.5),),
        LEAF_B: (SharedPin(flow(2), B_TO_A, 4000.0),),
    }
    assert local_pins(published, now=100.0, wall=5000.0) == {
        LEAF_A: {flow(1): Pin(A_TO_B, 90.0, 95.5)},
        LEAF_B: {flow(2): Pin(B_TO_A, -900.0, None)},
    }


def test_a_switch_taken_over_brings_its_previous_masters_pins() -> None:
    shared = {
        LEAF_A: {flow(1): Pin(A_TO_B, 1.0), flow(2): Pin(A_TO_B, 2.0)},
        LEAF_B: {flow(3): Pin(B_TO_A, 3.0)},
    }
    # Leaf A taken; flow 2 already placed here: its own pin stands.
    assert inherited_pins(shared, {LEAF_A}, {flow(2)}) == {flow(1): Pin(A_TO_B, 1.0)}
    assert inherited_pins(shared, {LEAF_A, LEAF_B, SPINE}, ()) == {
        flow(1): Pin(A_TO_B, 1.0),
        flow(2): Pin(A_TO_B, 2.0),
        flow(3): Pin(B_TO_A, 3.0),
    }
    assert inherited_pins(shared, (), ()) == {}


def test_pin_paths_leave_times_out() -> None:
    before = {LEAF_A: {flow(1): Pin(A_TO_B, 1.0)}}
    later = {LEAF_A: {flow(1): Pin(A_TO_B, 9.0, 8.0)}}
    moved = {LEAF_A: {flow(1): Pin(((LEAF_A, 1), (SPINE, 2), (LEAF_B, 4)), 1.0)}}
    assert pin_paths(before) == pin_paths(later) == {LEAF_A: {flow(1): A_TO_B}}
    assert pin_paths(before) != pin_paths(moved)
    assert pin_paths(before) != pin_paths({LEAF_B: {flow(1): Pin(A_TO_B, 1.0)}})


def test_offered_pins_are_grouped_by_source_sorted_and_in_wall_time() -> None:
    placing = {
        flow(3): Pin(A_TO_B, 10.0),
        flow(1): Pin(A_TO_B, 20.0, 25.0),
        flow(2): Pin(B_TO_A, 30.0),
    }
    offered = offered_pins(frozenset({LEAF_A, LEAF_B, SPINE}), placing, lambda at: at + 1000.0)
    assert offered == {
        LEAF_A: (
            SharedPin(flow(1), A_TO_B, 1020.0, 1025.0),
            SharedPin(flow(3), A_TO_B, 1010.0, None),
        ),
        LEAF_B: (SharedPin(flow(2), B_TO_A, 1030.0, None),),
        SPINE: (),  # mastered, no pins: the record is emptied
    }


def test_same_paths_ignores_times_only() -> None:
    offer = {LEAF_A: (SharedPin(flow(1), A_TO_B, 1000.0),), SPINE: ()}
    later = {LEAF_A: (SharedPin(flow(1), A_TO_B, 1010.0, 1009.0),), SPINE: ()}
    assert same_paths(offer, later)
    assert not same_paths(offer, {LEAF_A: (SharedPin(flow(2), A_TO_B, 1000.0),), SPINE: ()})
    moved = ((LEAF_A, 1), (SPINE, 2), (LEAF_B, 4))
    assert not same_paths(offer, {LEAF_A: (SharedPin(flow(1), moved, 1000.0),), SPINE: ()})
    assert not same_paths(offer, {LEAF_A: (SharedPin(flow(1), A_TO_B, 1000.0),)})


# ---- the offer ----------------------------------------------------------------------------


def test_build_offer_holds_the_pins_and_hosts_of_mastered_switches() -> None:
    topology = fabric(Host(MAC_1, PortRef(LEAF_A, 3), IP_1), Host(MAC_2, PortRef(LEAF_B, 3)))
    placing = {flow(1): Pin(A_TO_B, 5.0)}
    offer = build_offer(
        topology, frozenset({LEAF_A}), placing, frozenset({LEAF_A, SPINE}), lambda at: at + 1e6
    )
    assert offer == FabricOffer(
        MappingProxyType({LEAF_A: (SharedPin(flow(1), A_TO_B, 1e6 + 5.0),)}),
        MappingProxyType({LEAF_A: (SharedHost(MAC_1, 3, IP_1),)}),
        frozenset({LEAF_A, SPINE}),
    )
    assert isinstance(offer.pins, MappingProxyType)  # the offer cannot be changed after
    assert isinstance(offer.hosts, MappingProxyType)


def test_an_offer_is_news_unless_only_its_times_moved() -> None:
    topology = fabric(Host(MAC_1, PortRef(LEAF_A, 3), IP_1))
    mastered, ready = frozenset({LEAF_A}), frozenset({LEAF_A})
    placing = {flow(1): Pin(A_TO_B, 5.0)}
    first = build_offer(topology, mastered, placing, ready, lambda at: at + 1000.0)
    assert offer_changed(None, first)
    later = build_offer(topology, mastered, placing, ready, lambda at: at + 1060.0)
    assert later != first
    assert not offer_changed(first, later)
    no_host = build_offer(fabric(), mastered, placing, ready, lambda at: at)
    assert offer_changed(first, no_host)
    not_ready = build_offer(topology, mastered, placing, frozenset(), lambda at: at + 1000.0)
    assert offer_changed(first, not_ready)
    unpinned = build_offer(topology, mastered, {}, ready, lambda at: at + 1000.0)
    assert offer_changed(first, unpinned)
