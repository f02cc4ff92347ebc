"""``flowlane scenario``: list the shipped scenarios, run one in Mininet.

Scenarios live in the source checkout (``mininet/scenarios``) next to their
runner (``python -m flowlane_bench.scenario``, ``mininet/flowlane_bench/scenario.py``),
which drives Mininet and so needs root and Debian's ``mininet`` package; ``run``
hands over to it in the same interpreter (``exec``), so signals and the live
display go straight to it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from flowlane_bench.suite.across_runs import AcrossRunsError, Run, compare_runs
from flowlane_bench.suite.across_runs_table import across_runs_markdown, across_runs_table
from flowlane_bench.suite.report import Report
from flowlane_bench.suite.spec import Mode
from flowlane_bench.suite.summary import markdown_table, scenario_list, summary_table
from pydantic import ValidationError

from controller.cli.groups import HintingGroup
from controller.cli.render import err, out
from controller.policy.errors import format_path

REPO = Path(__file__).resolve().parents[2]
RUNNER = "flowlane_bench.scenario"
"""The runner's module: ``python -m flowlane_bench.scenario`` (installed from the checkout)."""
SCENARIOS = REPO / "mininet" / "scenarios"

app = typer.Typer(
    help="Mixed training/inference scenarios in Mininet: fifo, static and flowlane side by side.",
    no_args_is_help=True,
    cls=HintingGroup,
)


def _runner_installed() -> bool:
    try:
        return importlib.util.find_spec(RUNNER) is not None
    except ModuleNotFoundError:  # no flowlane_bench at all
        return False


def _checkout() -> None:
    if not _runner_installed() or not SCENARIOS.is_dir():
        err.print(
            f"[red]no scenario runner ({RUNNER}) or no {SCENARIOS}[/]: scenarios run from a"
            " source checkout of flowlane (pip install -e '.\\[scenarios]')"
        )
        raise typer.Exit(2)
    _extra()


def _extra() -> None:
    """The plots (matplotlib) and the fabric optimum (scipy) are an optional extra."""
    try:
        import matplotlib  # noqa: F401
        import scipy  # type: ignore[import-untyped]  # noqa: F401
    except ImportError as exc:
        err.print(
            f"[red]the scenario runner needs the scenarios extra[/] ({exc.name} is missing):"
            " pip install 'flowlane\\[scenarios]'"
        )
        raise typer.Exit(2) from None


@app.command("list")
def list_scenarios() -> None:
    """The shipped scenarios: topology, workloads and what each shows."""
    _checkout()
    out.print(scenario_list(SCENARIOS, REPO))


def _modes(value: str | None) -> str | None:
    if value is None:
        return None
    names = [name.strip() for name in value.split(",") if name.strip()]
    valid = [mode.value for mode in Mode]
    for name in names:
        if name not in valid:
            raise typer.BadParameter(f"'{name}' is not a mode ({', '.join(valid)})")
    if not names:
        raise typer.BadParameter("give at least one mode")
    if len(set(names)) != len(names):
        raise typer.BadParameter("a mode is listed twice")
    return ",".join(names)


def _load_report(report: Path) -> Report:
    """The report at ``report``, or exit 2 naming the file (unreadable, or not a report)."""
    try:
        return Report.model_validate_json(report.read_text(encoding="utf-8"))
    except OSError as exc:
        err.print(f"[red]cannot read {report}[/]: {exc.strerror}")
        raise typer.Exit(2) from None
    except ValidationError as exc:
        err.print(f"[red]{report} is not a scenario report[/]: {exc.error_count()} error(s)")
        for error in exc.errors()[:10]:
            err.print(f"  {format_path(error['loc'])}: {error['msg']}", highlight=False)
        raise typer.Exit(2) from None


@app.command("show")
def show(
    report: Annotated[Path, typer.Argument(help="a report.json written by `scenario run`")],
    markdown: Annotated[bool, typer.Option(help="print the summary as a Markdown table")] = False,
    plots: Annotated[bool, typer.Option(help="write the plots again, next to the report")] = False,
) -> None:
    """Print a report's summary table again (no root, no network), and redraw its plots."""
    loaded = _load_report(report)
    if plots:
        _extra()
        from flowlane_bench.suite.plots import write_plots  # matplotlib: the scenarios extra

        loaded.plots = write_plots(loaded, report.parent)
        err.print(f"plots: {', '.join(str(report.parent / name) for name in loaded.plots)}")
    if markdown:
        print(markdown_table(loaded))
    else:
        out.print(summary_table(loaded))


@app.command("compare")
def compare(
    reports: Annotated[
        list[Path], typer.Argument(help="report.json files of runs of one scenario (two or more)")
    ],
    markdown: Annotated[
        bool, typer.Option(help="print the comparison as a Markdown table")
    ] = False,
) -> None:
    """Each run's p99 ratio and slowest ring per mode, and the median across runs (no root)."""
    # One 20 s window's p99 is decided by whether a cluster of stalled requests fell in it
    # (docs/jobs.md); the median of several runs, each against its own control, is not.
    if len(reports) < 2:
        err.print(
            f"[red]compare needs at least two reports[/], got {len(reports)}:"
            " give the report.json of every run to compare"
        )
        raise typer.Exit(2)
    given: dict[Path, Path] = {}
    for path in reports:
        first = given.setdefault(path.resolve(), path)
        if first is not path:
            err.print(f"[red]{path} is given twice[/] (as {first}): each run counts once")
            raise typer.Exit(2)
    runs = [Run(str(path), _load_report(path)) for path in reports]
    try:
        result = compare_runs(runs)
    except AcrossRunsError as exc:
        err.print(f"[red]cannot compare[/]: {exc}", highlight=False)
        raise typer.Exit(2) from None
    if markdown:  # the rich table names skipped modes in its caption; Markdown is the table only
        for mode, sources in result.skipped:
            err.print(f"skipped {mode}: not in {', '.join(sources)}", highlight=False)
        print(across_runs_markdown(result))
    else:
        out.print(across_runs_table(result))


@app.command("run")
def run(
    scenario: Annotated[str, typer.Argument(help="a shipped scenario's name, or a scenario file")],
    modes: Annotated[
        str | None,
        typer.Option(help="comma-separated modes (default: the scenario's, fifo,static,flowlane)"),
    ] = None,
    duration: Annotated[
        float | None, typer.Option(min=0.5, help="seconds measured per phase (default: the file's)")
    ] = None,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="report directory (default reports/NAME-TIME)")
    ] = None,
) -> None:
    """Run one scenario (root): every mode in one network; writes report.json and plots."""
    _checkout()
    checked = _modes(modes)
    args = [sys.executable, "-m", RUNNER, "run", scenario]
    if checked:
        args += ["--modes", checked]
    if duration is not None:
        args += ["--duration", str(duration)]
    if out_dir is not None:
        args += ["--out", str(out_dir)]
    sys.stdout.flush()
    os.execv(sys.executable, args)
