"""Reports of fabric scenarios: goodput against the optimum, link events, their tables and plots.

The report is built the way the runner builds it: ``phase_result`` per phase,
link events through ``event_results``, ``headline`` with the optimum; only
the ``idle`` reference runs (``references: [idle]``).
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from flowlane_bench.suite.failover import event_results
from flowlane_bench.suite.plots import LATENCY_CDF, THROUGHPUT, write_plots
from flowlane_bench.suite.probe import probe_run
from flowlane_bench.suite.report import (
    IDLE,
    InferenceResult,
    Latency,
    PhaseResult,
    ProbeResult,
    Report,
    TrainingFlow,
    headline,
    meets,
)
from flowlane_bench.suite.results import interval_spans, phase_result
from flowlane_bench.suite.spec import LinkEvent, LinkState
from flowlane_bench.suite.stats import Span, cdf_points
from flowlane_bench.suite.summary import events_table, markdown_table, summary_table
from rich.console import Console

MODES = ["stp", "ecmp", "flowlane"]
OPTIMUM = 40e6
GOODPUT = {"stp": [9.5e6, 9.5e6], "ecmp": [19e6, 9.5e6], "flowlane": [19.2e6, 19e6]}
EVENTS = [
    LinkEvent(at=4, link=("leaf1", "spine2"), state=LinkState.DOWN),
    LinkEvent(at=8, link=("leaf1", "spine2"), state=LinkState.UP),
]


def inference(p99: float) -> InferenceResult:
    return InferenceResult(
        latency_ms=Latency(p50=1, p90=2, p99=p99, p999=p99, max=p99, mean=1),
        samples=100,
        errors=0,
        rate_target=50,
        rate_achieved=50,
        cdf=cdf_points([1, 2, p99]),
    )


def mode_phase(mode: str) -> PhaseResult:
    origin = 100.0
    flows = [
        TrainingFlow(workload="training", label=f"h{i}->h{i + 3}", goodput_bps=g)
        for i, g in enumerate(GOODPUT[mode], start=1)
    ]
    total = sum(GOODPUT[mode])
    # Full rate, half of it for a second after the failure, then back.
    spans = [Span(origin, origin + 4, int(total * 4 / 8))]
    spans += [Span(origin + 4, origin + 5, int(total / 16))]
    spans += [Span(origin + 5, origin + 12, int(total * 7 / 8))]
    result = phase_result(
        mode,
        f"{mode} mode of policies/scenarios/failover.yaml",
        inference=inference(3.0),
        inference_spans=[],
        bulk=[(flow, spans if index == 0 else []) for index, flow in enumerate(flows)],
        allreduce=[],
        origin=origin,
        length_s=12,
        interval_s=0.2,
    )
    sent = 12_000
    lost = set(range(4000, 4000 + {"stp": 900, "ecmp": 2, "flowlane": 2}[mode]))
    run = probe_run(
        {"rate": 1000, "start_unix": origin, "sent": sent},
        {"arrivals": [[s, origin + s / 1000] for s in range(sent) if s not in lost]},
    )
    result.probe = ProbeResult(
        workload="probe",
        label="h3->h4",
        path=["leaf1-eth5", "leaf2-eth1", "spine2-eth2"],
        crosses_first_event=True,
        rate=1000,
        sent=sent,
        received=sent - len(lost),
        lost=len(lost),
        loss_ms=float(len(lost)),
        longest_gap_ms=float(len(lost) + 1),
    )
    result.events = event_results(
        EVENTS,
        origin=origin,
        executed=[4.0, 8.0],
        phase_s=12,
        optimums=[20e6, 40e6],
        series=result.timeline["training"],
        interval_s=0.2,
        probe=run,
    )
    return result


@pytest.fixture(scope="module")
def report() -> Report:
    phases = {
        IDLE: phase_result(
            IDLE,
            "flowlane mode",
            inference=inference(2.0),
            inference_spans=[],
            bulk=[],
            allreduce=[],
            origin=0,
            length_s=5,
        )
    }
    phases |= {mode: mode_phase(mode) for mode in MODES}
    built = Report(
        scenario="failover",
        description="synthetic",
        scenario_file="mininet/scenarios/failover.yaml",
        spec={},
        policy_file="policies/scenarios/failover.yaml",
        bottleneck="leaf1-eth5",
        capacity_bps=20_000_000,
        optimum_bps=OPTIMUM,
        duration_s=8,
        ramp_s=3,
        modes=MODES,
        environment={},
        started_at="2026-12-02T00:00:00+00:00",
        finished_at="2026-12-02T00:01:00+00:00",
        phases=phases,
        headline=headline(phases, MODES, 20_000_000, OPTIMUM),
    )
    return Report.model_validate_json(built.model_dump_json())  # what report.json holds


def test_goodput_is_read_against_the_optimum(report: Report) -> None:
    ratios = {row.mode: row.goodput_over_optimum for row in report.headline}
    assert ratios == {"stp": 0.475, "ecmp": 0.7125, "flowlane": 0.955}
    assert meets("goodput_over_optimum", 0.955) and not meets("goodput_over_optimum", 0.7125)
    assert report.optimum_bps == OPTIMUM


def test_without_an_optimum_there_is_no_ratio(report: Report) -> None:
    rows = headline(report.phases, MODES, 20_000_000)
    assert [row.goodput_over_optimum for row in rows] == [None, None, None]


def test_events_carry_probe_loss_and_recovery(report: Report) -> None:
    down, up = report.phases["stp"].events
    assert down.link == ("leaf1", "spine2") and down.state == "down"
    assert down.probe_lost == 900 and down.probe_loss_ms == 900.0
    assert down.optimum_bps == 20e6
    # stp: 19 Mbit/s total, half of it after the failure for a second; 0.9 x 20 = 18 is met at 5 s.
    assert down.recovery_s == pytest.approx(1.0)
    assert up.probe_lost == 0 and up.optimum_bps == 40e6
    assert report.phases["flowlane"].events[0].probe_loss_ms == 2.0
    assert report.phases["flowlane"].timeline_interval_s == 0.2


def render(table: object) -> str:
    console = Console(record=True, width=220)
    console.print(table)
    return console.export_text()


def test_the_summary_shows_the_optimum_column(report: Report) -> None:
    text = render(summary_table(report))
    assert "goodput/optimum (>=0.95)" in text
    assert "0.955 ✓" in text and "0.713" in text


def test_the_events_table_has_a_row_per_mode_and_event(report: Report) -> None:
    table = events_table(report)
    assert table is not None
    text = render(table)
    assert "leaf1-spine2 down" in text and "leaf1-spine2 up" in text
    assert text.count("leaf1-spine2 down") == 3
    assert "900.0" in text


def test_no_events_no_events_table(report: Report) -> None:
    bare = report.model_copy(
        update={
            "phases": {k: v.model_copy(update={"events": []}) for k, v in report.phases.items()}
        }
    )
    assert events_table(bare) is None
    assert "link event" not in markdown_table(bare)


def test_the_markdown_table_has_the_optimum_and_the_events(report: Report) -> None:
    text = markdown_table(report)
    lines = text.splitlines()
    assert lines[0].endswith("| Jain | goodput/optimum |")
    assert lines[1] == "|" + "---|" * 10
    assert any(line.startswith("| **flowlane** |") and line.endswith(" 0.955 |") for line in lines)
    assert "| stp | 4 | leaf1-spine2 down | - | 900 | 900.0 | 901.0 | 20.0 | 1.0 |" in lines


def test_plots_without_the_alone_reference(report: Report, tmp_path: Path) -> None:
    assert write_plots(report, tmp_path) == [LATENCY_CDF, THROUGHPUT]
    data = (tmp_path / THROUGHPUT).read_bytes()
    width, height = struct.unpack(">II", data[16:24])
    assert width > 300 and height > 200


def test_measured_intervals_follow_the_omitted_ramp() -> None:
    """iperf3 restarts its clock after ``-O``: measured intervals come after the ramp."""
    intervals = [
        {"sum": {"start": 0.0, "end": 1.0, "bytes": 100, "omitted": True}},
        {"sum": {"start": 1.0, "end": 2.0, "bytes": 100, "omitted": True}},
        {"sum": {"start": 0.0, "end": 0.5, "bytes": 50, "omitted": False}},
        {"sum": {"start": 0.5, "end": 1.0, "bytes": 60, "omitted": False}},
    ]
    spans = interval_spans(10.0, intervals)
    assert spans == [
        Span(10.0, 11.0, 100),
        Span(11.0, 12.0, 100),
        Span(12.0, 12.5, 50),
        Span(12.5, 13.0, 60),
    ]
    assert interval_spans(10.0, intervals[2:]) == [Span(10.0, 10.5, 50), Span(10.5, 11.0, 60)]
