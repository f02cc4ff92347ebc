"""``flowlane scenario``: ``list`` the shipped scenarios; ``show`` a report; ``run`` execs.

``run`` replaces the process (``os.execv``) with ``python -m flowlane_bench.scenario``, which
needs root and Mininet; these tests record the call instead of making it.
``show`` reads a synthetic report.json (the scenario tests' fixture lives in
``tests/scenario/conftest.py``, out of reach here, so it is built the same way).
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from flowlane_bench.suite.across_runs import Run, compare_runs
from flowlane_bench.suite.across_runs_table import across_runs_markdown
from flowlane_bench.suite.plots import ALLREDUCE, LATENCY_CDF, THROUGHPUT
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
from flowlane_bench.suite.summary import markdown_table, summary_table
from typer.testing import CliRunner

from controller.cli import render
from controller.cli import scenario as scenario_cli
from controller.cli.main import app
from tests.support.scenarios import SHIPPED_SCENARIOS

REPO = Path(__file__).resolve().parents[2]
RUNNER = "flowlane_bench.scenario"
MODES = ["fifo", "static", "flowlane"]
CAPACITY = 50_000_000
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
WIDE = {"COLUMNS": "200"}

ExecCalls = list[tuple[str, list[str]]]


def flat(text: str) -> str:
    """Console output with rich's line wrapping and boxes undone."""
    return " ".join(text.replace("│", " ").split())


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def execv(monkeypatch: pytest.MonkeyPatch) -> ExecCalls:
    """Record ``os.execv`` calls; the recorded call then ends the command like exec would."""
    calls: ExecCalls = []

    def fake(path: str, args: list[str]) -> None:
        calls.append((path, list(args)))
        raise SystemExit(0)

    monkeypatch.setattr(os, "execv", fake)
    return calls


def phase(name: str, *, p99: float | None, flows: list[float], ring_ms: float) -> PhaseResult:
    """One phase as the runner records it: inference (unless ``alone``), bulk flows, a ring."""
    inference = None
    if p99 is not None:
        values = [p99 / 4, p99 / 2, p99 / 2, p99, p99 * 1.5]
        inference = InferenceResult(
            latency_ms=Latency(
                p50=p99 / 2, p90=p99 * 0.8, p99=p99, p999=p99 * 1.5, max=p99 * 1.5, mean=p99 / 2
            ),
            samples=len(values),
            errors=0,
            rate_target=200.0,
            rate_achieved=199.5,
            cdf=cdf_points(values),
        )
    times = [ring_ms * 0.9, ring_ms, ring_ms * 1.1]
    ring = AllReduceResult(
        workload="ring",
        workers=4,
        iterations=len(times),
        iteration_ms=times,
        iteration_ms_mean=ring_ms,
        iteration_ms_p99=max(times),
        ring_goodput_bps=5e6,
    )
    goodput = sum(flows) + ring.ring_goodput_bps
    lines = {"training": [(0.25 + 0.5 * i, goodput) for i in range(10)]}
    if p99 is not None:
        lines["inference"] = [(0.25 + 0.5 * i, 2e6) for i in range(10)]
    return PhaseResult(
        phase=name,
        policy=f"{name} mode of policies/scenarios/isolation.yaml",
        inference=inference,
        training_flows=[
            TrainingFlow(workload="training", label=f"flow{i}", goodput_bps=value)
            for i, value in enumerate(flows)
        ],
        allreduce=[ring],
        training_goodput_bps=goodput,
        timeline=lines,
    )


def make_report() -> Report:
    """idle, alone and the three modes; flowlane's p99 is 1.2x idle's, fifo's 4x."""
    phases = {
        IDLE: phase(IDLE, p99=10.0, flows=[], ring_ms=0.0),
        ALONE: phase(ALONE, p99=None, flows=[20e6, 20e6], ring_ms=100.0),
        "fifo": phase("fifo", p99=40.0, flows=[30e6, 10e6], ring_ms=150.0),
        "static": phase("static", p99=15.0, flows=[20e6, 20e6], ring_ms=105.0),
        "flowlane": phase("flowlane", p99=12.0, flows=[20e6, 20e6], ring_ms=104.0),
    }
    phases[IDLE] = phases[IDLE].model_copy(
        update={"allreduce": [], "training_goodput_bps": None, "timeline": {}}
    )
    return Report(
        scenario="isolation",
        description="synthetic report for the tests",
        scenario_file=str(REPO / "mininet" / "scenarios" / "isolation.yaml"),
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


@pytest.fixture
def report_file(tmp_path: Path) -> Path:
    """``make_report()`` as report.json, alone in its directory."""
    path = tmp_path / "report.json"
    path.write_text(make_report().model_dump_json(indent=2), encoding="utf-8")
    return path


def test_the_cli_finds_the_checkout() -> None:
    assert scenario_cli.RUNNER == RUNNER
    assert importlib.util.find_spec(RUNNER) is not None
    assert scenario_cli.SCENARIOS == REPO / "mininet" / "scenarios"


# --------------------------------------------------------------------------------------------
# list
# --------------------------------------------------------------------------------------------


def test_list_shows_every_shipped_scenario(runner: CliRunner) -> None:
    result = runner.invoke(app, ["scenario", "list"])
    assert result.exit_code == 0, result.output
    assert result.exception is None
    lines = result.stdout.splitlines()
    names = [line.split("│")[1].strip() for line in lines if line.startswith("│")]
    assert [name for name in names if name] == list(SHIPPED_SCENARIOS)
    text = flat(result.stdout)
    assert "invalid" not in text
    assert "leaf-spine" in text and "dumbbell" in text and "single" in text


def test_the_runners_tables_are_whole_when_piped() -> None:
    """`scenario run … 2>&1 | tee log` printed the runner's tables at 80 columns (rich's width
    for a pipe): headers cut to `p99/…`, descriptions wrapped over a dozen lines."""
    listed = subprocess.run(
        [sys.executable, "-m", RUNNER, "list"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": ""},
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    rows = [line for line in listed.stderr.splitlines() if line.startswith("│")]
    names = [line.split("│")[1].strip() for line in rows]
    assert names == list(SHIPPED_SCENARIOS)  # one line each: nothing wrapped
    assert max(len(line) for line in rows) > 80


def test_a_piped_summary_keeps_every_header(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner prints the summary on ``render.console(stderr=True)``: on a pipe it must not
    shrink the columns to 80 (``p99/…``)."""
    pipe = io.StringIO()
    monkeypatch.setattr(sys, "stderr", pipe)
    render.console(stderr=True).print(summary_table(make_report()))
    text = pipe.getvalue()
    assert "…" not in text
    header = next(line for line in text.splitlines() if line.startswith("┃"))
    cells = [cell.strip() for cell in header.strip("┃").split("┃")]
    assert "p99/idle (<=1.5)" in cells and "allreduce/alone (<=1.1)" in cells


def test_scenario_without_a_command_shows_help(runner: CliRunner) -> None:
    result = runner.invoke(app, ["scenario"])
    assert "list" in result.output and "run" in result.output


# --------------------------------------------------------------------------------------------
# show
# --------------------------------------------------------------------------------------------


def table_rows(text: str) -> dict[str, list[str]]:
    """A rich table's body rows by first cell (wide enough that no cell wraps)."""
    found = {}
    for line in text.splitlines():
        if line.startswith("│"):
            cells = [cell.strip() for cell in line.strip("│").split("│")]
            if cells[0]:
                found[cells[0]] = cells
    return found


def test_show_prints_the_summary_of_every_mode(runner: CliRunner, report_file: Path) -> None:
    result = runner.invoke(app, ["scenario", "show", str(report_file)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert result.exception is None
    assert "isolation: 10 s per phase, 50 Mbit/s bottleneck s1-eth4" in result.stdout
    table = table_rows(result.stdout)
    assert list(table) == ["idle", "alone", "fifo", "static", "flowlane"]
    assert table["fifo"][1:4] == ["20.000", "40.000", "4.00"]
    assert table["flowlane"][3] == "1.20 ✓"
    assert table["flowlane"][7] == "1.04 ✓"
    assert result.stderr == ""
    assert sorted(path.name for path in report_file.parent.iterdir()) == ["report.json"]


def test_show_markdown_prints_exactly_the_markdown_table(
    runner: CliRunner, report_file: Path
) -> None:
    result = runner.invoke(app, ["scenario", "show", str(report_file), "--markdown"])
    assert result.exit_code == 0, result.output
    expected = markdown_table(Report.model_validate_json(report_file.read_text(encoding="utf-8")))
    assert result.stdout == expected + "\n"
    assert result.stdout == markdown_table(make_report()) + "\n"
    assert "| **flowlane** | 6.000 | 12.000 | 1.20 |" in result.stdout
    assert "│" not in result.stdout  # no rich table around it
    assert result.stderr == ""


def test_show_plots_writes_the_pngs_next_to_the_report(
    runner: CliRunner, report_file: Path
) -> None:
    before = report_file.read_bytes()
    result = runner.invoke(app, ["scenario", "show", str(report_file), "--plots"], env=WIDE)
    assert result.exit_code == 0, result.output
    names = [LATENCY_CDF, THROUGHPUT, ALLREDUCE]
    for name in names:
        path = report_file.parent / name
        assert path.is_file(), name
        assert path.read_bytes()[:8] == PNG_MAGIC, name
        assert str(path) in flat(result.stderr)
    assert sorted(path.name for path in report_file.parent.iterdir()) == sorted(
        [*names, "report.json"]
    )
    assert report_file.read_bytes() == before  # the report itself is left as it was
    assert list(table_rows(result.stdout)) == ["idle", "alone", "fifo", "static", "flowlane"]


def test_show_plots_and_markdown_together(runner: CliRunner, report_file: Path) -> None:
    result = runner.invoke(app, ["scenario", "show", str(report_file), "--plots", "--markdown"])
    assert result.exit_code == 0, result.output
    assert result.stdout == markdown_table(make_report()) + "\n"
    assert "plots:" in result.stderr
    assert (report_file.parent / LATENCY_CDF).read_bytes()[:8] == PNG_MAGIC


def test_show_a_missing_report(runner: CliRunner, tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "report.json"
    result = runner.invoke(app, ["scenario", "show", str(missing), "--plots"], env=WIDE)
    assert result.exit_code == 2, result.output
    text = flat(result.stderr)
    assert f"cannot read {missing}" in text
    assert "No such file or directory" in text
    assert result.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_show_a_json_file_that_is_not_a_report(runner: CliRunner, tmp_path: Path) -> None:
    data = make_report().model_dump(mode="json")
    del data["scenario"]
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    result = runner.invoke(app, ["scenario", "show", str(path), "--plots"], env=WIDE)
    assert result.exit_code == 2, result.output
    text = flat(result.stderr)
    assert f"{path} is not a scenario report: 1 error(s)" in text
    assert "scenario: Field required" in text
    assert result.stdout == ""
    assert [child.name for child in tmp_path.iterdir()] == ["report.json"]


def test_show_lists_the_first_ten_errors(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"name": "isolation", "extra": 1}), encoding="utf-8")
    result = runner.invoke(app, ["scenario", "show", str(path), "--plots"], env=WIDE)
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    # 15 required fields missing and 2 unknown ones: all counted, the first ten named
    assert lines[0] == f"{path} is not a scenario report: 17 error(s)"
    assert lines[1:] == [
        f"  {field}: Field required"
        for field in (
            "scenario",
            "description",
            "scenario_file",
            "spec",
            "policy_file",
            "bottleneck",
            "capacity_bps",
            "duration_s",
            "ramp_s",
            "modes",
        )
    ]
    assert [child.name for child in tmp_path.iterdir()] == ["other.json"]


def test_show_a_file_that_is_not_json(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text("scenario: isolation\n", encoding="utf-8")
    result = runner.invoke(app, ["scenario", "show", str(path)], env=WIDE)
    assert result.exit_code == 2, result.output
    assert "is not a scenario report" in flat(result.stderr)
    assert result.stdout == ""


def test_show_needs_a_report(runner: CliRunner) -> None:
    result = runner.invoke(app, ["scenario", "show"])
    assert result.exit_code == 2
    assert "Missing argument 'report'" in flat(result.output)


# --------------------------------------------------------------------------------------------
# run: option checks happen before anything runs
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("modes", "message"),
    [
        ("bogus", "'bogus' is not a mode (fifo, static, flowlane, stp, ecmp, perflow)"),
        ("fifo,turbo", "'turbo' is not a mode"),
        ("fifo,fifo", "a mode is listed twice"),
        (" , ", "give at least one mode"),
    ],
)
def test_run_rejects_bad_modes_without_running(
    runner: CliRunner, execv: ExecCalls, modes: str, message: str
) -> None:
    result = runner.invoke(app, ["scenario", "run", "isolation", "--modes", modes])
    assert result.exit_code == 2, result.output
    assert message in flat(result.output)
    assert execv == []


def test_run_rejects_a_too_short_duration(runner: CliRunner, execv: ExecCalls) -> None:
    result = runner.invoke(app, ["scenario", "run", "isolation", "--duration", "0.1"])
    assert result.exit_code == 2
    assert "duration" in flat(result.output)
    assert execv == []


def test_run_needs_a_scenario(runner: CliRunner, execv: ExecCalls) -> None:
    result = runner.invoke(app, ["scenario", "run"])
    assert result.exit_code == 2
    assert execv == []


# --------------------------------------------------------------------------------------------
# run: hand-over to the runner
# --------------------------------------------------------------------------------------------


def test_run_execs_the_runner_with_every_option(
    runner: CliRunner, execv: ExecCalls, tmp_path: Path
) -> None:
    out = tmp_path / "report"
    result = runner.invoke(
        app,
        [
            "scenario",
            "run",
            "incast",
            "--modes",
            " flowlane , fifo",
            "--duration",
            "7.5",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert execv == [
        (
            sys.executable,
            [
                sys.executable,
                "-m",
                RUNNER,
                "run",
                "incast",
                "--modes",
                "flowlane,fifo",
                "--duration",
                "7.5",
                "--out",
                str(out),
            ],
        )
    ]


def test_run_passes_only_what_was_given(runner: CliRunner, execv: ExecCalls) -> None:
    result = runner.invoke(app, ["scenario", "run", "leafspine"])
    assert result.exit_code == 0, result.output
    assert execv == [(sys.executable, [sys.executable, "-m", RUNNER, "run", "leafspine"])]


def test_run_passes_a_scenario_file_through(
    runner: CliRunner, execv: ExecCalls, tmp_path: Path
) -> None:
    path = tmp_path / "mine.yaml"
    result = runner.invoke(app, ["scenario", "run", str(path), "--modes", "static"])
    assert result.exit_code == 0, result.output
    (_, args) = execv[0]
    assert args[3:] == ["run", str(path), "--modes", "static"]


# --------------------------------------------------------------------------------------------
# compare: several runs' reports, each run's figure and the median
# --------------------------------------------------------------------------------------------


def write_runs(directory: Path, flowlane_over_idle: list[float]) -> list[Path]:
    """``make_report()`` once per figure, flowlane's p99/idle set to it; ``run-N/report.json``."""
    paths = []
    for index, figure in enumerate(flowlane_over_idle):
        report = make_report()
        rows = [
            row.model_copy(update={"p99_over_idle": figure}) if row.mode == "flowlane" else row
            for row in report.headline
        ]
        path = directory / f"run-{index}" / "report.json"
        path.parent.mkdir()
        path.write_text(report.model_copy(update={"headline": rows}).model_dump_json(), "utf-8")
        paths.append(path)
    return paths


def test_compare_prints_each_run_and_the_median(runner: CliRunner, tmp_path: Path) -> None:
    paths = write_runs(tmp_path, [1.2, 6.0, 1.3])  # run 2 stalled
    result = runner.invoke(app, ["scenario", "compare", *map(str, paths)], env=WIDE)
    assert result.exit_code == 0, result.output
    text = flat(result.stdout)
    assert "isolation: 3 runs, median of each run's figure" in text
    # no control phase in these reports: every run is read against idle
    assert "p99/idle per run" in text and "p99/control" not in text
    assert "flowlane 1.20, 6.00, 1.30 1.30 ✓ 2 of 3" in text
    assert "fifo 4.00, 4.00, 4.00 4.00 0 of 3" in text
    for index, path in enumerate(paths, 1):
        assert f"run {index}: {path} (10 s per phase)" in text
    assert result.stderr == ""


def test_compare_markdown_prints_exactly_the_markdown_table(
    runner: CliRunner, tmp_path: Path
) -> None:
    paths = write_runs(tmp_path, [1.2, 6.0, 1.3])
    result = runner.invoke(app, ["scenario", "compare", *map(str, paths), "--markdown"])
    assert result.exit_code == 0, result.output
    runs = [Run(str(p), Report.model_validate_json(p.read_text("utf-8"))) for p in paths]
    assert result.stdout == across_runs_markdown(compare_runs(runs)) + "\n"
    lines = result.stdout.splitlines()
    assert lines[0] == "| mode | p99/idle per run | p99/idle median (<=1.5) | runs <=1.5 |"
    assert lines[1] == "|---|---|---|---|"
    assert lines[4] == "| **flowlane** | 1.20, 6.00, 1.30 | 1.30 ✓ | 2 of 3 |"
    assert "│" not in result.stdout
    assert result.stderr == ""


def test_compare_markdown_names_skipped_modes_on_stderr(runner: CliRunner, tmp_path: Path) -> None:
    paths = write_runs(tmp_path, [1.2, 1.3])
    report = Report.model_validate_json(paths[1].read_text("utf-8"))
    rows = [row for row in report.headline if row.mode != "static"]
    paths[1].write_text(report.model_copy(update={"headline": rows}).model_dump_json(), "utf-8")
    result = runner.invoke(app, ["scenario", "compare", *map(str, paths), "--markdown"])
    assert result.exit_code == 0, result.output
    assert flat(result.stderr) == f"skipped static: not in {paths[1]}"
    assert "static" not in result.stdout
    assert [line.split("|")[1].strip() for line in result.stdout.splitlines()[2:]] == [
        "fifo",
        "**flowlane**",
    ]


def test_compare_needs_two_reports(runner: CliRunner, tmp_path: Path) -> None:
    (path,) = write_runs(tmp_path, [1.2])
    result = runner.invoke(app, ["scenario", "compare", str(path)], env=WIDE)
    assert result.exit_code == 2, result.output
    assert "compare needs at least two reports, got 1" in flat(result.stderr)
    assert result.stdout == ""
    none = runner.invoke(app, ["scenario", "compare"])
    assert none.exit_code == 2
    assert "Missing argument 'reports'" in flat(none.output)


def test_compare_refuses_the_same_report_twice(runner: CliRunner, tmp_path: Path) -> None:
    paths = write_runs(tmp_path, [1.2, 1.3])
    again = paths[0].parent / ".." / "run-0" / "report.json"
    result = runner.invoke(app, ["scenario", "compare", *map(str, paths), str(again)], env=WIDE)
    assert result.exit_code == 2, result.output
    assert f"{again} is given twice (as {paths[0]})" in flat(result.stderr)
    assert result.stdout == ""


def test_compare_a_missing_report(runner: CliRunner, tmp_path: Path) -> None:
    paths = write_runs(tmp_path, [1.2, 1.3])
    missing = tmp_path / "nope" / "report.json"
    result = runner.invoke(app, ["scenario", "compare", *map(str, paths), str(missing)], env=WIDE)
    assert result.exit_code == 2, result.output
    text = flat(result.stderr)
    assert f"cannot read {missing}" in text and "No such file or directory" in text
    assert result.stdout == ""


def test_compare_a_file_that_is_not_a_report(runner: CliRunner, tmp_path: Path) -> None:
    paths = write_runs(tmp_path, [1.2, 1.3])
    data = json.loads(paths[1].read_text("utf-8"))
    del data["scenario"]
    paths[1].write_text(json.dumps(data), "utf-8")
    result = runner.invoke(app, ["scenario", "compare", *map(str, paths)], env=WIDE)
    assert result.exit_code == 2, result.output
    text = flat(result.stderr)
    assert f"{paths[1]} is not a scenario report: 1 error(s)" in text
    assert "scenario: Field required" in text
    assert result.stdout == ""


def test_compare_runs_of_different_scenarios(runner: CliRunner, tmp_path: Path) -> None:
    paths = write_runs(tmp_path, [1.2, 1.3])
    report = Report.model_validate_json(paths[1].read_text("utf-8"))
    paths[1].write_text(report.model_copy(update={"scenario": "incast"}).model_dump_json(), "utf-8")
    result = runner.invoke(app, ["scenario", "compare", *map(str, paths)], env=WIDE)
    assert result.exit_code == 2, result.output
    assert (
        f"cannot compare: {paths[1]} is a run of scenario 'incast', {paths[0]} of 'isolation'"
        in flat(result.stderr)
    )
    assert result.stdout == ""
