"""The report's headline: each mode against the idle and alone phases of the same run."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from flowlane_bench.suite.report import (
    ALONE,
    CONTROL,
    IDLE,
    TARGETS,
    AllReduceResult,
    InferenceResult,
    Latency,
    PhaseResult,
    Report,
    TrainingFlow,
    headline,
    meets,
)

CAPACITY = 50_000_000


def inference(p99: float) -> InferenceResult:
    return InferenceResult(
        latency_ms=Latency(p50=p99 / 3, p90=p99 / 2, p99=p99, p999=p99 * 2, max=p99 * 3, mean=1.0),
        samples=1000,
        errors=0,
        rate_target=200.0,
        rate_achieved=200.0,
        cdf=[(p99 / 3, 0.5), (p99, 0.99), (p99 * 3, 1.0)],
    )


def ring(mean_ms: float, workload: str = "ring") -> AllReduceResult:
    return AllReduceResult(
        workload=workload,
        workers=4,
        iterations=10,
        iteration_ms=[mean_ms] * 10,
        iteration_ms_mean=mean_ms,
        iteration_ms_p99=mean_ms,
        ring_goodput_bps=10e6,
    )


def flows(*goodputs: float) -> list[TrainingFlow]:
    return [
        TrainingFlow(workload="training", label=f"f{i}", goodput_bps=g)
        for i, g in enumerate(goodputs)
    ]


def phase(
    name: str,
    p99: float | None = None,
    training: list[TrainingFlow] | None = None,
    rings: list[AllReduceResult] | None = None,
    goodput: float | None = None,
) -> PhaseResult:
    return PhaseResult(
        phase=name,
        policy=f"{name} mode of p.yaml",
        inference=inference(p99) if p99 is not None else None,
        training_flows=training or [],
        allreduce=rings or [],
        training_goodput_bps=goodput,
    )


def test_headline_ratios_against_idle() -> None:
    phases = {
        IDLE: phase(IDLE, p99=8.0),
        "fifo": phase("fifo", p99=40.0, training=flows(40e6, 5e6), goodput=45e6),
        "flowlane": phase("flowlane", p99=10.0, training=flows(23e6, 23.5e6), goodput=46.5e6),
    }
    rows = headline(phases, ["fifo", "flowlane"], CAPACITY)
    assert [row.mode for row in rows] == ["fifo", "flowlane"]
    fifo, flowlane = rows
    assert fifo.inference_p99_ms == 40.0
    assert fifo.p99_over_idle == 5.0
    assert fifo.goodput_over_capacity == 0.9
    assert fifo.jain == round((45e6) ** 2 / (2 * (40e6**2 + 5e6**2)), 4)
    assert fifo.allreduce_over_alone is None  # no all-reduce, no alone phase
    assert flowlane.p99_over_idle == 1.25
    assert flowlane.goodput_over_capacity == 0.93
    assert flowlane.jain == pytest.approx(0.9999, abs=1e-4)


def test_headline_ratios_against_control() -> None:
    """Control carries the CPU load without the shared queue: p99/control is the network's part."""
    phases = {
        IDLE: phase(IDLE, p99=2.0),
        CONTROL: phase(CONTROL, p99=4.0, training=flows(24e6, 24e6), goodput=48e6),
        "fifo": phase("fifo", p99=40.0, goodput=45e6),
        "flowlane": phase("flowlane", p99=4.8, goodput=46.5e6),
    }
    fifo, flowlane = headline(phases, ["fifo", "flowlane"], CAPACITY)
    assert (fifo.p99_over_idle, fifo.p99_over_control) == (20.0, 10.0)
    assert (flowlane.p99_over_idle, flowlane.p99_over_control) == (2.4, 1.2)
    assert meets("p99_over_control", flowlane.p99_over_control) is True
    assert meets("p99_over_idle", flowlane.p99_over_idle) is False


def test_no_control_phase_means_no_control_ratio() -> None:
    phases = {IDLE: phase(IDLE, p99=2.0), "fifo": phase("fifo", p99=3.0)}
    assert headline(phases, ["fifo"], CAPACITY)[0].p99_over_control is None


def test_a_report_without_the_control_figure_still_loads() -> None:
    """Reports written before the control phase existed stay readable."""
    phases = {IDLE: phase(IDLE, p99=2.0), "fifo": phase("fifo", p99=3.0)}
    (row,) = headline(phases, ["fifo"], CAPACITY)
    data = row.model_dump()
    del data["p99_over_control"]
    assert type(row).model_validate(data).p99_over_control is None


def test_headline_follows_the_order_of_modes() -> None:
    phases = {
        IDLE: phase(IDLE, p99=10.0),
        "static": phase("static", p99=12.0),
        "fifo": phase("fifo", p99=30.0),
    }
    rows = headline(phases, ["static", "fifo"], CAPACITY)
    assert [(r.mode, r.p99_over_idle) for r in rows] == [("static", 1.2), ("fifo", 3.0)]


def test_allreduce_ratio_against_the_alone_phase() -> None:
    phases = {
        IDLE: phase(IDLE, p99=5.0),
        ALONE: phase(ALONE, rings=[ring(100.0), ring(50.0, "second")], goodput=20e6),
        "flowlane": phase(
            "flowlane", p99=6.0, rings=[ring(110.0), ring(55.0, "second")], goodput=20e6
        ),
    }
    (row,) = headline(phases, ["flowlane"], CAPACITY)
    assert row.allreduce_over_alone == 1.1  # (110 + 55) / (100 + 50)
    assert row.goodput_over_capacity == 0.4


def test_allreduce_ratio_needs_the_alone_phase() -> None:
    phases = {
        IDLE: phase(IDLE, p99=5.0),
        "flowlane": phase("flowlane", p99=6.0, rings=[ring(110.0)], goodput=10e6),
    }
    assert headline(phases, ["flowlane"], CAPACITY)[0].allreduce_over_alone is None


def test_jain_only_with_more_than_one_flow() -> None:
    phases = {
        IDLE: phase(IDLE, p99=5.0),
        "one": phase("one", p99=5.0, training=flows(30e6), goodput=30e6),
        "none": phase("none", p99=5.0),
        "two": phase("two", p99=5.0, training=flows(30e6, 0.0), goodput=30e6),
    }
    rows = {row.mode: row for row in headline(phases, ["one", "none", "two"], CAPACITY)}
    assert rows["one"].jain is None
    assert rows["none"].jain is None
    assert rows["two"].jain == 0.5


def test_no_training_goodput_means_no_goodput_ratio() -> None:
    phases = {IDLE: phase(IDLE, p99=5.0), "fifo": phase("fifo", p99=5.0)}
    (row,) = headline(phases, ["fifo"], CAPACITY)
    assert row.goodput_over_capacity is None
    assert row.p99_over_idle == 1.0


def test_zero_goodput_is_a_ratio_of_zero() -> None:
    phases = {IDLE: phase(IDLE, p99=5.0), "fifo": phase("fifo", p99=5.0, goodput=0.0)}
    assert headline(phases, ["fifo"], CAPACITY)[0].goodput_over_capacity == 0.0


# --------------------------------------------------------------------------------------------
# Targets
# --------------------------------------------------------------------------------------------


def test_targets_are_flowlanes_documented_goals() -> None:
    assert TARGETS == {
        "p99_over_control": ("<=", 1.25),
        "p99_over_idle": ("<=", 1.5),
        "goodput_over_capacity": (">=", 0.93),
        "allreduce_over_alone": ("<=", 1.10),
        "jain": (">=", 0.95),
        "goodput_over_optimum": (">=", 0.95),
        "jobs_jain": (">=", 0.95),
    }


@pytest.mark.parametrize(
    ("figure", "value", "verdict"),
    [
        ("p99_over_control", 1.25, True),
        ("p99_over_control", 1.26, False),
        ("p99_over_idle", 1.2, True),
        ("p99_over_idle", 1.5, True),
        ("p99_over_idle", 1.51, False),
        ("goodput_over_capacity", 0.93, True),
        ("goodput_over_capacity", 0.929, False),
        ("goodput_over_capacity", 1.02, True),
        ("allreduce_over_alone", 1.1, True),
        ("allreduce_over_alone", 1.2, False),
        ("jain", 0.95, True),
        ("jain", 0.5, False),
        ("jain", None, None),
        ("p99_over_idle", None, None),
    ],
)
def test_meets(figure: str, value: float | None, verdict: bool | None) -> None:
    assert meets(figure, value) is verdict


def test_meets_an_unknown_figure_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        meets("latency", 1.0)


# --------------------------------------------------------------------------------------------
# report.json
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("with_allreduce", [False, True])
def test_report_round_trips_through_json(
    report_factory: Callable[..., Report], with_allreduce: bool
) -> None:
    report = report_factory(with_allreduce=with_allreduce)
    text = report.model_dump_json(indent=2)
    again = Report.model_validate_json(text)
    assert again == report
    assert again.model_dump_json(indent=2) == text
    assert again.targets == TARGETS
    assert again.phases["flowlane"].inference is not None
    cdf = again.phases["flowlane"].inference.cdf
    assert all(isinstance(point, tuple) for point in cdf)


def test_report_rejects_unknown_fields(report_factory: Callable[..., Report]) -> None:
    data = report_factory(with_allreduce=False).model_dump(mode="json")
    data["surprise"] = 1
    with pytest.raises(ValueError, match="surprise"):
        Report.model_validate(data)
