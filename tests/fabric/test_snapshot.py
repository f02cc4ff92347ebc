"""The fabric snapshot: built from a Topology, rebuilt into one, and its changes as events."""

from __future__ import annotations

import json
import math

import pytest

from controller.fabric.model import Host, Link, PortRef, Topology
from controller.fabric.snapshot import (
    FabricEvent,
    FabricSnapshot,
    PortView,
    build_snapshot,
    describe_event,
    mac_text,
    parse_mac,
    physical_links,
    pinned_flow,
    pinned_view,
    pins_of,
    placement_event,
    reroute_event,
    topology_events,
    topology_of,
)
from controller.flowid import FlowId

LEAF1, LEAF2, SPINE1, SPINE2 = 1, 2, 11, 12
H1 = Host(mac=0x1, at=PortRef(LEAF1, 1), ipv4=0x0A000001)
H2 = Host(mac=0x2, at=PortRef(LEAF2, 1), ipv4=0x0A000002)
GBIT = 1_000_000_000


def both(a: PortRef, b: PortRef) -> set[Link]:
    return {Link(a, b), Link(b, a)}


CABLES = (
    (PortRef(LEAF1, 3), PortRef(SPINE1, 1)),
    (PortRef(LEAF1, 4), PortRef(SPINE2, 1)),
    (PortRef(LEAF2, 3), PortRef(SPINE1, 2)),
    (PortRef(LEAF2, 4), PortRef(SPINE2, 2)),
)
LINKS = frozenset(link for a, b in CABLES for link in both(a, b))


def leaf_spine() -> Topology:
    return Topology(
        switches=frozenset({LEAF1, LEAF2, SPINE1, SPINE2}),
        links=LINKS,
        hosts=(H2, H1),
        capacity_bps={PortRef(LEAF1, 3): GBIT},
        default_capacity_bps=10 * GBIT,
    )


NAMES = {
    PortRef(LEAF1, 1): "s1-eth1",
    PortRef(LEAF1, 3): "s1-eth3",
    PortRef(SPINE1, 1): "s11-eth1",
}
ELEPHANT = FlowId(0x0800, 17, 0x0A000001, 0x0A000002, 5000, 4791)


def test_mac_text_round_trips() -> None:
    assert mac_text(1) == "00:00:00:00:00:01"
    assert mac_text(0xAABBCCDDEEFF) == "aa:bb:cc:dd:ee:ff"
    assert parse_mac("AA-BB-CC-DD-EE-FF") == 0xAABBCCDDEEFF
    assert parse_mac(mac_text(0x0123456789AB)) == 0x0123456789AB


@pytest.mark.parametrize(
    "text", ["", "00:00:00:00:01", "00:00:00:00:00:0g", "00:00-00:00:00:01", "0:0:0:0:0:1"]
)
def test_malformed_macs_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="expected a MAC"):
        parse_mac(text)


def test_the_snapshot_lists_every_direction_with_its_load() -> None:
    tx = {Link(PortRef(LEAF1, 3), PortRef(SPINE1, 1)): 250_000_000.0}
    snapshot = build_snapshot("ctl-1", 1000.0, leaf_spine(), NAMES, tx, [])
    assert snapshot.controller == "ctl-1"
    assert snapshot.updated == 1000.0
    assert snapshot.switches == [LEAF1, LEAF2, SPINE1, SPINE2]
    assert len(snapshot.links) == 8
    assert all(link.usable for link in snapshot.links)
    [loaded] = [link for link in snapshot.links if link.tx_bps > 0]
    assert (loaded.src.name, loaded.dst.name) == ("s1-eth3", "s11-eth1")
    assert loaded.capacity_bps == GBIT
    assert loaded.utilization == pytest.approx(0.25)
    back = next(link for link in snapshot.links if link.src.ref == PortRef(SPINE1, 1))
    assert back.capacity_bps == 10 * GBIT  # the default: spine ports have no entry
    assert (back.tx_bps, back.utilization) == (0.0, 0.0)
    assert back.src.name == "s11-eth1" and back.dst.name == "s1-eth3"


def test_hosts_show_their_addresses_as_text() -> None:
    snapshot = build_snapshot("ctl-1", 1000.0, leaf_spine(), NAMES, {}, [])
    first, second = snapshot.hosts
    assert (first.mac, first.ipv4, first.at.name) == ("00:00:00:00:00:01", "10.0.0.1", "s1-eth1")
    assert (second.mac, second.ipv4, second.at.name) == ("00:00:00:00:00:02", "10.0.0.2", None)


def test_a_link_seen_one_way_is_listed_but_not_usable() -> None:
    half = Link(PortRef(LEAF1, 5), PortRef(SPINE2, 9))
    topology = leaf_spine()
    topology = Topology(topology.switches, topology.links | {half}, topology.hosts)
    snapshot = build_snapshot("ctl-1", 1.0, topology, {}, {}, [])
    [listed] = [link for link in snapshot.links if link.src.ref == half.src]
    assert not listed.usable
    assert topology_of(snapshot).usable_links == topology.usable_links


@pytest.mark.parametrize("measured", [math.nan, math.inf, -5.0])
def test_a_rate_json_cannot_carry_is_no_load(measured: float) -> None:
    link = Link(PortRef(LEAF1, 3), PortRef(SPINE1, 1))
    snapshot = build_snapshot("c", 1.0, leaf_spine(), {}, {link: measured}, [])
    [view] = [v for v in snapshot.links if v.src.ref == link.src]
    assert (view.tx_bps, view.utilization) == (0.0, 0.0)
    json.loads(snapshot.model_dump_json())  # valid JSON: no NaN, no Infinity


def test_json_carries_dpids_as_numbers_and_hex_and_round_trips() -> None:
    pinned = pinned_view(
        ELEPHANT,
        traffic_class="training",
        rate_bps=8e8,
        demand_bps=1e9,
        since=990.0,
        path=((LEAF1, 3), (SPINE1, 2), (LEAF2, 1)),
        port_names=NAMES,
    )
    snapshot = build_snapshot("ctl-1", 1000.0, leaf_spine(), NAMES, {}, [pinned])
    document = json.loads(snapshot.model_dump_json())
    assert document["switches"] == [1, 2, 11, 12]
    assert document["hosts"][0]["at"] == {
        "dpid": 1,
        "dpid_hex": "0000000000000001",
        "port": 1,
        "name": "s1-eth1",
    }
    assert FabricSnapshot.model_validate_json(snapshot.model_dump_json()) == snapshot


def test_a_pinned_view_describes_the_flow_and_its_path() -> None:
    pinned = pinned_view(
        ELEPHANT,
        traffic_class="training",
        rate_bps=8e8,
        demand_bps=math.nan,
        since=990.0,
        path=((LEAF1, 3), (SPINE1, 2)),
        port_names=NAMES,
    )
    assert pinned.flow == "udp 10.0.0.1:5000 > 10.0.0.2:4791"
    assert (pinned.protocol, pinned.src, pinned.dst) == ("udp", "10.0.0.1", "10.0.0.2")
    assert (pinned.src_port, pinned.dst_port) == (5000, 4791)
    assert pinned.demand_bps == 0.0
    assert [(hop.dpid, hop.port, hop.name) for hop in pinned.path] == [
        (LEAF1, 3, "s1-eth3"),
        (SPINE1, 2, None),
    ]


@pytest.mark.parametrize(
    "flow",
    [
        ELEPHANT,
        FlowId(0x0800, 6, 0x0A000001, 0x0A000002, 40000, 5201),
        FlowId(0x86DD, 6, 0x20010DB8 << 96 | 1, 0x20010DB8 << 96 | 2, 40000, 5201),
    ],
)
def test_pins_read_back_from_a_snapshot_are_the_flows_and_paths_placed(flow: FlowId) -> None:
    path = ((LEAF1, 3), (SPINE1, 2), (LEAF2, 1))
    pinned = pinned_view(
        flow,
        traffic_class="training",
        rate_bps=1e8,
        demand_bps=2e8,
        since=1.0,
        path=path,
        port_names=NAMES,
    )
    snapshot = build_snapshot("c", 1.0, leaf_spine(), NAMES, {}, [pinned])
    restored = FabricSnapshot.model_validate_json(snapshot.model_dump_json())
    assert pinned_flow(restored.pinned[0]) == flow
    assert pins_of(restored) == {flow: path}


def test_topology_of_rebuilds_what_the_snapshot_was_built_from() -> None:
    topology = leaf_spine()
    rebuilt = topology_of(build_snapshot("ctl-1", 1.0, topology, NAMES, {}, []))
    assert rebuilt.switches == topology.switches
    assert rebuilt.links == topology.links
    assert rebuilt.usable_links == topology.usable_links
    assert rebuilt.hosts == topology.hosts
    for link in topology.links:
        assert rebuilt.capacity(link.src) == topology.capacity(link.src)


# --------------------------------------------------------------------------------------------
# events
# --------------------------------------------------------------------------------------------


def test_no_change_no_event() -> None:
    assert topology_events(leaf_spine(), leaf_spine()) == []


def test_a_link_comes_up_once_both_directions_are_known() -> None:
    before = leaf_spine()
    a, b = PortRef(LEAF1, 5), PortRef(SPINE2, 5)
    one_way = before.with_link(Link(a, b))
    assert topology_events(before, one_way) == []
    both_ways = one_way.with_link(Link(b, a))
    assert topology_events(one_way, both_ways) == [
        FabricEvent("link", {"op": "up", "a": str(a), "b": str(b)})
    ]


def test_a_port_down_takes_the_link_down_once() -> None:
    before = leaf_spine()
    after = before.without_port(PortRef(SPINE1, 2))
    assert topology_events(before, after) == [
        FabricEvent("link", {"op": "down", "a": "0000000000000002:3", "b": "000000000000000b:2"})
    ]


def test_a_switch_leaving_takes_each_of_its_links_down() -> None:
    events = topology_events(leaf_spine(), leaf_spine().without_switch(SPINE2))
    assert [(e.kind, e.data["op"], e.data["b"]) for e in events] == [
        ("link", "down", "000000000000000c:1"),
        ("link", "down", "000000000000000c:2"),
    ]
    assert len(physical_links(leaf_spine().usable_links)) == 4


def test_hosts_learned_moved_addressed_and_gone() -> None:
    before = leaf_spine()
    h3 = Host(mac=0x3, at=PortRef(LEAF2, 2))
    after = (
        before.with_host(Host(mac=0x1, at=PortRef(LEAF2, 7), ipv4=H1.ipv4))  # moved
        .with_host(h3)  # learned
        .with_host(Host(mac=0x2, at=H2.at, ipv4=0x0A000009))  # new address, same port
    )
    after = Topology(after.switches, after.links, after.hosts, after.capacity_bps)
    assert [(e.kind, e.data) for e in topology_events(before, after)] == [
        (
            "host",
            {
                "op": "moved",
                "mac": "00:00:00:00:00:01",
                "ipv4": "10.0.0.1",
                "at": "0000000000000002:7",
                "from": "0000000000000001:1",
            },
        ),
        (
            "host",
            {
                "op": "addressed",
                "mac": "00:00:00:00:00:02",
                "ipv4": "10.0.0.9",
                "at": "0000000000000002:1",
                "previous_ipv4": "10.0.0.2",
            },
        ),
        (
            "host",
            {"op": "learned", "mac": "00:00:00:00:00:03", "ipv4": None, "at": "0000000000000002:2"},
        ),
    ]
    gone = topology_events(after, after.without_port(PortRef(LEAF2, 2)))
    assert [(e.data["op"], e.data["mac"]) for e in gone] == [("gone", "00:00:00:00:00:03")]


def test_event_data_is_flat_json() -> None:
    pinned = pinned_view(
        ELEPHANT,
        traffic_class="training",
        rate_bps=8e8,
        demand_bps=1e9,
        since=1.0,
        path=((LEAF1, 3), (SPINE1, 2)),
        port_names=NAMES,
    )
    events = [
        *topology_events(leaf_spine(), leaf_spine().without_switch(SPINE1)),
        placement_event("pinned", pinned, "elephant"),
        reroute_event(pinned, [PortView(dpid=LEAF1, port=4)], "link down"),
    ]
    for event in events:
        assert all(not isinstance(v, dict | list) for v in event.data.values())
        json.dumps(event.data)


def test_events_read_as_one_line_each() -> None:
    pinned = pinned_view(
        ELEPHANT,
        traffic_class="training",
        rate_bps=8e8,
        demand_bps=1e9,
        since=1.0,
        path=((LEAF1, 3), (SPINE1, 2)),
        port_names=NAMES,
    )
    [link] = topology_events(leaf_spine(), leaf_spine().without_port(PortRef(LEAF1, 3)))
    assert describe_event(link.kind, link.data) == (
        "link 0000000000000001:3 <-> 000000000000000b:1 down"
    )
    moved = Host(H1.mac, PortRef(LEAF2, 7), H1.ipv4)
    [event] = topology_events(leaf_spine(), leaf_spine().with_host(moved))
    assert describe_event(event.kind, event.data) == (
        "host 00:00:00:00:00:01 (10.0.0.1) moved to 0000000000000002:7, was at 0000000000000001:1"
    )
    [event] = topology_events(leaf_spine(), leaf_spine().without_port(H2.at))
    assert describe_event(event.kind, event.data) == (
        "host 00:00:00:00:00:02 (10.0.0.2) gone from 0000000000000002:1"
    )
    placed = placement_event("pinned", pinned, "least loaded")
    assert describe_event(placed.kind, placed.data) == (
        "udp 10.0.0.1:5000 > 10.0.0.2:4791 [training, 800Mbit/s] pinned:"
        " s1-eth3 > 000000000000000b:2 (least loaded)"
    )
    moved_flow = reroute_event(pinned, [PortView(dpid=LEAF1, port=4)], "link down")
    assert describe_event(moved_flow.kind, moved_flow.data) == (
        "udp 10.0.0.1:5000 > 10.0.0.2:4791 [training, 800Mbit/s] moved:"
        " 0000000000000001:4 -> s1-eth3 > 000000000000000b:2 (link down)"
    )
    assert describe_event("policy", {"version": 1}) is None
