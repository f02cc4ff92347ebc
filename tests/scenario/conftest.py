"""Shared material for the scenario tests: the shipped files and a synthetic report.

The report is made the way the runner makes it (``phase_result`` per phase,
``headline`` over them), from numbers chosen so every headline figure is
known in advance: idle p99 10 ms, flowlane p99 12 ms (1.2x), fifo 40 ms
(4x); 50 Mbit/s capacity.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from flowlane_bench.suite.report import (
    ALONE,
    IDLE,
    AllReduceResult,
    InferenceResult,
    Latency,
    PhaseResult,
    Report,
    TrainingFlow,
    headline,
)
from flowlane_bench.suite.stats import cdf_points

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "mininet" / "scenarios"
SCENARIO_FILES = sorted(SCENARIOS.glob("*.yaml"))
SHIPPED = ("allreduce", "collide", "failover", "incast", "isolation", "leafspine")
CAPACITY = 50_000_000
MODES = ["fifo", "static", "flowlane"]


def inference(p99: float, errors: int = 0) -> InferenceResult:
    values = [p99 / 4, p99 / 2, p99 / 2, p99, p99 * 1.5]
    return InferenceResult(
        latency_ms=Latency(
            p50=p99 / 2, p90=p99 * 0.8, p99=p99, p999=p99 * 1.5, max=p99 * 1.5, mean=p99 / 2
        ),
        samples=len(values),
        errors=errors,
        error_kinds={"timeout": errors} if errors else {},
        rate_target=200.0,
        rate_achieved=199.5,
        cdf=cdf_points(values),
    )


def allreduce(mean_ms: float) -> AllReduceResult:
    times = [mean_ms * 0.9, mean_ms, mean_ms * 1.1]
    return AllReduceResult(
        workload="ring",
        workers=4,
        iterations=len(times),
        iteration_ms=times,
        iteration_ms_mean=mean_ms,
        iteration_ms_p99=max(times),
        ring_goodput_bps=20e6,
    )


def timeline(level_bps: float) -> list[tuple[float, float]]:
    return [(round(0.25 + 0.5 * i, 3), level_bps * (1 if i % 4 else 0.5)) for i in range(20)]


def phase(
    name: str,
    *,
    p99: float | None,
    flows: list[float],
    ring_ms: float | None = None,
    errors: int = 0,
) -> PhaseResult:
    training = [
        TrainingFlow(workload="training", label=f"flow{i}", goodput_bps=value)
        for i, value in enumerate(flows)
    ]
    rings = [allreduce(ring_ms)] if ring_ms is not None else []
    goodput = sum(flows) + sum(r.ring_goodput_bps for r in rings) if flows or rings else None
    lines = {}
    if goodput is not None:
        lines["training"] = timeline(goodput)
    if p99 is not None:
        lines["inference"] = timeline(2e6)
    return PhaseResult(
        phase=name,
        policy=f"{name} mode of policies/scenarios/isolation.yaml",
        inference=inference(p99, errors) if p99 is not None else None,
        training_flows=training,
        allreduce=rings,
        training_goodput_bps=goodput,
        timeline=lines,
    )


def make_report(*, with_allreduce: bool) -> Report:
    """idle, alone and the three modes: two bulk flows, or (``with_allreduce``) one ring.

    Without the ring flowlane's figures are p99/idle 1.2 (meets), goodput/capacity
    0.9 (misses) and Jain 1.0 (meets); with it allreduce/alone is 1.04 (meets).
    """
    if with_allreduce:
        rings: dict[str, float | None] = {ALONE: 100.0, "fifo": 150.0, "static": 105.0}
        rings["flowlane"] = 104.0
        bulk: dict[str, list[float]] = {name: [] for name in (ALONE, *MODES)}
    else:
        rings = dict.fromkeys((ALONE, *MODES))
        bulk = {
            ALONE: [24e6, 24e6],
            "fifo": [30e6, 10e6],
            "static": [23e6, 23e6],
            "flowlane": [22.5e6, 22.5e6],
        }
    phases = {
        IDLE: phase(IDLE, p99=10.0, flows=[]),
        ALONE: phase(ALONE, p99=None, flows=bulk[ALONE], ring_ms=rings[ALONE]),
        "fifo": phase("fifo", p99=40.0, flows=bulk["fifo"], ring_ms=rings["fifo"], errors=3),
        "static": phase("static", p99=15.0, flows=bulk["static"], ring_ms=rings["static"]),
        "flowlane": phase("flowlane", p99=12.0, flows=bulk["flowlane"], ring_ms=rings["flowlane"]),
    }
    return Report(
        scenario="isolation",
        description="synthetic report for the tests",
        scenario_file=str(SCENARIOS / "isolation.yaml"),
        spec={"name": "isolation", "duration": 10.0},
        policy_file="policies/scenarios/isolation.yaml",
        bottleneck="s1-eth4",
        capacity_bps=CAPACITY,
        duration_s=10.0,
        ramp_s=2.0,
        modes=list(MODES),
        environment={"kernel": "test"},
        started_at="2024-01-01T00:00:00+00:00",
        finished_at="2024-01-01T00:02:00+00:00",
        phases=phases,
        headline=headline(phases, list(MODES), CAPACITY),
    )


@pytest.fixture(scope="session")
def report_factory() -> Callable[..., Report]:
    """``make_report``: tests import nothing from conftest (pytest runs in importlib mode)."""
    return make_report
