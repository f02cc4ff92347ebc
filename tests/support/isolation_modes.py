"""One run of the isolation harness that test_isolation and test_detection both read.

Both modules measure inference latency on the same single-switch network (two
training senders, one inference client, one server behind a 50 Mbit port) under
a flowlane policy and the FIFO baseline. One network and one FIFO baseline serve
both: the modes run one after the other in it (``flowlane_bench.isolation.run``),
so every comparison is between modes of the same run, and the suite pays for one
network and one FIFO phase instead of two.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from flowlane_bench import isolation

CONFIG = isolation.ScenarioConfig(idle_s=1.0, loaded_s=2.0, ramp_s=3.0, inference_rate=200.0)
"""Seconds per phase: 200 idle and 400 loaded samples at 200 requests/s, enough for the wide
margins of both modules (FIFO's loaded p99 is seconds, flowlane's under a millisecond: 4968 ms
against 0.64 ms measured with twice these phases); the figures themselves come from
`make bench`. Training runs 3 s before inference is measured: until a flow has sent the
detection policy's 1 MiB and been detected, it shares the latency queue (the price of knowing
no flow sizes)."""
MODES = {
    "flowlane": isolation.POLICIES / "isolation.yaml",
    "detection": isolation.POLICIES / "detection.yaml",
    "fifo": isolation.POLICIES / "fifo.yaml",
}
"""``flowlane``: rules name the training and inference ports; ``detection``: no rule names
either, training is found by its bytes; ``fifo``: one queue for everything."""


@dataclass(frozen=True)
class IsolationRun:
    results: dict[str, isolation.ModeResult]
    workdir: Path

    def controller_log(self, mode: str) -> str:
        """What the controller of ``mode`` logged."""
        return (self.workdir / f"controller-{mode}.log").read_text()


def run(workdir: Path) -> IsolationRun:
    results = {result.mode: result for result in isolation.run(MODES, CONFIG, workdir)}
    for result in results.values():
        print(
            f"{result.mode}: idle p99 {result.idle['latency_ms']['p99']:.2f} ms,"
            f" loaded p99 {result.loaded_ms('p99'):.2f} ms,"
            f" goodput {result.goodput_bps / 1e6:.1f} Mbit/s,"
            f" class bytes {result.class_bytes}"
        )
    return IsolationRun(results, workdir)
