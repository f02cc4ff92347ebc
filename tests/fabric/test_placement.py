"""Placement of elephants: colliding flows spread out, pins hold still, failures move only
the flows they hit."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence

import pytest

from controller.fabric.model import Link, Path, PortRef, Topology
from controller.fabric.optimum import Commodity, max_throughput
from controller.fabric.paths import path_links, shortest_paths
from controller.fabric.placement import (
    ENDED,
    GONE,
    ONE_PATH,
    Elephant,
    Move,
    Pin,
    Placement,
    PlacementSettings,
    place,
)
from controller.flowid import ETH_TYPE_IPV4, IP_PROTO_TCP, IP_PROTO_UDP, FlowId

MBIT = 1_000_000
LINK = 20 * MBIT
NIC = 1000 * MBIT  # hosts are not the bottleneck: demands are far above any link
HOST_PORT = 10


def spine(index: int) -> int:
    return 100 + index


def leaf_spine(spines: int, leaves: int, capacity: int = LINK) -> Topology:
    """Leaves 1..n, spines 101..; leaf port s faces spine s, spine port l faces leaf l."""
    links: set[Link] = set()
    for s in range(1, spines + 1):
        for leaf in range(1, leaves + 1):
            up = Link(PortRef(leaf, s), PortRef(spine(s), leaf))
            links |= {up, up.reversed()}
    ports = {ref for link in links for ref in (link.src, link.dst)}
    ports |= {PortRef(leaf, HOST_PORT + h) for leaf in range(1, leaves + 1) for h in range(4)}
    return Topology(
        switches=frozenset({*range(1, leaves + 1), *(spine(s) for s in range(1, spines + 1))}),
        links=frozenset(links),
        capacity_bps=dict.fromkeys(ports, capacity),
    )


def flow_id(src_leaf: int, dst_leaf: int, port: int, proto: int = IP_PROTO_TCP) -> FlowId:
    return FlowId(ETH_TYPE_IPV4, proto, 0x0A000000 + src_leaf, 0x0A000000 + dst_leaf, port, 5201)


def colliding(
    ports: Sequence[int] = tuple(range(40000, 40008)),
    demand: float = NIC,
    proto: int = IP_PROTO_TCP,
) -> list[Elephant]:
    """Two elephants leave and two arrive at every leaf of four (leaf l sends to l+1 and l+2)."""
    pairs = [(leaf, (leaf - 1 + step) % 4 + 1) for leaf in range(1, 5) for step in (1, 2)]
    return [
        Elephant(flow_id(src, dst, port, proto), src, dst, demand_bps=demand, rate_bps=LINK / 2)
        for (src, dst), port in zip(pairs, ports, strict=True)
    ]


def measured(
    topology: Topology,
    paths: Mapping[FlowId, Path],
    rates: Mapping[FlowId, float] | None = None,
    other: Mapping[Link, float] | None = None,
) -> dict[Link, float]:
    """What port statistics would show: every flow's rate on its path's links, plus ``other``."""
    load: dict[Link, float] = dict(other or {})
    for flow, path in paths.items():
        for link in path_links(topology, path):
            load[link] = load.get(link, 0.0) + (rates[flow] if rates else 0.0)
    return load


def fair_rates(topology: Topology, paths: Mapping[FlowId, Path]) -> dict[FlowId, float]:
    """Each flow's rate when flows sharing a link split it equally (good enough for these tests)."""
    crowd = flows_per_link(topology, paths)
    return {
        flow: min(topology.capacity(link.src) / crowd[link] for link in path_links(topology, path))
        for flow, path in paths.items()
    }


def flows_per_link(topology: Topology, paths: Mapping[FlowId, Path]) -> Counter[Link]:
    return Counter(link for path in paths.values() for link in path_links(topology, path))


def pinned_paths(placement: Placement) -> dict[FlowId, Path]:
    return {flow: pin.path for flow, pin in placement.pins.items()}


def ecmp_hashed(
    topology: Topology, elephants: Sequence[Elephant], rng: random.Random | None = None
) -> dict[FlowId, Path]:
    """Where select groups put unpinned flows: the first path, or a random one."""
    paths = {}
    for e in elephants:
        candidates = shortest_paths(topology, e.src_dpid, e.dst_dpid)
        paths[e.flow] = rng.choice(candidates) if rng else candidates[0]
    return paths


def first_round(topology: Topology, elephants: Sequence[Elephant], now: float = 0.0) -> Placement:
    hashed = ecmp_hashed(topology, elephants)
    load = measured(topology, hashed, fair_rates(topology, hashed))
    return place(topology, elephants, {}, load, now)


def steady_load(
    topology: Topology, placement: Placement, now: Topology | None = None
) -> dict[Link, float]:
    """The load a placement made on ``topology``, as read from the links ``now`` still has."""
    paths = pinned_paths(placement)
    load = measured(topology, paths, fair_rates(topology, paths))
    return {link: bps for link, bps in load.items() if now is None or link in now.usable_links}


# ---- spreading --------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(25))
def test_colliding_elephants_end_on_disjoint_uplinks_and_downlinks(seed: int) -> None:
    rng = random.Random(seed)
    topology = leaf_spine(2, 4)
    ports = rng.sample(range(40000, 41000), 8)  # flow order unrelated to the fabric's shape
    elephants = [  # NIC-limited estimates: the same share, give or take rounding
        Elephant(e.flow, e.src_dpid, e.dst_dpid, NIC * rng.uniform(0.99, 1.0), e.rate_bps)
        for e in colliding(ports)
    ]
    hashed = ecmp_hashed(topology, elephants, rng)
    load = measured(topology, hashed, fair_rates(topology, hashed))

    placement = place(topology, elephants, {}, load, now=0.0)

    assert set(placement.pins) == {e.flow for e in elephants}
    assert {move.reason for move in placement.moves} == {"placed"}
    crowd = flows_per_link(topology, pinned_paths(placement))
    assert max(crowd.values()) == 1  # every uplink and every downlink carries one flow
    aggregate = sum(fair_rates(topology, pinned_paths(placement)).values())
    commodities = [
        Commodity(PortRef(e.src_dpid, HOST_PORT), PortRef(e.dst_dpid, HOST_PORT + i % 2))
        for i, e in enumerate(elephants)
    ]
    assert aggregate == pytest.approx(max_throughput(topology, commodities)) == 8 * LINK


def test_fixed_rate_udp_elephants_are_spread_too() -> None:
    # RoCEv2-like flows at 12 Mbit/s: two on one 20 Mbit link would overflow it, and the
    # switch's hash put every one of them on spine 1.
    topology = leaf_spine(2, 4)
    udp = [
        Elephant(e.flow, e.src_dpid, e.dst_dpid, demand_bps=12 * MBIT, rate_bps=10 * MBIT)
        for e in colliding(proto=IP_PROTO_UDP)
    ]
    placement = first_round(topology, udp)
    crowd = flows_per_link(topology, pinned_paths(placement))
    assert max(crowd.values()) == 1


def test_an_elephant_avoids_a_link_busy_with_other_traffic() -> None:
    topology = leaf_spine(2, 2)
    (via_one, via_two) = shortest_paths(topology, 1, 2)
    busy = {path_links(topology, via_one)[1]: 15 * MBIT}  # spine 1 to leaf 2: mice, not ours
    elephant = Elephant(flow_id(1, 2, 1), 1, 2, demand_bps=NIC, rate_bps=5 * MBIT)
    placement = place(topology, [elephant], {}, busy, now=0.0)
    assert placement.pins[elephant.flow].path == via_two


def test_a_pinned_elephants_own_traffic_is_not_background() -> None:
    # The flow fills its link; that is no reason to leave it, even long after its hold.
    topology = leaf_spine(2, 2)
    via_one = shortest_paths(topology, 1, 2)[0]
    elephant = Elephant(flow_id(1, 2, 1), 1, 2, demand_bps=NIC, rate_bps=LINK)
    pins = {elephant.flow: Pin(via_one, since=0.0)}
    load = measured(topology, {elephant.flow: via_one}, {elephant.flow: LINK})
    placement = place(topology, [elephant], pins, load, now=100.0)
    assert placement.moves == ()
    assert placement.pins == pins


# ---- stability --------------------------------------------------------------------------------


def test_placing_its_own_output_again_moves_nothing() -> None:
    topology = leaf_spine(2, 4)
    elephants = colliding()
    placement = first_round(topology, elephants)
    again = place(topology, elephants, placement.pins, steady_load(topology, placement), now=60.0)
    assert again.moves == ()
    assert again.released == ()
    assert again.pins == placement.pins


@pytest.mark.parametrize("proto", [IP_PROTO_TCP, IP_PROTO_UDP])
def test_a_hundred_rounds_of_noisy_load_move_nothing(proto: int) -> None:
    rng = random.Random(proto)
    topology = leaf_spine(2, 4)
    demand = NIC if proto == IP_PROTO_TCP else 12 * MBIT
    elephants = colliding(demand=demand, proto=proto)
    placement = first_round(topology, elephants)
    paths = pinned_paths(placement)
    true_rates = fair_rates(topology, paths)
    for round_ in range(1, 101):
        noisy_rates = {flow: rate * rng.uniform(0.8, 1.2) for flow, rate in true_rates.items()}
        mice = {link: rng.uniform(0, 0.05) * LINK for link in topology.usable_links}
        load = {
            link: bps * rng.uniform(0.8, 1.2)
            for link, bps in measured(topology, paths, true_rates, mice).items()
        }
        noisy = [
            Elephant(e.flow, e.src_dpid, e.dst_dpid, e.demand_bps, noisy_rates[e.flow])
            for e in elephants
        ]
        following = place(topology, noisy, placement.pins, load, now=float(round_))
        assert following.moves == (), round_
        assert following.pins == placement.pins


def test_the_result_depends_only_on_the_arguments() -> None:
    topology = leaf_spine(2, 4)
    elephants = colliding()
    hashed = ecmp_hashed(topology, elephants)
    load = measured(topology, hashed, fair_rates(topology, hashed))
    one = place(topology, elephants, {}, load, now=0.0)
    reordered = place(topology, list(reversed(elephants)), {}, dict(reversed(load.items())), 0.0)
    assert one == reordered
    assert list(one.pins) == sorted(one.pins)


# ---- failures ---------------------------------------------------------------------------------


def test_a_link_down_replaces_only_the_flows_that_used_it_at_once() -> None:
    topology = leaf_spine(3, 4)
    elephants = colliding()
    placement = first_round(topology, elephants)
    before = pinned_paths(placement)
    failed = PortRef(1, 2)  # leaf 1's port to spine 2, both directions
    gone = {link for link in topology.links if failed in (link.src, link.dst)}
    assert any(set(path_links(topology, p)) & gone for p in before.values())
    hit = {flow for flow, path in before.items() if set(path_links(topology, path)) & gone}

    down = topology.without_port(failed)
    load = steady_load(topology, placement, now=down)
    after = place(down, elephants, placement.pins, load, now=1.0)

    assert {move.flow for move in after.moves} == hit
    assert all(move.reason == "link down" and move.old == before[move.flow] for move in after.moves)
    for flow, pin in after.pins.items():
        assert not set(path_links(down, pin.path)) & gone
        if flow not in hit:
            assert pin == placement.pins[flow]  # same path, same time: untouched
    assert after.released == ()


def test_a_link_back_up_rebalances_only_after_the_hold_and_only_the_flows_that_gain() -> None:
    # Leaf 1 sends three elephants to leaves 2, 3, 4 over three spines: one per spine.
    topology = leaf_spine(3, 4)
    elephants = [
        Elephant(flow_id(1, dst, 40000 + dst), 1, dst, demand_bps=NIC, rate_bps=LINK)
        for dst in (2, 3, 4)
    ]
    settings = PlacementSettings(hold_s=5.0)
    spread = first_round(topology, elephants, now=0.0)
    uplinks = {flow: pin.path[0] for flow, pin in spread.pins.items()}
    assert sorted(uplinks.values()) == [(1, 1), (1, 2), (1, 3)]

    # Spine 3's uplink fails at t=1: its flow joins another on a shared uplink.
    down = topology.without_port(PortRef(1, 3))
    load = steady_load(topology, spread, now=down)
    shared = place(down, elephants, spread.pins, load, 1.0, settings)
    assert [move.reason for move in shared.moves] == ["link down"]
    assert max(flows_per_link(down, pinned_paths(shared)).values()) == 2

    # The link is back at t=3: nobody has held its path for 5 s, so nothing moves.
    load = steady_load(down, shared)
    early = place(topology, elephants, shared.pins, load, now=3.0, settings=settings)
    assert early.moves == ()
    assert early.pins == shared.pins

    # At t=7 the hold has passed for all: one of the two sharing flows moves to spine 3.
    later = place(topology, elephants, shared.pins, load, now=7.0, settings=settings)
    assert len(later.moves) == 1
    (move,) = later.moves
    sharing = {f for f, pin in shared.pins.items() if pin.path[0] == shared.pins[move.flow].path[0]}
    assert move.reason == "rebalanced" and move.flow in sharing and len(sharing) == 2
    assert move.new[0] == (1, 3)
    assert later.pins[move.flow] == Pin(move.new, since=7.0)
    assert max(flows_per_link(topology, pinned_paths(later)).values()) == 1


def test_hold_and_gain_and_fit_each_keep_a_flow_where_it_is() -> None:
    topology = leaf_spine(2, 2)
    via_one, via_two = shortest_paths(topology, 1, 2)
    elephant = Elephant(flow_id(1, 2, 1), 1, 2, demand_bps=15 * MBIT, rate_bps=10 * MBIT)
    pins = {elephant.flow: Pin(via_one, since=10.0)}
    own = measured(topology, {elephant.flow: via_one}, {elephant.flow: 10 * MBIT})
    congested = {**own, path_links(topology, via_one)[0]: 20 * MBIT}  # 10 Mbit of mice beside it
    settings = PlacementSettings(hold_s=5.0, min_gain=0.10)

    held = place(topology, [elephant], pins, congested, now=14.9, settings=settings)
    assert held.moves == ()
    moved = place(topology, [elephant], pins, congested, now=15.0, settings=settings)
    assert moved.moves == (Move(elephant.flow, via_one, via_two, "rebalanced"),)

    # 6 Mbit of mice leave 14 of the 15 it wants, and the other path is 6 Mbit (30 %) better...
    some_mice = {**own, path_links(topology, via_one)[0]: 16 * MBIT}
    assert place(topology, [elephant], pins, some_mice, 60.0, settings).moves != ()
    # ...but with only 1 Mbit (5 % of the link) to gain, it stays.
    little = {**some_mice, path_links(topology, via_two)[0]: 5 * MBIT}
    assert place(topology, [elephant], pins, little, 60.0, settings).moves == ()
    # And a flow whose path fits its demand stays, whatever the other path offers.
    fits = Elephant(elephant.flow, 1, 2, demand_bps=8 * MBIT, rate_bps=8 * MBIT)
    assert place(topology, [fits], pins, congested, 60.0, settings).moves == ()


# ---- release ----------------------------------------------------------------------------------


def test_flows_that_ended_are_released() -> None:
    topology = leaf_spine(2, 4)
    elephants = colliding()
    placement = first_round(topology, elephants)
    after = place(topology, elephants[2:], placement.pins, steady_load(topology, placement), 9.0)
    assert after.released == tuple(sorted(e.flow for e in elephants[:2]))
    assert after.reasons == dict.fromkeys(after.released, GONE)
    assert set(after.pins) == {e.flow for e in elephants[2:]}


def test_flows_with_a_single_path_are_not_pinned_and_lose_their_pin() -> None:
    topology = leaf_spine(2, 2)
    local = Elephant(flow_id(1, 1, 2), 1, 1, demand_bps=NIC, rate_bps=LINK)
    across = Elephant(flow_id(1, 2, 1), 1, 2, demand_bps=NIC, rate_bps=LINK)
    placement = place(topology, [local, across], {}, {}, now=0.0)
    assert set(placement.pins) == {across.flow}

    one_spine_left = topology.without_port(PortRef(1, 1))
    after = place(one_spine_left, [local, across], placement.pins, {}, now=1.0)
    assert after.pins == {}
    assert after.released == (across.flow,)
    assert after.reasons == {across.flow: ONE_PATH}
    assert after.moves == ()


# ---- a pin ends with its flow -----------------------------------------------------------------

ROUND = 0.5
ENDS = PlacementSettings(min_rate_bps=200_000, release_after_s=30.0)
"""Placement's ``min_rate`` and detection's ``release_after``, as the controller passes them."""


def rounds(
    topology: Topology, elephants: Sequence[Elephant], pins: Mapping[FlowId, Pin], start: float
) -> list[tuple[float, Placement]]:
    """Placement every ``ROUND`` from ``start`` on, each round on the last one's pins, until
    nothing is pinned (or two minutes passed)."""
    results = []
    now = start
    while pins and now < start + 120:
        now += ROUND
        placement = place(topology, elephants, pins, {}, now, ENDS)
        results.append((now, placement))
        pins = placement.pins
    return results


def test_a_pinned_flow_that_stopped_is_released_release_after_into_its_quiet_spell() -> None:
    """Its counting entry is still listed (at 0 bit/s): before, the pin stayed until a link
    failure took its path; now it ends ``release_after`` after its first quiet round."""
    topology = leaf_spine(2, 2)
    sending = Elephant(flow_id(1, 2, 1), 1, 2, demand_bps=NIC, rate_bps=LINK)
    placed = place(topology, [sending], {}, {}, 0.0, ENDS)
    assert set(placed.pins) == {sending.flow}
    stopped = Elephant(sending.flow, 1, 2, demand_bps=NIC, rate_bps=0.0)
    history = rounds(topology, [stopped], placed.pins, 0.0)
    released_at, last = history[-1]
    assert released_at == 30.5  # quiet from the round at 0.5 s
    assert last.released == (sending.flow,)
    assert last.reasons == {sending.flow: ENDED}
    assert last.moves == ()
    for _, placement in history[:-1]:
        assert placement.pins[sending.flow].path == placed.pins[sending.flow].path
        assert placement.pins[sending.flow].quiet_since == 0.5
        assert placement.released == () and placement.moves == ()


def test_a_trickle_below_min_rate_is_an_end_too() -> None:
    """A connection left open after its transfer (keep-alives) never leaves the table."""
    topology = leaf_spine(2, 2)
    sending = Elephant(flow_id(1, 2, 1), 1, 2, demand_bps=NIC, rate_bps=LINK)
    placed = place(topology, [sending], {}, {}, 0.0, ENDS)
    trickle = Elephant(sending.flow, 1, 2, demand_bps=NIC, rate_bps=1_000.0)
    released_at, last = rounds(topology, [trickle], placed.pins, 0.0)[-1]
    assert (released_at, last.reasons) == (30.5, {sending.flow: ENDED})


def test_quiet_spells_shorter_than_release_after_keep_the_pin_as_it_was() -> None:
    """OVS refreshes counters in steps: polls that read no growth are no end."""
    topology = leaf_spine(2, 2)
    sending = Elephant(flow_id(1, 2, 1), 1, 2, demand_bps=NIC, rate_bps=LINK)
    stopped = Elephant(sending.flow, 1, 2, demand_bps=NIC, rate_bps=0.0)
    pins = place(topology, [sending], {}, {}, 0.0, ENDS).pins
    now = 0.0
    for _ in range(4):
        for elephant in [stopped] * 59 + [sending]:  # 29.5 s quiet, then it sends again
            now += ROUND
            placement = place(topology, [elephant], pins, {}, now, ENDS)
            assert placement.released == () and placement.moves == ()
            pins = placement.pins
    assert pins == {sending.flow: Pin(pins[sending.flow].path, since=0.0)}  # not quiet now


def test_a_flow_below_min_rate_is_not_placed() -> None:
    topology = leaf_spine(2, 2)
    small = Elephant(flow_id(1, 2, 1), 1, 2, demand_bps=NIC, rate_bps=100_000.0)
    idle = Elephant(flow_id(1, 2, 2), 1, 2, demand_bps=NIC, rate_bps=0.0)
    placement = place(topology, [small, idle], {}, {}, 0.0, ENDS)
    assert placement.pins == {} and placement.moves == ()


def test_a_quiet_flow_moved_off_a_failed_link_keeps_its_quiet_spell() -> None:
    """A link failure is no new start: the flow still ends on time."""
    topology = leaf_spine(2, 2)
    sending = Elephant(flow_id(1, 2, 1), 1, 2, demand_bps=NIC, rate_bps=LINK)
    placed = place(topology, [sending], {}, {}, 0.0, ENDS)
    stopped = Elephant(sending.flow, 1, 2, demand_bps=NIC, rate_bps=0.0)
    quiet = place(topology, [stopped], placed.pins, {}, 10.0, ENDS)
    [(leaf, uplink)] = [hop for hop in quiet.pins[sending.flow].path if hop[0] == 1]
    three_spines = leaf_spine(3, 2)
    failed = three_spines.without_port(PortRef(leaf, uplink))
    moved = place(failed, [stopped], quiet.pins, {}, 20.0, ENDS)
    [move] = moved.moves
    assert move.reason == "link down"
    assert moved.pins[sending.flow].quiet_since == 10.0
    ended = place(failed, [stopped], moved.pins, {}, 40.0, ENDS)
    assert ended.reasons == {sending.flow: ENDED}


# ---- odd demands and scale ---------------------------------------------------------------------


@pytest.mark.parametrize("demand", [float("inf"), float("nan"), -1.0])
def test_unbounded_or_broken_demands_still_place_and_spread(demand: float) -> None:
    # An unknown host's NIC makes its demand unbounded: it counts as much as a path can carry.
    topology = leaf_spine(2, 2)
    elephants = [
        Elephant(flow_id(1, 2, port), 1, 2, demand_bps=demand, rate_bps=LINK / 2) for port in (1, 2)
    ]
    placement = place(topology, elephants, {}, {}, now=0.0)
    assert len(placement.pins) == 2
    crowd = flows_per_link(topology, pinned_paths(placement))
    assert max(crowd.values()) == 1  # a demand of nothing still prefers the emptier path
    again = place(topology, elephants, placement.pins, steady_load(topology, placement), 60.0)
    assert again.moves == ()


def test_a_big_fabric_settles_within_a_few_rounds_and_then_holds_still() -> None:
    rng = random.Random(7)
    topology = leaf_spine(8, 16, capacity=1000 * MBIT)
    elephants = []
    for port in range(256):
        src, dst = rng.sample(range(1, 17), 2)
        elephants.append(Elephant(flow_id(src, dst, port), src, dst, 2000 * MBIT, 100 * MBIT))
    links: dict[Path, tuple[Link, ...]] = {}

    def load_of(placement: Placement) -> dict[Link, float]:
        """Every flow at 100 Mbit/s: what matters is that the load matches the pins."""
        load: dict[Link, float] = {}
        for pin in placement.pins.values():
            if pin.path not in links:
                links[pin.path] = path_links(topology, pin.path)
            for link in links[pin.path]:
                load[link] = load.get(link, 0.0) + 100 * MBIT
        return load

    placement = place(topology, elephants, {}, {}, now=0.0)
    assert len(placement.pins) == 256
    moved = []
    for round_ in range(1, 11):
        placement = place(topology, elephants, placement.pins, load_of(placement), 10.0 * round_)
        moved.append(len(placement.moves))
    assert sum(moved) <= 256 // 5, moved  # a few flows take up room that others left them
    assert moved[5:] == [0] * 5, moved
