"""End to end: no rule names either side, and flowlane still isolates inference.

Training is iperf3 on its default port and inference the load generator on
a port no rule mentions (``policies/examples/detection.yaml`` has no rules).
Every flow starts in the latency class; the training flows are detected by
their bytes and moved to the training class by exact-match overrides, and
inference latency under load stays far below the FIFO baseline measured in
the same run.
"""

from __future__ import annotations

import re

import pytest
from flowlane_bench import isolation

from tests.support.isolation_modes import CONFIG, IsolationRun

pytestmark = pytest.mark.mininet

DETECTION = "detection"
"""The mode of the shared run (``isolation_modes``) under ``policies/examples/detection.yaml``."""
DEMOTION = re.compile(r"tcp (\S+):(\d+) > (\S+):(\d+) inference -> training \(bytes, ([\d.]+) s")


@pytest.fixture(scope="module")
def run(isolation_modes: IsolationRun) -> tuple[dict[str, isolation.ModeResult], str]:
    """The shared run's FIFO and detection modes, by the names this module's tests read them
    under, and the detection controller's log."""
    results = isolation_modes.results
    chosen = {"flowlane": results[DETECTION], "fifo": results["fifo"]}
    return chosen, isolation_modes.controller_log(DETECTION)


def test_training_flows_are_detected_and_demoted(
    run: tuple[dict[str, isolation.ModeResult], str],
) -> None:
    _, log = run
    demoted = DEMOTION.findall(log)
    print("\n".join(" ".join(d) for d in demoted))
    training_ports = {str(isolation.TRAINING_PORT + i) for i in range(CONFIG.training_senders)}
    assert {dport for _, _, _, dport, _ in demoted} >= training_ports


def test_inference_flows_are_never_demoted(
    run: tuple[dict[str, isolation.ModeResult], str],
) -> None:
    _, log = run
    for _, sport, _, dport, _ in DEMOTION.findall(log):
        assert str(isolation.INFERENCE_PORT) not in (sport, dport)


def test_training_traffic_ends_up_in_the_training_queue(
    run: tuple[dict[str, isolation.ModeResult], str],
) -> None:
    flowlane = run[0]["flowlane"]
    total = sum(flowlane.class_bytes.values())
    # the first MiB of each flow travels as inference before detection moves it
    assert flowlane.class_bytes["training"] > 0.8 * total
    assert flowlane.goodput_ratio > 0.7  # TCP payload tops out near 0.956; CPU-bound here


def test_inference_latency_stays_far_below_fifo(
    run: tuple[dict[str, isolation.ModeResult], str],
) -> None:
    results = run[0]
    flowlane, fifo = results["flowlane"], results["fifo"]
    assert flowlane.loaded["errors"] == 0
    # p50 separates by an order of magnitude; the p99 tail on a 2-core machine running
    # the userspace datapath is partly CPU scheduling, so its margin is smaller.
    assert flowlane.loaded_ms("p50") * 4 < fifo.loaded_ms("p50")
    assert flowlane.loaded_ms("p99") * 1.3 < fifo.loaded_ms("p99")
