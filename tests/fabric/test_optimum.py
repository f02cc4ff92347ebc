"""The fabric's optimum: multi-commodity LP over shortest paths, and max-min fair rates."""

from __future__ import annotations

import pytest

from controller.fabric.model import Link, PortRef, Topology
from controller.fabric.optimum import Commodity, max_min_fair, max_throughput

MBIT = 1_000_000
HOST_PORT = 10  # hosts attach at leaf ports 10, 11, ...


def spine(index: int) -> int:
    return 100 + index


def leaf_spine(spines: int, leaves: int, capacity: int, *, edges: bool = True) -> Topology:
    """Leaves 1..n, spines 101..; leaf port s faces spine s, spine port l faces leaf l.

    Every fabric port runs at ``capacity``, and so does every edge port unless
    ``edges`` is False (then they have the 10 Gbit/s default).
    """
    links: set[Link] = set()
    for s in range(1, spines + 1):
        for leaf in range(1, leaves + 1):
            up = Link(PortRef(leaf, s), PortRef(spine(s), leaf))
            links |= {up, up.reversed()}
    ports = {ref for link in links for ref in (link.src, link.dst)}
    if edges:
        ports |= {host(leaf, h) for leaf in range(1, leaves + 1) for h in range(4)}
    return Topology(
        switches=frozenset({*range(1, leaves + 1), *(spine(s) for s in range(1, spines + 1))}),
        links=frozenset(links),
        capacity_bps=dict.fromkeys(ports, capacity),
    )


def host(leaf: int, index: int) -> PortRef:
    return PortRef(leaf, HOST_PORT + index)


def colliding_eight() -> list[Commodity]:
    """Two flows leave and two arrive at every leaf of four; every host sends and receives once."""
    return [
        Commodity(host(leaf, h), host((leaf - 1 + h + 1) % 4 + 1, h))
        for leaf in range(1, 5)
        for h in (0, 1)
    ]


def spine_link_down(topology: Topology, leaf: int, s: int) -> Topology:
    return topology.without_port(PortRef(leaf, s))


def test_two_flows_between_two_leaves_use_both_spines() -> None:
    topology = leaf_spine(2, 2, 50 * MBIT, edges=False)  # only the uplinks limit
    flows = [Commodity(host(1, 0), host(2, 0)), Commodity(host(1, 1), host(2, 1))]
    assert max_throughput(topology, flows) == pytest.approx(100 * MBIT)


def test_one_flow_can_split_over_both_spines() -> None:
    topology = leaf_spine(2, 2, 50 * MBIT)
    fat_edge = topology.with_capacities({**topology.capacity_bps, host(2, 0): 1000 * MBIT})
    assert max_throughput(fat_edge, [Commodity(host(1, 0), host(2, 0))]) == pytest.approx(
        100 * MBIT
    )


def test_the_destination_edge_port_is_a_bottleneck_too() -> None:
    topology = leaf_spine(2, 2, 50 * MBIT)
    into_one_host = [Commodity(host(1, 0), host(2, 0)), Commodity(host(1, 1), host(2, 0))]
    assert max_throughput(topology, into_one_host) == pytest.approx(50 * MBIT)


def test_eight_colliding_flows_on_two_by_four_reach_every_link() -> None:
    assert max_throughput(leaf_spine(2, 4, 20 * MBIT), colliding_eight()) == pytest.approx(
        8 * 20 * MBIT
    )


def test_a_failed_spine_link_costs_what_it_carried() -> None:
    # Leaf 1 loses its link to spine 2 (both directions): its two outgoing flows share one
    # 20 Mbit uplink and its two incoming flows one downlink; the other four flows keep 20 each.
    topology = spine_link_down(leaf_spine(2, 4, 20 * MBIT), leaf=1, s=2)
    assert max_throughput(topology, colliding_eight()) == pytest.approx(6 * 20 * MBIT)
    two = spine_link_down(leaf_spine(2, 2, 50 * MBIT), leaf=1, s=2)
    pair = [Commodity(host(1, 0), host(2, 0)), Commodity(host(1, 1), host(2, 1))]
    assert max_throughput(two, pair) == pytest.approx(50 * MBIT)


def test_capacities_come_from_capacity_bps() -> None:
    topology = leaf_spine(2, 2, 50 * MBIT)
    slower = topology.with_capacities(
        {**topology.capacity_bps, PortRef(1, 1): 10 * MBIT, PortRef(1, 2): 30 * MBIT}
    )
    pair = [Commodity(host(1, 0), host(2, 0)), Commodity(host(1, 1), host(2, 1))]
    assert max_throughput(slower, pair) == pytest.approx(40 * MBIT)


def test_fixed_rate_flows_carry_at_most_their_rate() -> None:
    topology = leaf_spine(2, 2, 50 * MBIT)
    pair = [
        Commodity(host(1, 0), host(2, 0), limit_bps=8 * MBIT),
        Commodity(host(1, 1), host(2, 1)),
    ]
    assert max_throughput(topology, pair) == pytest.approx(58 * MBIT)


def test_flows_within_one_switch_and_unreachable_flows() -> None:
    topology = leaf_spine(2, 2, 50 * MBIT)
    local = Commodity(host(1, 0), host(1, 1))  # only the edge port limits it
    stranded = Commodity(host(1, 2), PortRef(99, 1))  # no such switch: no path, no rate
    assert max_throughput(topology, [local, stranded]) == pytest.approx(50 * MBIT)
    assert max_throughput(topology, []) == 0.0


def test_max_min_fair_shares_a_bottleneck_and_gives_the_rest_away() -> None:
    # Three flows from leaf 1 (two 50 Mbit uplinks): two go to one host (its 50 Mbit edge port
    # is their bottleneck, 25 each), the third takes what the uplinks leave: 50.
    topology = leaf_spine(2, 2, 50 * MBIT)
    flows = [
        Commodity(host(1, 0), host(2, 0)),
        Commodity(host(1, 1), host(2, 0)),
        Commodity(host(1, 2), host(2, 1)),
    ]
    assert max_min_fair(topology, flows) == [pytest.approx(r * MBIT) for r in (25, 25, 50)]


def test_max_min_fair_stops_fixed_rate_flows_at_their_rate() -> None:
    topology = leaf_spine(2, 2, 50 * MBIT)
    flows = [
        Commodity(host(1, 0), host(2, 0), limit_bps=8 * MBIT),
        Commodity(host(1, 1), host(2, 1)),
        Commodity(host(1, 2), host(2, 2)),
        Commodity(PortRef(99, 1), host(2, 3)),  # unreachable
    ]
    assert max_min_fair(topology, flows) == [
        pytest.approx(8 * MBIT),
        pytest.approx(46 * MBIT),
        pytest.approx(46 * MBIT),
        0.0,
    ]


def test_max_min_fair_of_the_colliding_eight_is_the_optimum_split_evenly() -> None:
    rates = max_min_fair(leaf_spine(2, 4, 20 * MBIT), colliding_eight())
    assert rates == [pytest.approx(20 * MBIT)] * 8


def ring(name: str, leaves: list[int], first_host: int = 0) -> list[Commodity]:
    """A ring all-reduce over workers on ``leaves`` in ring order, worker ``n`` at host index
    ``first_host + n`` of its leaf (no two workers on one host)."""
    workers = [host(leaf, first_host + n) for n, leaf in enumerate(leaves)]
    return [
        Commodity(a, b, None, name)
        for a, b in zip(workers, [*workers[1:], workers[0]], strict=True)
    ]


def test_a_ring_counts_once_at_its_rate() -> None:
    """Four hops over four leaves, each on links of its own: the ring moves at a link's rate,
    and that is its throughput (a run measures one hop's rate), not four links' worth."""
    topology = leaf_spine(2, 4, 10 * MBIT)
    assert max_throughput(topology, ring("a", [1, 2, 3, 4])) == pytest.approx(10 * MBIT)
    two = ring("a", [1, 2, 3, 4]) + ring("b", [1, 3, 2, 4], first_host=4)
    assert max_throughput(topology, two) == pytest.approx(20 * MBIT)


def test_a_ring_moves_at_its_slowest_hop() -> None:
    """Over one spine, ring a on leaves 1, 2, 1, 2 sends two hops up leaf 1's one uplink: each
    gets half, and so does the whole ring, although its other hops could carry a full link."""
    topology = leaf_spine(1, 2, 10 * MBIT)
    assert max_throughput(topology, ring("a", [1, 2, 1, 2])) == pytest.approx(5 * MBIT)
    # The same hops as independent flows: the bound counts each hop, and the slow ones' spare.
    hops = [Commodity(c.src, c.dst) for c in ring("a", [1, 2, 1, 2])]
    assert max_throughput(topology, hops) == pytest.approx(20 * MBIT)
