"""Tables of several runs of one scenario: each run's figure and the median across runs.

Beside ``summary`` (one report), not in it: these read an ``AcrossRuns``, not a report.
The median carries the target mark the one-run table gives (flowlane's only); the
per-run figures and the count of runs that met the target show how far one run's
stall moved its own figure.
"""

from __future__ import annotations

from rich.table import Table

from flowlane_bench.suite.across_runs import FLOWLANE, AcrossRuns, ModeAcrossRuns
from flowlane_bench.suite.summary import mark, num, target


def _saves(value: float | None) -> str:
    """Signed percent: +33.3% is flowlane's slowest ring a third faster than this mode's."""
    return "-" if value is None else f"{value:+.1%}"


def _per_run(values: tuple[float | None, ...], digits: int) -> str:
    return ", ".join(num(value, digits) for value in values)


def _has_saving(result: AcrossRuns) -> bool:
    return any(row.flowlane_saving for row in result.modes)


def _columns(result: AcrossRuns) -> list[str]:
    label = f"p99/{result.reference}"
    wanted = target(result.figure)
    columns = [
        "mode",
        f"{label} per run",
        f"{label} median ({wanted})",
        f"runs {wanted}",
    ]
    if result.allreduce:
        columns += ["all-reduce p50 ms per run", "all-reduce p50 ms median"]
        if _has_saving(result):
            columns += ["flowlane saves (median)"]
    return columns


def _cells(result: AcrossRuns, row: ModeAcrossRuns, median: str) -> list[str]:
    cells = [
        row.mode,
        _per_run(row.p99, 2),
        median,
        f"{row.p99_met} of {result.runs}",
    ]
    if result.allreduce:
        cells += [_per_run(row.allreduce_p50_ms, 1), num(row.allreduce_p50_median, 1)]
        if _has_saving(result):
            cells += [_saves(row.flowlane_saving_median)]
    return cells


def _caption(result: AcrossRuns) -> str:
    lines = [
        f"run {index}: {source} ({duration:g} s per phase)"
        for index, (source, duration) in enumerate(
            zip(result.sources, result.durations_s, strict=True), 1
        )
    ]
    lines += [f"skipped {mode}: not in {', '.join(sources)}" for mode, sources in result.skipped]
    return "\n".join(lines)


def across_runs_table(result: AcrossRuns) -> Table:
    """Per mode: the p99 ratio of every run, its median against the target, and the rings."""
    table = Table(
        title=f"{result.scenario}: {result.runs} runs, median of each run's figure",
        caption=_caption(result),
        caption_justify="left",
    )
    for column in _columns(result):
        table.add_column(column, justify="left" if column == "mode" else "right")
    for row in result.modes:
        table.add_row(*_cells(result, row, mark(result.figure, row.p99_median, row.mode)))
    return table


def across_runs_markdown(result: AcrossRuns) -> str:
    """The same table in Markdown (for docs/benchmarks.md); runs are numbered in order given."""
    columns = _columns(result)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in result.modes:
        cells = _cells(result, row, mark(result.figure, row.p99_median, row.mode, rich=False))
        if row.mode == FLOWLANE:
            cells[0] = f"**{FLOWLANE}**"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
