"""Rich tables of a report's figures and of the shipped scenarios."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from controller.scenario.report import ALONE, IDLE, TARGETS, Report, meets
from controller.scenario.spec import ScenarioError, load_scenario, scenario_files


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _mark(figure: str, value: float | None, mode: str) -> str:
    """Flowlane's figures say whether they meet the target; the other modes are context."""
    text = _num(value, 3 if figure in ("goodput_over_capacity", "jain") else 2)
    verdict = meets(figure, value)
    if mode != "flowlane" or verdict is None:
        return text
    return f"[green]{text} ✓[/]" if verdict else f"[red]{text} ✗[/]"


def _target(figure: str) -> str:
    op, value = TARGETS[figure]
    return f"{op}{value:g}"


def summary_table(report: Report) -> Table:
    """Headline figures per mode, with the references they are measured against."""
    table = Table(
        title=f"{report.scenario}: {report.duration_s:g} s per phase,"
        f" {report.capacity_bps / 1e6:g} Mbit/s bottleneck {report.bottleneck}"
    )
    columns = (
        "phase",
        "infer p50 ms",
        "infer p99 ms",
        f"p99/idle ({_target('p99_over_idle')})",
        "errors",
        "train Mbit/s",
        f"goodput/cap ({_target('goodput_over_capacity')})",
        f"allreduce/alone ({_target('allreduce_over_alone')})",
        f"Jain ({_target('jain')})",
    )
    for column in columns:
        table.add_column(column, justify="right")
    for name in (IDLE, ALONE):
        phase = report.phases.get(name)
        if phase is None:
            continue
        inference = phase.inference
        table.add_row(
            name,
            _num(inference.latency_ms.p50, 3) if inference else "-",
            _num(inference.latency_ms.p99, 3) if inference else "-",
            "1.00" if inference else "-",
            str(inference.errors) if inference else "-",
            _num(phase.training_goodput_bps / 1e6 if phase.training_goodput_bps else None),
            _num(
                phase.training_goodput_bps / report.capacity_bps
                if phase.training_goodput_bps
                else None,
                3,
            ),
            "1.00" if phase.allreduce else "-",
            "-",
            style="dim",
        )
    for row in report.headline:
        phase = report.phases[row.mode]
        assert phase.inference is not None
        table.add_row(
            row.mode,
            _num(phase.inference.latency_ms.p50, 3),
            _num(row.inference_p99_ms, 3),
            _mark("p99_over_idle", row.p99_over_idle, row.mode),
            str(phase.inference.errors),
            _num(phase.training_goodput_bps / 1e6 if phase.training_goodput_bps else None),
            _mark("goodput_over_capacity", row.goodput_over_capacity, row.mode),
            _mark("allreduce_over_alone", row.allreduce_over_alone, row.mode),
            _mark("jain", row.jain, row.mode),
        )
    return table


def scenario_list(directory: Path, repo: Path) -> Table:
    """The scenarios in ``directory``: name, topology, workloads, description (or its error)."""
    table = Table(title=f"scenarios in {directory}")
    for column in ("name", "topology", "workloads", "duration", "description"):
        table.add_column(column)
    for name, path in scenario_files(directory).items():
        try:
            scenario = load_scenario(path, repo).scenario
        except ScenarioError as exc:
            first = exc.errors[0] if exc.errors else exc
            table.add_row(
                name, "-", "-", "-", f"[red]invalid ({len(exc.errors)} errors): {first}[/]"
            )
            continue
        topology = scenario.topology.kind
        workloads = ", ".join(f"{w.name} ({w.kind})" for w in scenario.workloads)
        table.add_row(name, topology, workloads, f"{scenario.duration:g} s", scenario.description)
    return table


def markdown_table(report: Report) -> str:
    """The summary as a Markdown table (docs/benchmarks.md is written from these)."""
    header = (
        "| phase | inference p50 ms | inference p99 ms | p99/idle | errors"
        " | training Mbit/s | goodput/capacity | all-reduce/alone | Jain |"
    )
    lines = [header, "|" + "---|" * 9]
    for name in (IDLE, ALONE):
        phase = report.phases.get(name)
        if phase is None:
            continue
        inference, goodput = phase.inference, phase.training_goodput_bps
        lines.append(
            f"| {name} | {_num(inference.latency_ms.p50, 3) if inference else '-'}"
            f" | {_num(inference.latency_ms.p99, 3) if inference else '-'}"
            f" | {'1.00' if inference else '-'} | {inference.errors if inference else '-'}"
            f" | {_num(goodput / 1e6 if goodput else None)}"
            f" | {_num(goodput / report.capacity_bps if goodput else None, 3)}"
            f" | {'1.00' if phase.allreduce else '-'} | - |"
        )
    for row in report.headline:
        phase = report.phases[row.mode]
        assert phase.inference is not None
        goodput = phase.training_goodput_bps
        bold = "**" if row.mode == "flowlane" else ""
        lines.append(
            f"| {bold}{row.mode}{bold} | {_num(phase.inference.latency_ms.p50, 3)}"
            f" | {_num(row.inference_p99_ms, 3)} | {_num(row.p99_over_idle)}"
            f" | {phase.inference.errors} | {_num(goodput / 1e6 if goodput else None)}"
            f" | {_num(row.goodput_over_capacity, 3)} | {_num(row.allreduce_over_alone)}"
            f" | {_num(row.jain, 3)} |"
        )
    return "\n".join(lines)
