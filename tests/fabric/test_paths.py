"""Shortest paths, ECMP next hops and the flood tree on leaf-spine topologies."""

from __future__ import annotations

import time

import networkx as nx
import pytest

from controller.fabric.model import Link, PortRef, Topology
from controller.fabric.paths import (
    FabricGraph,
    flood_tree,
    next_hops,
    next_hops_to,
    path_links,
    pinned_paths,
    reverse_path,
    shortest_paths,
)
from controller.flowid import FlowId


def spine(index: int) -> int:
    """Spine ``index`` (1-based) has dpid ``index``; its port ``i`` faces leaf ``i``."""
    return index


def leaf(index: int) -> int:
    """Leaf ``index`` (1-based) has dpid ``100 + index``; its port ``j`` faces spine ``j``."""
    return 100 + index


def both(a: PortRef, b: PortRef) -> tuple[Link, Link]:
    return Link(a, b), Link(b, a)


def cable(leaf_index: int, spine_index: int) -> tuple[Link, Link]:
    return both(PortRef(leaf(leaf_index), spine_index), PortRef(spine(spine_index), leaf_index))


def leaf_spine(spines: int, leaves: int) -> Topology:
    topology = Topology()
    for s in range(1, spines + 1):
        topology = topology.with_switch(spine(s))
    for lf in range(1, leaves + 1):
        topology = topology.with_switch(leaf(lf))
        for s in range(1, spines + 1):
            for link in cable(lf, s):
                topology = topology.with_link(link)
    return topology


def tree_edges(topology: Topology) -> nx.MultiGraph[int]:
    """The flood tree as an undirected multigraph: one edge per usable cable between tree ports."""
    tree = flood_tree(topology)
    graph: nx.MultiGraph[int] = nx.MultiGraph()
    graph.add_nodes_from(topology.switches)
    for link in topology.usable_links:
        if link.src < link.dst and (
            link.src.port in tree[link.src.dpid] and link.dst.port in tree[link.dst.dpid]
        ):
            graph.add_edge(link.src.dpid, link.dst.dpid)
    return graph


# --------------------------------------------------------------------------------------------
# next hops
# --------------------------------------------------------------------------------------------


def test_leaves_spread_over_every_spine_and_spines_go_straight_down() -> None:
    topology = leaf_spine(2, 3)
    hops = next_hops(topology, leaf(1))
    assert hops == {
        leaf(2): (1, 2),
        leaf(3): (1, 2),
        spine(1): (1,),
        spine(2): (1,),
    }
    assert leaf(1) not in hops


def test_a_cut_cable_moves_traffic_to_the_other_spine_and_around() -> None:
    topology = leaf_spine(2, 3).without_links(cable(3, 1))
    hops = next_hops(topology, leaf(3))
    assert hops[leaf(1)] == (2,)
    assert hops[leaf(2)] == (2,)
    assert hops[spine(2)] == (3,)
    # spine 1 no longer reaches leaf 3 directly: down to either other leaf, up to spine 2
    assert hops[spine(1)] == (1, 2)
    paths = shortest_paths(topology, spine(1), leaf(3))
    assert paths == (
        ((spine(1), 1), (leaf(1), 2), (spine(2), 3)),
        ((spine(1), 2), (leaf(2), 2), (spine(2), 3)),
    )
    assert {len(path) for path in paths} == {3}


def test_a_half_known_link_carries_nothing() -> None:
    # spine 1 -> leaf 1 is not (or no longer) seen; leaf 1 -> spine 1 still is
    topology = leaf_spine(2, 3).without_links([Link(PortRef(spine(1), 1), PortRef(leaf(1), 1))])
    assert next_hops(topology, leaf(2))[leaf(1)] == (2,)
    to_leaf1 = next_hops(topology, leaf(1))
    assert to_leaf1[leaf(2)] == (2,)
    assert to_leaf1[spine(1)] == (2, 3)  # around, through leaf 2 or 3 and spine 2
    assert all((leaf(1), 1) not in path for path in shortest_paths(topology, leaf(1), leaf(3)))


def test_a_link_to_an_unknown_switch_is_not_usable() -> None:
    topology = leaf_spine(1, 2).without_switch(spine(1))
    topology = topology.with_link(Link(PortRef(leaf(1), 1), PortRef(spine(1), 1)))
    topology = topology.with_link(Link(PortRef(spine(1), 1), PortRef(leaf(1), 1)))
    assert next_hops(topology, leaf(1)) == {}
    assert shortest_paths(topology, leaf(2), leaf(1)) == ()


def test_parallel_cables_are_distinct_next_hops_and_paths() -> None:
    topology = leaf_spine(2, 2)
    for link in both(PortRef(leaf(1), 3), PortRef(spine(1), 4)):
        topology = topology.with_link(link)
    assert next_hops(topology, leaf(1))[spine(1)] == (1, 4)
    assert next_hops(topology, leaf(2))[leaf(1)] == (1, 2, 3)
    paths = shortest_paths(topology, leaf(2), leaf(1))
    assert paths == (
        ((leaf(2), 1), (spine(1), 1)),
        ((leaf(2), 1), (spine(1), 4)),
        ((leaf(2), 2), (spine(2), 1)),
    )
    crossed = [path_links(topology, path) for path in paths]
    assert crossed[0][1] == Link(PortRef(spine(1), 1), PortRef(leaf(1), 1))
    assert crossed[1][1] == Link(PortRef(spine(1), 4), PortRef(leaf(1), 3))
    assert len({links for links in crossed}) == 3


def test_unreachable_switches_are_absent() -> None:
    topology = leaf_spine(2, 2).with_switch(leaf(9))
    assert leaf(9) not in next_hops(topology, leaf(1))
    assert next_hops(topology, leaf(9)) == {}
    assert next_hops(topology, 12345) == {}


# --------------------------------------------------------------------------------------------
# shortest paths
# --------------------------------------------------------------------------------------------


def test_every_shortest_path_in_order() -> None:
    topology = leaf_spine(2, 4)
    paths = shortest_paths(topology, leaf(1), leaf(4))
    assert paths == (((leaf(1), 1), (spine(1), 4)), ((leaf(1), 2), (spine(2), 4)))
    assert shortest_paths(topology, spine(1), spine(2)) == tuple(
        ((spine(1), n), (leaf(n), 2)) for n in range(1, 5)
    )
    assert shortest_paths(topology, spine(1), spine(2), limit=2) == tuple(
        ((spine(1), n), (leaf(n), 2)) for n in range(1, 3)
    )
    assert shortest_paths(topology, spine(1), spine(2), limit=0) == ()


def test_no_path_to_self_or_to_the_unreachable() -> None:
    topology = leaf_spine(2, 4).with_switch(leaf(9))
    assert shortest_paths(topology, leaf(1), leaf(1)) == ()
    assert shortest_paths(topology, leaf(1), leaf(9)) == ()
    assert shortest_paths(topology, leaf(9), leaf(1)) == ()


def test_path_links_follow_the_path() -> None:
    topology = leaf_spine(2, 4)
    path = ((leaf(1), 2), (spine(2), 4))
    assert path_links(topology, path) == (
        Link(PortRef(leaf(1), 2), PortRef(spine(2), 1)),
        Link(PortRef(spine(2), 4), PortRef(leaf(4), 2)),
    )
    assert path_links(topology, ()) == ()
    with pytest.raises(KeyError):
        path_links(topology, ((leaf(1), 7),))  # no link on that port
    with pytest.raises(ValueError, match="does not lead"):
        path_links(topology, ((leaf(1), 1), (spine(2), 4)))  # port 1 goes to spine 1
    half = topology.without_links([Link(PortRef(spine(2), 4), PortRef(leaf(4), 2))])
    with pytest.raises(KeyError):
        path_links(half, path)


# --------------------------------------------------------------------------------------------
# flood tree
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("spines", "leaves"), [(2, 3), (2, 4), (4, 6)])
def test_flood_tree_spans_every_switch_without_a_loop(spines: int, leaves: int) -> None:
    topology = leaf_spine(spines, leaves)
    graph = tree_edges(topology)
    assert graph.number_of_edges() == len(topology.switches) - 1
    assert nx.is_tree(graph)
    tree = flood_tree(topology)
    assert set(tree) == topology.switches
    assert all(tree[dpid] <= topology.fabric_ports(dpid) for dpid in tree)


def test_flood_tree_is_grown_from_the_lowest_dpid_and_lowest_ports() -> None:
    tree = flood_tree(leaf_spine(2, 3))
    assert tree == {
        spine(1): frozenset({1, 2, 3}),
        spine(2): frozenset({1}),
        leaf(1): frozenset({1, 2}),
        leaf(2): frozenset({1}),
        leaf(3): frozenset({1}),
    }


def test_flood_tree_is_deterministic_whatever_the_discovery_order() -> None:
    forward = leaf_spine(2, 4)
    backward = Topology()
    for link in sorted(forward.links, reverse=True):
        backward = backward.with_link(link)
    for dpid in sorted(forward.switches, reverse=True):
        backward = backward.with_switch(dpid)
    assert flood_tree(backward) == flood_tree(forward)
    assert flood_tree(forward) == flood_tree(forward)


def test_flood_tree_avoids_half_known_links_and_parallel_cables() -> None:
    topology = leaf_spine(2, 3).without_links([Link(PortRef(spine(1), 1), PortRef(leaf(1), 1))])
    for link in both(PortRef(leaf(2), 3), PortRef(spine(1), 4)):
        topology = topology.with_link(link)
    tree = flood_tree(topology)
    assert 1 not in tree[leaf(1)] and 1 not in tree[spine(1)]
    assert 3 not in tree[leaf(2)] and 4 not in tree[spine(1)]  # one cable per pair of switches
    assert nx.is_tree(tree_edges(topology))


def test_a_disconnected_fabric_gets_one_tree_per_part() -> None:
    topology = leaf_spine(1, 2).with_switch(leaf(8)).with_switch(leaf(9))
    for link in both(PortRef(leaf(8), 5), PortRef(leaf(9), 6)):
        topology = topology.with_link(link)
    topology = topology.with_switch(77)
    tree = flood_tree(topology)
    assert tree[leaf(8)] == frozenset({5}) and tree[leaf(9)] == frozenset({6})
    assert tree[77] == frozenset()
    assert nx.is_forest(tree_edges(topology))
    assert flood_tree(Topology()) == {}


# --------------------------------------------------------------------------------------------
# scale
# --------------------------------------------------------------------------------------------


def test_a_16_leaf_8_spine_fabric_plans_every_destination_in_milliseconds() -> None:
    topology = leaf_spine(8, 16)
    started = time.perf_counter()
    every = next_hops_to(topology, topology.switches)
    tree = flood_tree(topology)
    elapsed = time.perf_counter() - started
    assert elapsed < 0.2, f"{elapsed * 1000:.1f} ms"
    assert every[leaf(1)][leaf(16)] == tuple(range(1, 9))
    assert every[leaf(1)][spine(3)] == (1,)
    assert len(every) == 24 and all(len(hops) == 23 for hops in every.values())
    assert every == {dst: next_hops(topology, dst) for dst in topology.switches}
    assert sum(len(ports) for ports in tree.values()) == 2 * 23
    started = time.perf_counter()
    paths = shortest_paths(topology, leaf(1), leaf(16))
    assert time.perf_counter() - started < 0.05
    assert len(paths) == 8


def test_one_index_answers_like_the_functions() -> None:
    topology = leaf_spine(2, 4).without_links(cable(4, 1))
    graph = FabricGraph.of(topology)
    for dst in topology.switches:
        assert graph.next_hops(dst) == next_hops(topology, dst)
        for dpid in topology.switches:
            assert graph.next_hops_at(dpid, dst) == next_hops(topology, dst).get(dpid, ())
    assert graph.flood_tree() == flood_tree(topology)
    assert graph.shortest_paths(leaf(1), leaf(4)) == shortest_paths(topology, leaf(1), leaf(4))
    assert graph.next_hops_at(leaf(1), 12345) == ()


def test_reverse_path_crosses_the_same_links_backwards() -> None:
    topology = _leaf_spine_for_reverse()
    path = shortest_paths(topology, 0x101, 0x102)[0]
    back = reverse_path(topology, path)
    assert back is not None
    forward_links = path_links(topology, path)
    assert path_links(topology, back) == tuple(link.reversed() for link in reversed(forward_links))
    assert back[0][0] == 0x102  # starts at the destination switch


def test_pinned_tcp_flows_get_their_acks_pinned_backwards_and_udp_flows_do_not() -> None:
    topology = _leaf_spine_for_reverse()
    path = shortest_paths(topology, 0x101, 0x102)[0]
    tcp = FlowId(0x0800, 6, 0x0A000001, 0x0A000002, 40000, 5201)
    udp = FlowId(0x0800, 17, 0x0A000001, 0x0A000002, 40000, 4791)
    paths = pinned_paths(topology, {tcp: path, udp: path})
    assert paths[tcp] == paths[udp] == path
    assert paths[tcp.reversed()] == reverse_path(topology, path)
    assert udp.reversed() not in paths
    # a reverse direction placed on its own keeps its own path
    own = shortest_paths(topology, 0x102, 0x101)[-1]
    assert pinned_paths(topology, {tcp: path, tcp.reversed(): own})[tcp.reversed()] == own


def test_reverse_path_of_a_broken_path_is_none() -> None:
    topology = _leaf_spine_for_reverse()
    path = shortest_paths(topology, 0x101, 0x102)[0]
    first = path_links(topology, path)[0]
    assert reverse_path(topology.without_links([first, first.reversed()]), path) is None


def _leaf_spine_for_reverse() -> Topology:
    topology = Topology()
    for dpid in (0x101, 0x102, 0x201, 0x202):
        topology = topology.with_switch(dpid)
    for leaf_port, leaf in ((3, 0x101), (3, 0x102)):
        for offset, spine in enumerate((0x201, 0x202)):
            spine_port = leaf & 0xF
            a, b = PortRef(leaf, leaf_port + offset), PortRef(spine, spine_port)
            topology = topology.with_link(Link(a, b)).with_link(Link(b, a))
    return topology
