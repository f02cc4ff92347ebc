"""Rich tables of a report's figures and of the shipped scenarios."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from flowlane_bench.suite.report import CONTROL, IDLE, REFERENCES, TARGETS, Report, meets
from flowlane_bench.suite.spec import ScenarioError, load_scenario, scenario_files


def num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def mark(figure: str, value: float | None, mode: str, *, rich: bool = True) -> str:
    """Flowlane's figures say whether they meet the target; the other modes are context.
    ``rich``: coloured for a rich table, else plain (Markdown has no colours: the ✓/✗
    carries it)."""
    text = num(
        value,
        3
        if figure in ("goodput_over_capacity", "jain", "goodput_over_optimum", "jobs_jain")
        else 2,
    )
    verdict = meets(figure, value)
    if mode != "flowlane" or verdict is None:
        return text
    if not rich:
        return f"{text} ✓" if verdict else f"{text} ✗"
    return f"[green]{text} ✓[/]" if verdict else f"[red]{text} ✗[/]"


def target(figure: str) -> str:
    op, value = TARGETS[figure]
    return f"{op}{value:g}"


def summary_table(report: Report) -> Table:
    """Headline figures per mode, with the references they are measured against."""
    table = Table(
        title=f"{report.scenario}: {report.duration_s:g} s per phase,"
        f" {report.capacity_bps / 1e6:g} Mbit/s bottleneck {report.bottleneck}"
    )
    control = CONTROL in report.phases
    columns: tuple[str, ...] = (
        "phase",
        "infer p50 ms",
        "infer p99 ms",
        *((f"p99/control ({target('p99_over_control')})",) if control else ()),
        f"p99/idle ({target('p99_over_idle')})",
        "errors",
        "train Mbit/s",
        f"goodput/cap ({target('goodput_over_capacity')})",
        f"allreduce/alone ({target('allreduce_over_alone')})",
        f"Jain ({target('jain')})",
    )
    if report.optimum_bps:
        columns += (f"goodput/optimum ({target('goodput_over_optimum')})",)
    jobs = any(row.jobs_jain is not None for row in report.headline)
    slowest = any(row.allreduce_p50_ms is not None for row in report.headline)
    if jobs:
        columns += (f"jobs Jain ({target('jobs_jain')})", "job 1/job 2")
    if slowest:
        columns += ("allreduce p50 ms (slowest)",)
    extra = int(jobs) * 2 + int(slowest)
    for column in columns:
        table.add_column(column, justify="right")
    optimum = report.optimum_bps
    for name in REFERENCES:
        phase = report.phases.get(name)
        if phase is None:
            continue
        inference = phase.inference
        over_control, over_idle = _reference_ratios(report, name)
        table.add_row(
            name,
            num(inference.latency_ms.p50, 3) if inference else "-",
            num(inference.latency_ms.p99, 3) if inference else "-",
            *([over_control] if control else []),
            over_idle,
            str(inference.errors) if inference else "-",
            num(phase.training_goodput_bps / 1e6 if phase.training_goodput_bps else None),
            num(
                phase.training_goodput_bps / report.capacity_bps
                if phase.training_goodput_bps
                else None,
                3,
            ),
            "1.00" if phase.allreduce else "-",
            "-",
            *([_optimum_text(name, phase.training_goodput_bps, optimum)] if optimum else []),
            *(["-"] * extra),
            style="dim",
        )
    for row in report.headline:
        phase = report.phases[row.mode]
        assert phase.inference is not None
        table.add_row(
            row.mode,
            num(phase.inference.latency_ms.p50, 3),
            num(row.inference_p99_ms, 3),
            *([mark("p99_over_control", row.p99_over_control, row.mode)] if control else []),
            mark("p99_over_idle", row.p99_over_idle, row.mode),
            str(phase.inference.errors),
            num(phase.training_goodput_bps / 1e6 if phase.training_goodput_bps else None),
            mark("goodput_over_capacity", row.goodput_over_capacity, row.mode),
            mark("allreduce_over_alone", row.allreduce_over_alone, row.mode),
            mark("jain", row.jain, row.mode),
            *(
                [mark("goodput_over_optimum", row.goodput_over_optimum, row.mode)]
                if optimum
                else []
            ),
            *([mark("jobs_jain", row.jobs_jain, row.mode), num(row.jobs_ratio, 3)] if jobs else []),
            *([num(row.allreduce_p50_ms, 1)] if slowest else []),
        )
    return table


def _reference_ratios(report: Report, name: str) -> tuple[str, str]:
    """A reference phase's p99 against control and idle; control/idle: what the CPU costs."""
    inference = report.phases[name].inference
    if inference is None:
        return "-", "-"
    references = {}
    for reference in (CONTROL, IDLE):
        phase = report.phases.get(reference)
        references[reference] = (
            phase.inference.latency_ms.p99 if phase and phase.inference else None
        )
    p99 = inference.latency_ms.p99
    over_control = "-" if name == IDLE else _ratio_text(p99, references[CONTROL], 2)
    return over_control, _ratio_text(p99, references[IDLE], 2)


def _ratio_text(value: float | None, reference: float | None, digits: int = 3) -> str:
    return num(value / reference if value and reference else None, digits)


def _optimum_text(phase: str, goodput: float | None, optimum: float | None) -> str:
    """A reference phase's goodput against the training optimum: only ``alone`` carries the
    training workloads (``control`` runs flows of its own, off inference's path)."""
    return "-" if phase == CONTROL else _ratio_text(goodput, optimum)


def _ms(value: float | None) -> str:
    return num(value, 1)


def _recovery(value: float | None, has_optimum: bool) -> str:
    if value is None:
        return "not recovered" if has_optimum else "-"
    return f"{value:.1f}"


def event_rows(report: Report) -> list[tuple[str, ...]]:
    """One row per mode and link event: probe loss and training's recovery after it."""
    rows: list[tuple[str, ...]] = []
    for mode in report.modes:
        phase = report.phases.get(mode)
        if phase is None:
            continue
        for event in phase.events:
            crossed = {None: "-", True: "yes", False: "no"}[event.probe_crossed]
            rows.append(
                (
                    mode,
                    f"{event.at_s:g}",
                    f"{event.link[0]}-{event.link[1]} {event.state}",
                    crossed,
                    "-" if event.probe_lost is None else str(event.probe_lost),
                    _ms(event.probe_loss_ms),
                    _ms(event.probe_longest_gap_ms),
                    num(event.optimum_bps / 1e6 if event.optimum_bps is not None else None, 1),
                    _recovery(event.recovery_s, event.optimum_bps is not None),
                )
            )
    return rows


EVENT_COLUMNS = (
    "mode",
    "at s",
    "link event",
    "probe crossed",
    "probe lost",
    "probe loss ms",
    "longest gap ms",
    "optimum Mbit/s",
    "recovery s (0.9 of optimum)",
)


def events_table(report: Report) -> Table | None:
    """Link events per mode, or None when the scenario has none."""
    rows = event_rows(report)
    if not rows:
        return None
    table = Table(title=f"{report.scenario}: link events")
    for column in EVENT_COLUMNS:
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*row)
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
    optimum = report.optimum_bps
    control = CONTROL in report.phases
    header = (
        "| phase | inference p50 ms | inference p99 ms |"
        + (" p99/control |" if control else "")
        + " p99/idle | errors | training Mbit/s | goodput/capacity | all-reduce/alone | Jain |"
        + (" goodput/optimum |" if optimum else "")
    )
    lines = [header, "|" + "---|" * (9 + bool(optimum) + control)]
    for name in REFERENCES:
        phase = report.phases.get(name)
        if phase is None:
            continue
        inference, goodput = phase.inference, phase.training_goodput_bps
        over_control, over_idle = _reference_ratios(report, name)
        lines.append(
            f"| {name} | {num(inference.latency_ms.p50, 3) if inference else '-'}"
            f" | {num(inference.latency_ms.p99, 3) if inference else '-'}"
            + (f" | {over_control}" if control else "")
            + f" | {over_idle} | {inference.errors if inference else '-'}"
            f" | {num(goodput / 1e6 if goodput else None)}"
            f" | {num(goodput / report.capacity_bps if goodput else None, 3)}"
            f" | {'1.00' if phase.allreduce else '-'} | - |"
            + (f" {_optimum_text(name, goodput, optimum)} |" if optimum else "")
        )
    for row in report.headline:
        phase = report.phases[row.mode]
        assert phase.inference is not None
        goodput = phase.training_goodput_bps
        bold = "**" if row.mode == "flowlane" else ""
        lines.append(
            f"| {bold}{row.mode}{bold} | {num(phase.inference.latency_ms.p50, 3)}"
            f" | {num(row.inference_p99_ms, 3)}"
            + (f" | {num(row.p99_over_control)}" if control else "")
            + f" | {num(row.p99_over_idle)}"
            f" | {phase.inference.errors} | {num(goodput / 1e6 if goodput else None)}"
            f" | {num(row.goodput_over_capacity, 3)} | {num(row.allreduce_over_alone)}"
            f" | {num(row.jain, 3)} |"
            + (f" {num(row.goodput_over_optimum, 3)} |" if optimum else "")
        )
    rows = event_rows(report)
    if rows:
        lines += ["", "| " + " | ".join(EVENT_COLUMNS) + " |", "|" + "---|" * len(EVENT_COLUMNS)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
