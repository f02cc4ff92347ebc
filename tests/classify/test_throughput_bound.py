"""Elephants are throughput-bound flows, not old ones: minutes of simulated traffic.

The shipped default policy's detection section is judged here, on a 1 Gbit/s
port (its rate is a share of the port, so the figures scale): kept-alive
request/response connections at up to 5 % of the port for ten minutes stay
in the latency class although each sends gigabytes, short flows stay there
too, bulk transfers at 30-100 % of the port move within ``for`` plus one
interval, and an elephant that turns sparse goes back.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from controller.classify.decisions import Decisions, DemotionReason, ReleaseReason
from controller.classify.detector import Detector
from controller.policy.detection import DetectionSpec
from controller.policy.load import load_policy_file

GBIT = 1_000_000_000
PORT_BPS = GBIT
INTERVAL = 0.5
MINUTES = 60.0
DEFAULT_POLICY = Path(__file__).resolve().parents[2] / "policies" / "default.yaml"


def shipped() -> DetectionSpec:
    spec = load_policy_file(DEFAULT_POLICY).detection
    assert spec is not None, "the default policy must turn detection on"
    return spec


def demoted(polls: list[Decisions]) -> list[Any]:
    return [demotion.flow for decisions in polls for demotion in decisions.demote]


def test_the_shipped_criterion_is_the_one_these_tests_assume() -> None:
    spec = shipped()
    assert spec.interval == INTERVAL
    assert spec.elephant.traffic_class == "training"
    assert Detector(spec, PORT_BPS).thresholds.rate_bps == PORT_BPS // 10


def test_twenty_persistent_connections_are_never_demoted(table: Any, flow: Any) -> None:
    """Bursty responses at up to 5 % of the port, each window, for ten simulated minutes.

    Each connection opens at a random moment and answers its first request
    at once, so the detector first sees it a few milliseconds old after a
    burst at line rate: over its age its rate is far above the threshold.
    """
    detector = Detector(shipped(), PORT_BPS)
    rng = random.Random(12)
    window_cap = int(0.05 * PORT_BPS * INTERVAL / 8)  # 5 % of the port over one window
    connections = []
    busiest = 0
    polls: list[Decisions] = []
    for index in range(20):
        table.advance(INTERVAL - 0.002)
        connection = table.start(flow(index))
        table.send(connection, rng.randint(64 << 10, 1 << 20))  # the first answer, at line rate
        table.advance(0.002)
        polls.append(table.poll(detector))
        connections.append((connection, rng.uniform(0.2, 1.0)))  # share of the 5 % it averages
    for _ in range(int(10 * MINUTES / INTERVAL)):
        for connection, load in connections:
            requests = rng.randint(0, 40)
            sizes = sum(int(rng.lognormvariate(11.0, 1.0)) for _ in range(requests))
            sent = min(window_cap, int(sizes * load))
            busiest = max(busiest, sent)
            table.send(connection, sent)
        table.advance(INTERVAL)
        polls.append(table.poll(detector))
    assert demoted(polls) == []
    assert polls[-1].overrides == 0 and polls[-1].tracked == 20
    assert busiest == window_cap  # the busiest windows reach 5 % of the port
    totals = [table.entries[connection].octets for connection, _ in connections]
    assert min(totals) > 400 * (1 << 20)  # each far past any total-bytes threshold
    assert sum(totals) > 10 * (1 << 30)


def test_a_thousand_short_flows_are_never_demoted(table: Any, flow: Any) -> None:
    """A few KB each, answered at line rate, many caught a moment after their first packet."""
    detector = Detector(shipped(), PORT_BPS)
    rng = random.Random(1000)
    polls: list[Decisions] = []
    for step in range(100):
        for index in range(10):
            mouse = table.start(flow(step * 10 + index))
            table.send(mouse, rng.randint(1 << 10, 16 << 10))
        table.advance(rng.choice((0.001, 0.01, 0.1, INTERVAL)))
        polls.append(table.poll(detector))
        table.advance(INTERVAL)
        polls.append(table.poll(detector))
    polls += table.run(detector, 5)
    assert len(table.entries) == 1000
    assert demoted(polls) == []
    assert polls[-1].tracked == 1000


@pytest.mark.parametrize("share", [0.3, 0.5, 0.75, 1.0])
@pytest.mark.parametrize("offset", [0.0, 0.1, 0.25, 0.499])
def test_bulk_flows_are_demoted_within_for_and_one_interval(
    table: Any, flow: Any, share: float, offset: float
) -> None:
    """``offset``: how long before the next poll the first packet comes."""
    spec = shipped()
    detector = Detector(spec, PORT_BPS)
    table.run(detector, 1)  # the detector has polled before
    table.advance(INTERVAL - offset)
    table.poll(detector)
    bulk = table.start(flow(1), rate_mbit=share * PORT_BPS / 1e6)
    polls = table.run(detector, 10)
    [demotion] = [d for decisions in polls for d in decisions.demote]
    assert demotion.flow == bulk
    assert demotion.latency_s <= spec.sustain_s + INTERVAL + 1e-9
    # At 30 % the bytes come first only for flows that start just before a poll.
    assert demotion.reason in (DemotionReason.BYTES, DemotionReason.RATE)


def test_bulk_is_found_among_persistent_connections(table: Any, flow: Any) -> None:
    detector = Detector(shipped(), PORT_BPS)
    for index in range(20):
        table.start(flow(index), rate_mbit=50 * (index + 1) / 20)  # up to 5 %
    bulk = [table.start(flow(100 + index), rate_mbit=rate) for index, rate in enumerate((300, 900))]
    polls = table.run(detector, 5 * MINUTES)
    assert sorted(demoted(polls)) == sorted(bulk)


def test_a_flow_that_turns_from_bulk_to_sparse_is_released(table: Any, flow: Any) -> None:
    spec = shipped()
    detector = Detector(spec, PORT_BPS)
    connection = table.start(flow(1), rate_mbit=800)
    assert demoted(table.run(detector, 60)) == [connection]
    table.rate(connection, 20)  # 2 % of the port: requests on the same connection
    polls = table.run(detector, spec.release_after + INTERVAL)
    [released] = [r for decisions in polls for r in decisions.release]
    assert released.reason is ReleaseReason.CALM
    assert released.idle_s == 0  # it never stopped sending
    assert detector.overrides() == []
    assert demoted(table.run(detector, 10 * MINUTES)) == []


def test_an_elephant_with_pauses_between_bursts_keeps_its_override(table: Any, flow: Any) -> None:
    """Training alternates compute and all-reduce: a second of silence is not calm."""
    detector = Detector(shipped(), PORT_BPS)
    connection = table.start(flow(1), rate_mbit=900)
    polls = table.run(detector, 5)
    for _ in range(60):
        table.rate(connection, 0)
        polls += table.run(detector, 4)
        table.rate(connection, 900)
        polls += table.run(detector, 1)
    assert demoted(polls) == [connection]
    assert [r for decisions in polls for r in decisions.release] == []
