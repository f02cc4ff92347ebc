"""Several runs of one scenario: each run's figures, the medians across runs, the tables.

The reports are the conftest's synthetic one with hand-made headline rows, so every
per-run figure, and so every median, is known in advance.  Three runs of
``ecmp`` and ``flowlane``; run 2 is the one a stall hit (flowlane's p99/control 9.16,
as in docs/jobs.md's 16:47 run).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from flowlane_bench.suite.across_runs import AcrossRuns, AcrossRunsError, Run, compare_runs
from flowlane_bench.suite.across_runs_table import across_runs_markdown, across_runs_table
from flowlane_bench.suite.report import CONTROL, Headline, Report
from rich.console import Console

P99 = {"ecmp": (0.90, 1.05, 1.30), "flowlane": (1.10, 9.16, 1.00)}
"""p99/control per run; run 2's flowlane phase had a cluster of stalled requests."""
RING = {"ecmp": (150.0, 120.0, 140.0), "flowlane": (100.0, 102.0, 98.0)}
"""Slowest ring p50 ms per run: flowlane saves 1/3, 0.15 and 0.3 of ecmp's time."""


def row(
    mode: str, over_control: float | None, ring: float | None, over_idle: float = 2.0
) -> Headline:
    return Headline(
        mode=mode,
        inference_p99_ms=10.0,
        p99_over_idle=over_idle,
        p99_over_control=over_control,
        goodput_over_capacity=None,
        allreduce_over_alone=None,
        jain=None,
        allreduce_p50_ms=ring,
    )


@pytest.fixture
def runs(report_factory: Callable[..., Report]) -> list[Run]:
    """Three runs of one scenario: run i has the i-th figure of every mode."""
    base = report_factory(with_allreduce=True)
    return [
        Run(
            f"reports/jobs-fabric-{index}/report.json",
            base.model_copy(
                update={
                    "modes": list(P99),
                    "headline": [row(mode, P99[mode][index], RING[mode][index]) for mode in P99],
                }
            ),
        )
        for index in range(3)
    ]


def with_headline(run: Run, headline: list[Headline], **update: object) -> Run:
    return Run(run.source, run.report.model_copy(update={"headline": headline, **update}))


# --------------------------------------------------------------------------------------------
# compare_runs
# --------------------------------------------------------------------------------------------


def test_each_runs_figure_and_the_median(runs: list[Run]) -> None:
    result = compare_runs(runs)
    assert result.scenario == "isolation"
    assert result.sources == tuple(run.source for run in runs)
    assert result.durations_s == (10.0, 10.0, 10.0)
    assert result.reference == CONTROL and result.figure == "p99_over_control"
    assert result.allreduce and result.skipped == ()
    ecmp, flowlane = result.modes
    assert (ecmp.mode, flowlane.mode) == ("ecmp", "flowlane")
    assert ecmp.p99 == P99["ecmp"] and flowlane.p99 == P99["flowlane"]
    assert ecmp.p99_median == 1.05 and ecmp.p99_met == 2  # 1.30 misses 1.25
    assert ecmp.allreduce_p50_ms == RING["ecmp"] and ecmp.allreduce_p50_median == 140.0
    assert flowlane.allreduce_p50_ms == RING["flowlane"] and flowlane.allreduce_p50_median == 100.0


def test_a_stalled_run_does_not_move_the_median(runs: list[Run]) -> None:
    """Run 2's 9.16 is counted as a miss and shown, but the median is the other runs' middle."""
    flowlane = compare_runs(runs).modes[1]
    assert flowlane.p99[1] == 9.16
    assert flowlane.p99_median == 1.10
    assert flowlane.p99_met == 2
    # one run alone would have read 9.16: the figure the median replaces
    assert compare_runs([runs[1], runs[1]]).modes[1].p99_median == 9.16


def test_flowlanes_saving_is_taken_per_run_then_the_median(runs: list[Run]) -> None:
    ecmp, flowlane = compare_runs(runs).modes
    assert ecmp.flowlane_saving == pytest.approx((1 / 3, 0.15, 0.3))
    assert ecmp.flowlane_saving_median == pytest.approx(0.3)
    # not 1 - median(flowlane) / median(ecmp) = 1 - 100/140: each run against itself
    assert ecmp.flowlane_saving_median != pytest.approx(1 - 100 / 140)
    assert flowlane.flowlane_saving == () and flowlane.flowlane_saving_median is None


def test_a_flowlane_slower_than_the_mode_saves_a_negative_fraction(runs: list[Run]) -> None:
    slow = [
        with_headline(run, [row("ecmp", 1.0, 100.0), row("flowlane", 1.0, 125.0)]) for run in runs
    ]
    ecmp = compare_runs(slow).modes[0]
    assert ecmp.flowlane_saving_median == pytest.approx(-0.25)


def test_runs_of_different_scenarios_are_refused_naming_the_file(runs: list[Run]) -> None:
    other = Run(
        "reports/incast-1/report.json", runs[2].report.model_copy(update={"scenario": "incast"})
    )
    with pytest.raises(AcrossRunsError) as caught:
        compare_runs([runs[0], runs[1], other])
    message = str(caught.value)
    assert "reports/incast-1/report.json is a run of scenario 'incast'" in message
    assert "reports/jobs-fabric-0/report.json of 'isolation'" in message


def test_one_report_is_not_a_comparison(runs: list[Run]) -> None:
    with pytest.raises(AcrossRunsError, match="at least two reports, got 1"):
        compare_runs(runs[:1])


def test_a_mode_some_runs_lack_is_skipped_and_named(runs: list[Run]) -> None:
    runs[1] = with_headline(runs[1], [*runs[1].report.headline, row("perflow", 1.2, 110.0)])
    runs[2] = with_headline(runs[2], [*runs[2].report.headline, row("perflow", 1.3, 115.0)])
    result = compare_runs(runs)
    assert [mode.mode for mode in result.modes] == ["ecmp", "flowlane"]
    assert result.skipped == (("perflow", ("reports/jobs-fabric-0/report.json",)),)


def test_no_mode_in_every_run(runs: list[Run]) -> None:
    runs[1] = with_headline(runs[1], [row("perflow", 1.2, 110.0)])
    with pytest.raises(AcrossRunsError, match="no mode is in every report"):
        compare_runs(runs)


def test_without_a_control_phase_every_run_is_read_against_idle(runs: list[Run]) -> None:
    """One report from before the control phase: idle for all, never a mix of references."""
    runs[0] = with_headline(
        runs[0], [row("ecmp", None, 150.0, over_idle=1.4), row("flowlane", None, 100.0, 1.6)]
    )
    result = compare_runs(runs)
    assert result.reference == "idle" and result.figure == "p99_over_idle"
    ecmp, flowlane = result.modes
    assert ecmp.p99 == (1.4, 2.0, 2.0) and ecmp.p99_met == 1  # target <=1.5
    assert flowlane.p99 == (1.6, 2.0, 2.0) and flowlane.p99_met == 0


def test_without_allreduce_there_are_no_ring_figures(runs: list[Run]) -> None:
    plain = [
        with_headline(run, [row(m, P99[m][i], None) for m in P99]) for i, run in enumerate(runs)
    ]
    result = compare_runs(plain)
    assert not result.allreduce
    for mode in result.modes:
        assert mode.allreduce_p50_ms == () and mode.allreduce_p50_median is None
        assert mode.flowlane_saving == () and mode.flowlane_saving_median is None
    assert "all-reduce" not in across_runs_markdown(result)


def test_reports_without_the_ring_p50_leave_it_out_of_the_median(runs: list[Run]) -> None:
    """Reports written before ``iteration_ms_p50`` was kept have no slowest-ring figure."""
    runs[0] = with_headline(runs[0], [row("ecmp", 0.9, None), row("flowlane", 1.1, None)])
    ecmp = compare_runs(runs).modes[0]
    assert ecmp.allreduce_p50_ms == (None, 120.0, 140.0) and ecmp.allreduce_p50_median == 130.0
    assert ecmp.flowlane_saving == pytest.approx((None, 0.15, 0.3))
    assert ecmp.flowlane_saving_median == pytest.approx(0.225)


# --------------------------------------------------------------------------------------------
# tables
# --------------------------------------------------------------------------------------------


def markdown_rows(text: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in text.splitlines()]


def test_markdown_table_shape(runs: list[Run]) -> None:
    text = across_runs_markdown(compare_runs(runs))
    header, rule, *body = markdown_rows(text)
    assert header == [
        "mode",
        "p99/control per run",
        "p99/control median (<=1.25)",
        "runs <=1.25",
        "all-reduce p50 ms per run",
        "all-reduce p50 ms median",
        "flowlane saves (median)",
    ]
    assert rule == ["---"] * len(header)
    assert body == [
        ["ecmp", "0.90, 1.05, 1.30", "1.05", "2 of 3", "150.0, 120.0, 140.0", "140.0", "+30.0%"],
        [
            "**flowlane**",
            "1.10, 9.16, 1.00",
            "1.10 ✓",
            "2 of 3",
            "100.0, 102.0, 98.0",
            "100.0",
            "-",
        ],
    ]
    assert all(line.startswith("|") and line.endswith("|") for line in text.splitlines())


def test_markdown_marks_a_missed_median(runs: list[Run]) -> None:
    missed = [
        with_headline(run, [row("ecmp", 1.0, None), row("flowlane", 1.5, None)]) for run in runs
    ]
    body = markdown_rows(across_runs_markdown(compare_runs(missed)))[2:]
    assert body[1][:4] == ["**flowlane**", "1.50, 1.50, 1.50", "1.50 ✗", "0 of 3"]


def render(result: AcrossRuns) -> str:
    console = Console(record=True, width=200)
    console.print(across_runs_table(result))
    return console.export_text()


def test_rich_table_marks_only_flowlane_and_names_the_runs(runs: list[Run]) -> None:
    runs[1] = with_headline(runs[1], [*runs[1].report.headline, row("perflow", 1.2, 110.0)])
    text = render(compare_runs(runs))
    assert "isolation: 3 runs, median of each run's figure" in text
    lines = {line.split("│")[1].strip(): line for line in text.splitlines() if "│" in line}
    assert "1.10 ✓" in lines["flowlane"] and "2 of 3" in lines["flowlane"]
    assert "+30.0%" in lines["ecmp"] and "✓" not in lines["ecmp"] and "✗" not in lines["ecmp"]
    for index in range(3):
        assert f"run {index + 1}: reports/jobs-fabric-{index}/report.json (10 s per phase)" in text
    assert (
        "skipped perflow: not in reports/jobs-fabric-0/report.json,"
        " reports/jobs-fabric-2/report.json" in text
    )
