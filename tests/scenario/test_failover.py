"""Link events: which links are down after each, the optimum then, and training's recovery."""

from __future__ import annotations

from pathlib import Path

import pytest
from flowlane_bench.suite import fabric
from flowlane_bench.suite.failover import (
    HOLD_S,
    RECOVERED,
    after_events,
    crosses,
    event_results,
    link_states,
    recovery_time,
    training_optimum,
)
from flowlane_bench.suite.probe import probe_run
from flowlane_bench.suite.spec import LinkEvent, LinkState, load_scenario

from controller.fabric.model import PortRef
from controller.fabric.optimum import Commodity

REPO = Path(__file__).resolve().parents[2]
MBIT = 1_000_000
INTERVAL = 0.2


def event(at: float, a: str, b: str, state: str) -> LinkEvent:
    return LinkEvent(at=at, link=(a, b), state=LinkState(state))


EVENTS = [
    event(8, "leaf1", "spine2", "down"),
    event(14, "leaf1", "spine2", "up"),
    event(20, "spine2", "leaf2", "down"),
    event(26, "spine2", "leaf2", "up"),
]


def series(levels: list[tuple[float, float, float]], length: float) -> list[tuple[float, float]]:
    """(interval middle, bit/s) every 0.2 s; ``levels`` are (from, to, bit/s) spans."""
    points = []
    for index in range(round(length / INTERVAL)):
        middle = round((index + 0.5) * INTERVAL, 3)
        value = next((v for lo, hi, v in levels if lo <= middle < hi), 0.0)
        points.append((middle, value))
    return points


def test_link_states_follow_the_events() -> None:
    states = link_states(EVENTS)
    assert [(s.at, s.down) for s in states] == [
        (8, (("leaf1", "spine2"),)),
        (14, ()),
        (20, (("spine2", "leaf2"),)),
        (26, ()),
    ]


def test_a_repair_names_the_link_either_way_round() -> None:
    states = link_states([event(1, "leaf1", "spine2", "down"), event(2, "spine2", "leaf1", "up")])
    assert states[-1].down == ()


def test_recovery_is_the_first_held_interval_at_the_threshold() -> None:
    # Failure at 8 s; throughput 10 Mbit/s until 9.0 s, then 19 Mbit/s (threshold 18).
    points = series([(0, 8, 38e6), (8, 9.0, 10e6), (9.0, 14, 19e6)], 14)
    assert recovery_time(points, INTERVAL, 8.0, 14.0, 18e6) == pytest.approx(1.0)


def test_a_blip_is_not_a_recovery() -> None:
    # Back at 8.4 s for 0.4 s only (less than HOLD_S), down again, back for good at 10 s.
    points = series([(8, 8.4, 5e6), (8.4, 8.8, 19e6), (8.8, 10, 5e6), (10, 14, 19e6)], 14)
    assert HOLD_S == 1.0
    assert recovery_time(points, INTERVAL, 8.0, 14.0, 18e6) == pytest.approx(2.0)


def test_quantized_intervals_are_averaged() -> None:
    # iperf3 counts whole writes: 0.2 s intervals alternate 23 and 13 Mbit/s (18 on average).
    points = series([(8, 9, 2e6)], 9) + [
        (round(9.1 + 0.2 * i, 3), 23e6 if i % 2 else 13e6) for i in range(25)
    ]
    assert recovery_time(points, INTERVAL, 8.0, 14.0, 17e6) == pytest.approx(1.0)
    assert recovery_time(points, INTERVAL, 8.0, 14.0, 19.5e6) is None


def test_no_dip_means_no_recovery_time() -> None:
    points = series([(0, 14, 19e6)], 14)
    assert recovery_time(points, INTERVAL, 8.0, 14.0, 18e6) == 0.0


def test_intervals_that_straddle_the_event_are_not_read() -> None:
    points = series([(0, 14, 19e6)], 14)
    assert recovery_time(points, INTERVAL, 8.1, 14.0, 18e6) == pytest.approx(0.1)


def test_never_recovered_before_the_next_event() -> None:
    points = series([(0, 8, 38e6), (8, 14, 12e6), (14, 20, 38e6)], 20)
    assert recovery_time(points, INTERVAL, 8.0, 14.0, 18e6) is None


def test_a_window_shorter_than_the_hold_is_read_whole() -> None:
    # The next event comes 0.6 s after this one: the three intervals between are averaged.
    points = series([(8, 8.2, 15e6), (8.2, 8.6, 21e6)], 8.6)
    assert recovery_time(points, INTERVAL, 8.0, 8.6, 18e6) == 0.0
    assert recovery_time(points, INTERVAL, 8.0, 8.6, 19.5e6) is None


def test_recovery_needs_a_positive_interval() -> None:
    with pytest.raises(ValueError, match="positive"):
        recovery_time([], 0, 1, 2, 3)


def test_the_failover_optimum_after_each_event() -> None:
    loaded = load_scenario(REPO / "mininet" / "scenarios" / "failover.yaml", REPO)
    plan = loaded.scenario.plan()
    topology = fabric.fabric_topology(plan, loaded.policy)
    training = fabric.training_commodities(loaded.scenario, plan)
    optimums = after_events(topology, plan, loaded.scenario.events, training)
    assert optimums == pytest.approx([20 * MBIT, 40 * MBIT, 20 * MBIT, 40 * MBIT], rel=1e-6)


def test_the_probe_is_served_before_training() -> None:
    loaded = load_scenario(REPO / "mininet" / "scenarios" / "failover.yaml", REPO)
    plan = loaded.scenario.plan()
    topology = fabric.without_links(
        fabric.fabric_topology(plan, loaded.policy), plan, [("leaf1", "spine2")]
    )
    training = fabric.training_commodities(loaded.scenario, plan)
    (probe,) = loaded.scenario.probes
    others = [fabric.probe_commodity(probe, plan, probe.flows[0])]
    wire = 1000 * (64 + 42) * 8
    assert training_optimum(topology, training, others) == pytest.approx(20 * MBIT - wire)
    assert training_optimum(topology, training) == pytest.approx(20 * MBIT)
    assert training_optimum(topology, []) == 0.0


def test_crosses_reads_either_end_of_the_link() -> None:
    plan = load_scenario(REPO / "mininet" / "scenarios" / "failover.yaml", REPO).scenario.plan()
    path = ["leaf1-eth5", "leaf2-eth1", "spine2-eth2"]
    assert crosses(path, plan, ("leaf1", "spine2"))
    assert crosses(path, plan, ("spine2", "leaf2"))
    assert not crosses(path, plan, ("leaf1", "spine1"))


def test_event_results_put_the_figures_together() -> None:
    plan = load_scenario(REPO / "mininet" / "scenarios" / "failover.yaml", REPO).scenario.plan()
    origin = 1_000.0
    # Probe at 1000/s from origin for 28 s: 30 lost after the failure, 3 after the repair.
    lost = set(range(8005, 8035)) | set(range(14002, 14005))
    sender = {"rate": 1000, "start_unix": origin, "sent": 28_000}
    receiver = {
        "arrivals": [[s, origin + s / 1000] for s in range(28_000) if s not in lost],
    }
    run = probe_run(sender, receiver)
    points = series([(0, 8, 38e6), (8, 9.0, 10e6), (9.0, 14.4, 19e6), (14.4, 28, 38e6)], 28)
    results = event_results(
        EVENTS[:2],
        origin=origin,
        executed=[8.003, 14.002],
        phase_s=28.0,
        optimums=[20e6, 40e6],
        series=points,
        interval_s=INTERVAL,
        probe=run,
        probe_path=["leaf1-eth5", "spine2-eth2", "leaf2-eth1"],
        plan=plan,
    )
    down, up = results
    assert (down.at_s, down.executed_s, down.link, down.state) == (
        8,
        8.003,
        ("leaf1", "spine2"),
        "down",
    )
    assert down.probe_crossed is True and down.probe_lost == 30 and down.probe_loss_ms == 30.0
    assert down.probe_longest_gap_ms == pytest.approx(31.0)
    assert down.optimum_bps == 20e6
    # 18 Mbit/s (0.9 x 20) is reached at 9.0 s: 0.997 s after the failure was carried out.
    assert RECOVERED == 0.9
    assert down.recovery_s == pytest.approx(0.997)
    assert up.probe_lost == 3 and up.state == "up"
    assert up.recovery_s == pytest.approx(0.398)  # 36 Mbit/s from 14.4 s


def test_event_results_without_a_probe() -> None:
    results = event_results(
        EVENTS[:1],
        origin=0.0,
        executed=[8.0],
        phase_s=12.0,
        optimums=[20e6],
        series=series([(0, 12, 19e6)], 12),
        interval_s=INTERVAL,
    )
    (only,) = results
    assert only.probe_crossed is None and only.probe_lost is None
    assert only.recovery_s == 0.0


def test_commodities_are_plain_values() -> None:
    # The optimum module's Commodity is what the scenario builds: elastic unless limited.
    assert Commodity(PortRef(1, 1), PortRef(2, 1)).limit_bps is None
