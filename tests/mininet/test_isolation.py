"""End to end on real OVS: flowlane keeps inference latency while training fills the port.

One Mininet network, two training senders, one inference client, one server
behind a 50 Mbit port. The same run measures the flowlane policy and a
single-queue FIFO policy (the controller restarts with the other policy and
the switch reconciles to it), so the comparison holds on a noisy machine.
Margins are wide on purpose; the figures themselves belong to the benchmark
(``make bench``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from flowlane_bench import harness, isolation

pytestmark = pytest.mark.mininet

CONFIG = isolation.ScenarioConfig(idle_s=1.0, loaded_s=2.0, ramp_s=2.0, inference_rate=200.0)
"""Seconds per phase: 200 idle and 400 loaded samples at 200 requests/s, enough for the wide
margins below (FIFO's loaded p99 is seconds, flowlane's under a millisecond: 4968 ms against
0.64 ms measured with twice these phases); the figures themselves come from `make bench`."""


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, isolation.ModeResult]:
    harness.check_prerequisites()
    workdir: Path = tmp_path_factory.mktemp("isolation")
    by_mode = {result.mode: result for result in isolation.run(isolation.MODES, CONFIG, workdir)}
    for result in by_mode.values():
        print(
            f"{result.mode}: idle p99 {result.idle['latency_ms']['p99']:.2f} ms,"
            f" loaded p99 {result.loaded_ms('p99'):.2f} ms,"
            f" goodput {result.goodput_bps / 1e6:.1f} Mbit/s,"
            f" class bytes {result.class_bytes}"
        )
    return by_mode


def test_fifo_baseline_shows_the_problem(results: dict[str, isolation.ModeResult]) -> None:
    """Without classes, training traffic queues in front of inference requests."""
    fifo = results["fifo"]
    assert fifo.loaded_ms("p99") > 3 * fifo.idle["latency_ms"]["p99"]


def test_flowlane_keeps_inference_latency_far_below_fifo(
    results: dict[str, isolation.ModeResult],
) -> None:
    flowlane, fifo = results["flowlane"], results["fifo"]
    # FIFO may lose requests outright (cubic fills the one queue; a request stuck behind
    # it times out); flowlane loses none
    assert flowlane.loaded["errors"] == 0
    # p50 separates by an order of magnitude; the p99 tail on a 2-core machine running
    # the userspace datapath is partly CPU scheduling, so its margin is smaller.
    assert flowlane.loaded_ms("p50") * 4 < fifo.loaded_ms("p50")
    assert flowlane.loaded_ms("p99") * 1.3 < fifo.loaded_ms("p99")


def test_training_keeps_the_port_busy(results: dict[str, isolation.ModeResult]) -> None:
    """Training borrows everything inference leaves: goodput near the 50 Mbit port rate."""
    flowlane = results["flowlane"]
    assert flowlane.goodput_ratio > 0.7  # TCP payload tops out near 0.956; CPU-bound here
    # and the ceiling is the policy's, not the link's: HTB shapes the port
    assert flowlane.goodput_ratio < 1.0


def test_each_class_travels_in_its_own_queue_with_its_dscp(
    results: dict[str, isolation.ModeResult],
) -> None:
    """Marking flows counted packets per class, and HTB classes per queue carried them."""
    flowlane = results["flowlane"]
    assert flowlane.marked_packets["training"] > 1000
    assert flowlane.marked_packets["inference"] > 100
    total = sum(flowlane.class_bytes.values())
    assert flowlane.class_bytes["training"] > 0.9 * total
    assert flowlane.class_bytes["inference"] > 0
    # requests of 256 B at 200/s over ramp+loaded seconds: at least the payload went through
    assert flowlane.class_bytes["inference"] > CONFIG.request_bytes * 200 * CONFIG.loaded_s / 2
