"""Job-aware placement: a job's elephants placed together, so its most loaded link is as low as
the fabric allows; flows of no job placed as before."""

from __future__ import annotations

import pathlib
import random
from collections.abc import Mapping, Sequence

import pytest
import yaml

from controller.fabric.model import Link, Path, PortRef, Topology
from controller.fabric.paths import path_links
from controller.fabric.placement import (
    LINK_DOWN,
    PLACED,
    REGROUPED,
    Elephant,
    Placement,
    PlacementSettings,
    place,
)
from controller.flowid import FlowId
from tests.fabric.test_placement import MBIT, flow_id, flows_per_link, leaf_spine, spine

CAPACITY = 10 * MBIT
TRICKLE = 1.0
"""Measured rate of the elephants (bit/s): above zero (not quiet), too small to move a load."""


def elephant(src: int, dst: int, port: int, demand_mbit: float, job: str | None) -> Elephant:
    return Elephant(flow_id(src, dst, port), src, dst, demand_mbit * MBIT, TRICKLE, job)


def uplinks(leaf: int, spines: int = 2) -> list[Link]:
    return [Link(PortRef(leaf, s), PortRef(spine(s), leaf)) for s in range(1, spines + 1)]


def job_worst(
    topology: Topology,
    placement: Placement,
    elephants: Sequence[Elephant],
    background: Mapping[Link, float],
) -> dict[str, float]:
    """Each job's most loaded link (utilisation): background plus every placed demand."""
    load: dict[Link, float] = dict(background)
    for e in elephants:
        for link in path_links(topology, placement.pins[e.flow].path):
            load[link] = load.get(link, 0.0) + e.demand_bps
    worst: dict[str, float] = {}
    for e in elephants:
        assert e.job is not None
        for link in path_links(topology, placement.pins[e.flow].path):
            utilisation = load[link] / topology.capacity(link.src)
            worst[e.job] = max(worst.get(e.job, 0.0), utilisation)
    return worst


def without_jobs(elephants: Sequence[Elephant]) -> list[Elephant]:
    return [Elephant(e.flow, e.src_dpid, e.dst_dpid, e.demand_bps, e.rate_bps) for e in elephants]


def paths(placement: Placement) -> dict[FlowId, Path]:
    return {flow: pin.path for flow, pin in placement.pins.items()}


def spine_of(placement: Placement, flow: FlowId) -> int:
    return placement.pins[flow].path[1][0]


# --------------------------------------------------------------------------------------------
# Two jobs of four flows over two spines
# --------------------------------------------------------------------------------------------


def two_jobs() -> list[Elephant]:
    """Job A: four flows leaf 1 -> 2; job B: four flows leaf 3 -> 2 (they share leaf 2's
    downlinks), demands 2 Mbit/s each on 10 Mbit/s links."""
    return [
        *(elephant(1, 2, 40000 + n, 2, "A") for n in range(4)),
        *(elephant(3, 2, 41000 + n, 2, "B") for n in range(4)),
    ]


def test_two_jobs_each_get_a_worst_link_no_worse_than_flow_by_flow() -> None:
    topology = leaf_spine(2, 4, CAPACITY)
    hot = {uplinks(1)[0]: 5 * MBIT}  # something else loads leaf 1's link to spine 1
    jobs = two_jobs()
    together = place(topology, jobs, {}, hot, 0.0)
    alone = place(topology, without_jobs(jobs), {}, hot, 0.0)
    assert set(together.pins) == {e.flow for e in jobs}
    by_job, by_flow = (
        job_worst(topology, together, jobs, hot),
        job_worst(topology, alone, jobs, hot),
    )
    assert by_job["A"] <= by_flow["A"] and by_job["B"] <= by_flow["B"]
    assert max(by_job.values()) <= 0.8 + 1e-9  # 16 Mbit/s over two 10 Mbit/s downlinks


def crafted(spines: int = 2) -> tuple[Topology, list[Elephant], dict[Link, float]]:
    """Job B has a flow (leaf 3 -> 4) whose every path crosses a link 80 % loaded, so B's
    slowest flow sees 90 % whatever happens; B's other three flows (3 Mbit/s each) and job A's
    four (2 Mbit/s each) go leaf 1 -> 2.  B can take one spine up to 90 % at no cost to
    itself, leaving the other to A alone (80 %); balancing flow by flow spreads both jobs
    over both spines and puts A's slowest flow at 90 %."""
    topology = leaf_spine(spines, 4, CAPACITY)
    background = dict.fromkeys(uplinks(3, spines), 8 * MBIT)
    flows = [
        elephant(3, 4, 42000, 1, "B"),
        *(elephant(1, 2, 41000 + n, 3, "B") for n in range(3)),
        *(elephant(1, 2, 40000 + n, 2, "A") for n in range(4)),
    ]
    return topology, flows, background


def test_a_job_is_not_split_across_the_link_another_job_is_hot_on() -> None:
    topology, flows, background = crafted()
    together = place(topology, flows, {}, background, 0.0)
    alone = place(topology, without_jobs(flows), {}, background, 0.0)
    by_job = job_worst(topology, together, flows, background)
    by_flow = job_worst(topology, alone, flows, background)
    assert by_job["A"] < by_flow["A"]  # strictly better for A ...
    assert by_job["B"] <= by_flow["B"]  # ... and no worse for B
    assert round(by_job["A"], 6) == 0.8 and round(by_flow["A"], 6) == 0.9
    # A's four flows share one spine; B's three leaf 1 -> 2 flows the other.
    a_spines = {spine_of(together, e.flow) for e in flows if e.job == "A"}
    b_spines = {spine_of(together, e.flow) for e in flows if e.job == "B" and e.src_dpid == 1}
    assert len(a_spines) == 1 and len(b_spines) == 1 and a_spines != b_spines
    assert all(move.reason == PLACED for move in together.moves)


def test_flows_of_no_job_are_placed_as_before() -> None:
    topology, flows, background = crafted()
    others = [elephant(2, 1, 43000 + n, 4, None) for n in range(3)]
    mixed = place(topology, [*flows, *others], {}, background, 0.0)
    alone = place(topology, others, {}, background, 0.0)
    # Leaf 2 -> 1 shares no link with the jobs (links are directed): the same paths.
    assert {e.flow: mixed.pins[e.flow].path for e in others} == paths(alone)


def test_placement_of_jobs_is_deterministic_whatever_the_order_of_the_elephants() -> None:
    topology, flows, background = crafted()
    flows = [*flows, *two_jobs()]
    first = place(topology, flows, {}, background, 0.0)
    for seed in range(5):
        shuffled = list(flows)
        random.Random(seed).shuffle(shuffled)
        again = place(topology, shuffled, {}, dict(reversed(background.items())), 0.0)
        assert paths(again) == paths(first)
        assert again.moves == first.moves


# --------------------------------------------------------------------------------------------
# Re-placing: a job registers, ends, a link fails
# --------------------------------------------------------------------------------------------


def test_a_job_registering_places_its_flows_together_again() -> None:
    topology, flows, background = crafted()
    spread = place(topology, without_jobs(flows), {}, background, 0.0)
    # Next round, the classifier names the jobs: without regroup the pins stay ...
    later = place(topology, flows, spread.pins, background, 10.0)
    assert paths(later) == paths(spread) and later.moves == ()
    # ... with regroup (the owner's word that a job registered) they are placed together.
    regrouped = place(topology, flows, spread.pins, background, 10.0, regroup=True)
    fresh = place(topology, flows, {}, background, 0.0)
    assert paths(regrouped) == paths(fresh)
    assert regrouped.moves and all(move.reason == REGROUPED for move in regrouped.moves)
    # A flow that lands where it was keeps its pin and its time.
    for flow, pin in regrouped.pins.items():
        if pin.path == spread.pins[flow].path:
            assert pin.since == 0.0


def test_a_job_ending_leaves_its_flows_pinned_as_flows_of_no_job() -> None:
    topology, flows, background = crafted()
    grouped = place(topology, flows, {}, background, 0.0)
    ended = place(topology, without_jobs(flows), grouped.pins, background, 10.0, regroup=True)
    assert set(ended.pins) == set(grouped.pins)  # still elephants: still pinned
    assert ended.released == ()


def test_a_job_pin_is_not_rebalanced_flow_by_flow() -> None:
    """Placed together, a job's flow stays even where one-by-one headroom would move it."""
    topology, flows, background = crafted()
    grouped = place(topology, flows, {}, background, 0.0)
    later = place(topology, flows, grouped.pins, background, 100.0)
    assert paths(later) == paths(grouped) and later.moves == ()


def test_a_link_failure_under_a_job_moves_its_flows_off_it() -> None:
    topology, flows, background = crafted(spines=3)
    grouped = place(topology, flows, {}, background, 0.0)
    a_flows = [e.flow for e in flows if e.job == "A"]
    a_spines = {spine_of(grouped, flow) for flow in a_flows}
    b_spines = {spine_of(grouped, e.flow) for e in flows if e.job == "B" and e.src_dpid == 1}
    assert len(b_spines) == 1 and not a_spines & b_spines  # B hot on one, A over the others
    cut_spine = min(a_spines)
    cut = uplinks(1, 3)[cut_spine - spine(1)]
    broken = topology.without_links([cut, cut.reversed()])
    after = place(broken, flows, grouped.pins, background, 1.0, regroup=True)
    assert set(after.pins) == set(grouped.pins)
    assert all(spine_of(after, e.flow) != cut_spine for e in flows if e.src_dpid == 1)
    hit = {flow for flow in a_flows if spine_of(grouped, flow) == cut_spine}
    assert {move.flow: move.reason for move in after.moves if move.flow in hit} == dict.fromkeys(
        hit, LINK_DOWN
    )
    worst = job_worst(broken, after, flows, background)
    assert round(worst["A"], 6) == 0.8 and round(worst["B"], 6) == 0.9  # A on one spine now


def test_a_new_flow_of_a_job_is_placed_against_the_pinned_flows_of_every_job() -> None:
    """A job's flow seen after the others were pinned: the pins stay, and it goes where it
    raises the worst link of the jobs least (B's spine would take B to 95 %, A's takes A to
    85 % and leaves B at 90 %)."""
    topology, flows, background = crafted()
    grouped = place(topology, flows, {}, background, 0.0)
    a_spine = spine_of(grouped, flows[-1].flow)
    newcomer = elephant(1, 2, 41009, 0.5, "B")
    later = place(topology, [*flows, newcomer], grouped.pins, background, 1.0)
    assert spine_of(later, newcomer.flow) == a_spine
    assert [move.flow for move in later.moves] == [newcomer.flow]
    worst = job_worst(topology, later, [*flows, newcomer], background)
    assert round(worst["A"], 6) == 0.85 and round(worst["B"], 6) == 0.9


# --------------------------------------------------------------------------------------------
# Rings: where placing job by job alone walked into a collision flow-level placement avoids
# --------------------------------------------------------------------------------------------


def ring(name: str, leaves: Sequence[int], first_port: int) -> list[Elephant]:
    """A ring all-reduce over workers on ``leaves`` (in ring order): one elephant per hop that
    crosses the spines, each wanting a whole link (TCP: its NIC's rate, capped at the path's)."""
    hops = zip(leaves, [*leaves[1:], leaves[0]], strict=True)
    return [
        elephant(src, dst, first_port + n, 100, name)
        for n, (src, dst) in enumerate(hops)
        if src != dst
    ]


def crowd_per_job(
    topology: Topology, placement: Placement, flows: Sequence[Elephant]
) -> dict[str, int]:
    """Each job's most crowded link: how many placed flows (of any job) share it."""
    count: dict[Link, int] = {}
    for e in flows:
        for link in path_links(topology, placement.pins[e.flow].path):
            count[link] = count.get(link, 0) + 1
    crowd: dict[str, int] = {}
    for e in flows:
        assert e.job is not None
        for link in path_links(topology, placement.pins[e.flow].path):
            crowd[e.job] = max(crowd.get(e.job, 0), count[link])
    return crowd


def test_two_rings_whose_layout_traps_a_greedy_by_job_each_get_links_of_their_own() -> None:
    """Ring a on leaves 1, 1, 2, 2 and ring b on 1, 3, 2, 3: every leaf sends two hops and
    receives two, so over two spines each hop can have links of its own.  Placing b whole
    first (the greedy by job) put b's hops 3 -> 1 and 3 -> 2 on the spines that left both
    of a's hops a shared link (both rings at half their rate); taking the most constrained
    hop next finds the layout without a shared link, and the jobs' objective keeps it."""
    topology = leaf_spine(2, 4, CAPACITY)
    flows = [*ring("a", [1, 1, 2, 2], 40000), *ring("b", [1, 3, 2, 3], 41000)]
    together = place(topology, flows, {}, {}, 0.0)
    alone = place(topology, without_jobs(flows), {}, {}, 0.0)
    assert crowd_per_job(topology, together, flows) == {"a": 1, "b": 1}
    assert max(flows_per_link(topology, paths(alone)).values()) == 1  # flow by flow too


@pytest.mark.parametrize("seed", range(4))
def test_two_rings_are_never_worse_off_placed_as_jobs_than_flow_by_flow(seed: int) -> None:
    """Random layouts of two rings of four workers over four leaves and two spines: each
    job's most crowded link, worst job first, is never worse placed as jobs."""
    rng = random.Random(seed)
    topology = leaf_spine(2, 4, CAPACITY)
    for _ in range(40):
        flows = [
            *ring("a", [rng.randint(1, 4) for _ in range(4)], 40000),
            *ring("b", [rng.randint(1, 4) for _ in range(4)], 41000),
        ]
        if {e.job for e in flows} != {"a", "b"}:
            continue
        together = place(topology, flows, {}, {}, 0.0)
        alone = place(topology, without_jobs(flows), {}, {}, 0.0)
        as_jobs = sorted(crowd_per_job(topology, together, flows).values(), reverse=True)
        by_flow = sorted(crowd_per_job(topology, alone, flows).values(), reverse=True)
        assert as_jobs <= by_flow, [(e.src_dpid, e.dst_dpid, e.job) for e in flows]


def test_jobs_placed_around_a_failed_link_spread_again_once_it_is_back_and_held() -> None:
    """The owner re-places jobs when a link fails, not when it comes back, and a job's pin
    is never rebalanced on its own: the jobs' flows must regroup by themselves once the
    link is back and every pin has held its path for ``hold``.  Three rings over four
    leaves and three spines: every leaf sends three hops, one a spine."""
    topology = leaf_spine(3, 4, CAPACITY)
    flows = [
        *(
            ring(name, [1, 2, 3, 4], port)
            for name, port in (("a", 40000), ("b", 41000), ("c", 42000))
        )
    ]
    flows = [e for job in flows for e in job]
    settings = PlacementSettings(hold_s=5.0)
    spread = place(topology, flows, {}, {}, 0.0, settings)
    assert set(crowd_per_job(topology, spread, flows).values()) == {1}

    cut = uplinks(1, 3)[0]
    down = topology.without_links([cut, cut.reversed()])
    shared = place(down, flows, spread.pins, {}, 1.0, settings, regroup=True)
    assert max(crowd_per_job(down, shared, flows).values()) == 2  # 3 hops, 2 uplinks

    back = place(topology, flows, shared.pins, {}, 3.0, settings)  # held for 2 s: stays
    assert back.moves == () and back.pins == shared.pins
    later = place(topology, flows, shared.pins, {}, 6.0, settings)
    assert later.moves and all(move.reason == REGROUPED for move in later.moves)
    assert set(crowd_per_job(topology, later, flows).values()) == {1}
    # Placed together again, nothing moves on the rounds after.
    assert place(topology, flows, later.pins, {}, 20.0, settings).moves == ()


def test_jobs_placed_together_stay_put_through_a_hundred_rounds_of_noisy_load() -> None:
    """Port and flow counters are read at different moments: what is left of a bursty ring
    flow's rate on its link after taking the flow off (here up to 30 % of a link) must not
    make an equal layout look better and swap the jobs' flows every ``hold``."""
    topology = leaf_spine(2, 4, CAPACITY)
    flows = [*ring("a", [1, 2, 3, 4], 40000), *ring("b", [1, 2, 3, 4], 41000)]
    settings = PlacementSettings(hold_s=5.0)
    placement = place(topology, flows, {}, {}, 0.0, settings)
    rng = random.Random(7)
    links = sorted(topology.usable_links)
    for round_number in range(1, 101):
        noise = {link: rng.uniform(0.0, 0.3) * CAPACITY for link in links}
        again = place(topology, flows, placement.pins, noise, 0.5 * round_number, settings)
        assert again.moves == (), round_number
        placement = again


# --------------------------------------------------------------------------------------------
# A job that starts while another runs (mininet/scenarios/variants/jobs-late.yaml)
# --------------------------------------------------------------------------------------------

LATE_SCENARIO = (
    pathlib.Path(__file__).resolve().parents[2] / "mininet/scenarios/variants/jobs-late.yaml"
)


def scenario_leaves() -> dict[str, list[int]]:
    """Each ring's workers in the variant scenario, as leaves (hosts h1..h3 on leaf 1, ...)."""
    document = yaml.safe_load(LATE_SCENARIO.read_text())
    per_leaf = document["topology"]["hosts_per_leaf"]
    return {
        workload["name"]: [(int(host[1:]) - 1) // per_leaf + 1 for host in workload["workers"]]
        for workload in document["workloads"]
        if workload["kind"] == "allreduce"
    }


def test_the_late_job_layout_strands_it_flow_by_flow_and_not_placed_as_jobs() -> None:
    """ring-a is placed alone; ring-b appears a round later.  Flow by flow, ring-a's pins
    leave ring-b's hop from leaf 2 to leaf 3 no path of its own, and the pins stay; as jobs,
    ring-b's arrival places both again together, every hop on links of its own."""
    leaves = scenario_leaves()
    assert leaves == {"ring-a": [1, 2, 1, 3], "ring-b": [2, 3, 4, 4]}
    topology = leaf_spine(2, 4, CAPACITY)
    early, late = ring("ring-a", leaves["ring-a"], 40000), ring("ring-b", leaves["ring-b"], 41000)
    settings = PlacementSettings(hold_s=5.0)

    flow_first = place(topology, without_jobs(early), {}, {}, 0.0, settings)
    flow_both = place(topology, without_jobs([*early, *late]), flow_first.pins, {}, 1.0, settings)
    flow_later = place(topology, without_jobs([*early, *late]), flow_both.pins, {}, 30.0, settings)
    assert max(flows_per_link(topology, paths(flow_later)).values()) == 2

    job_first = place(topology, early, {}, {}, 0.0, settings, regroup=True)
    job_both = place(topology, [*early, *late], job_first.pins, {}, 1.0, settings, regroup=True)
    assert crowd_per_job(topology, job_both, [*early, *late]) == {"ring-a": 1, "ring-b": 1}
