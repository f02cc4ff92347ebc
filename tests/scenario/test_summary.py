"""Rich tables: a report's figures per mode with target marks, and the shipped scenarios."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from flowlane_bench.suite.report import CONTROL, Report, headline
from flowlane_bench.suite.summary import markdown_table, scenario_list, summary_table
from rich.console import Console
from rich.table import Table

from tests.support.scenarios import SHIPPED_SCENARIOS

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "mininet" / "scenarios"


def render(table: Table) -> str:
    console = Console(record=True, width=200)
    console.print(table)
    return console.export_text()


def rows(text: str) -> dict[str, list[str]]:
    """Body rows by first cell; a cell wrapped over several lines is joined back into one."""
    found: dict[str, list[str]] = {}
    last: list[str] | None = None
    for line in text.splitlines():
        if not line.startswith("│"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("│").split("│")]
        if cells[0]:
            last = found[cells[0]] = cells
        elif last is not None:
            for index, cell in enumerate(cells):
                if cell:
                    last[index] = f"{last[index]} {cell}"
    return found


# --------------------------------------------------------------------------------------------
# summary_table
# --------------------------------------------------------------------------------------------


def test_summary_has_the_references_and_every_mode(report_factory: Callable[..., Report]) -> None:
    text = render(summary_table(report_factory(with_allreduce=False)))
    assert "isolation: 10 s per phase, 50 Mbit/s bottleneck s1-eth4" in text
    for header in ("p99/idle (<=1.5)", "goodput/cap (>=0.93)", "allreduce/alone (<=1.1)"):
        assert header in text
    assert "Jain (>=0.95)" in text
    table = rows(text)
    assert list(table) == ["idle", "alone", "fifo", "static", "flowlane"]
    assert table["idle"] == ["idle", "5.000", "10.000", "1.00", "0", "-", "-", "-", "-"]
    assert table["alone"] == ["alone", "-", "-", "-", "-", "48.00", "0.960", "-", "-"]
    assert table["fifo"] == [
        "fifo",
        "20.000",
        "40.000",
        "4.00",
        "3",
        "40.00",
        "0.800",
        "-",
        "0.800",
    ]


def test_only_flowlane_is_marked_against_the_targets(
    report_factory: Callable[..., Report],
) -> None:
    table = rows(render(summary_table(report_factory(with_allreduce=False))))
    # flowlane: p99/idle 1.2 meets, goodput/capacity 0.9 misses, Jain 1.0 meets
    assert table["flowlane"] == [
        "flowlane",
        "6.000",
        "12.000",
        "1.20 ✓",
        "0",
        "45.00",
        "0.900 ✗",
        "-",
        "1.000 ✓",
    ]
    # static meets p99/idle (1.5) and Jain too, but only flowlane's figures carry a verdict
    assert table["static"][3] == "1.50"
    assert table["static"][8] == "1.000"
    for mode in ("idle", "alone", "fifo", "static"):
        assert not any("✓" in cell or "✗" in cell for cell in table[mode]), mode


def test_summary_with_allreduce(report_factory: Callable[..., Report]) -> None:
    table = rows(render(summary_table(report_factory(with_allreduce=True))))
    assert table["alone"][7] == "1.00"
    assert table["fifo"][7] == "1.50"
    assert table["flowlane"][7] == "1.04 ✓"
    assert table["flowlane"][6] == "0.400 ✗"
    assert table["flowlane"][8] == "-"  # the ring's ranks are not Jain-rated without two flows


def test_summary_colours_the_verdicts(report_factory: Callable[..., Report]) -> None:
    console = Console(record=True, width=200, color_system="truecolor", force_terminal=True)
    console.print(summary_table(report_factory(with_allreduce=False)))
    html = console.export_html(inline_styles=True)
    assert "1.20 ✓" in html and "0.900 ✗" in html
    green = html.split("1.20 ✓")[0].rsplit("<span", 1)[1]
    red = html.split("0.900 ✗")[0].rsplit("<span", 1)[1]
    assert "#008000" in green  # rich's standard green
    assert "#800000" in red  # and red


def test_summary_without_an_alone_phase(report_factory: Callable[..., Report]) -> None:
    report = report_factory(with_allreduce=False)
    phases = {name: phase for name, phase in report.phases.items() if name != "alone"}
    table = rows(render(summary_table(report.model_copy(update={"phases": phases}))))
    assert list(table) == ["idle", "fifo", "static", "flowlane"]


# --------------------------------------------------------------------------------------------
# scenario_list
# --------------------------------------------------------------------------------------------


def test_scenario_list_shows_every_shipped_scenario() -> None:
    text = render(scenario_list(SCENARIOS, REPO))
    assert f"scenarios in {SCENARIOS}" in text
    table = rows(text)
    assert list(table) == list(SHIPPED_SCENARIOS)
    assert table["allreduce"][1:4] == [
        "dumbbell",
        "allreduce (allreduce), inference (inference)",
        "20 s",
    ]
    assert table["incast"][1:3] == ["single", "training (bulk), incast (inference)"]
    assert table["leafspine"][1] == "leaf-spine"
    assert table["isolation"][4].startswith("Two iperf3 training flows")
    assert "invalid" not in text


def test_scenario_list_shows_an_invalid_files_error(tmp_path: Path) -> None:
    for path in SCENARIOS.glob("*.yaml"):
        shutil.copy(path, tmp_path / path.name)
    broken = (SCENARIOS / "isolation.yaml").read_text(encoding="utf-8")
    broken = broken.replace("name: isolation", "name: broken").replace(
        "bottleneck: s1-eth4", "bottleneck: s1-eth9"
    )
    (tmp_path / "broken.yaml").write_text(broken, encoding="utf-8")
    (tmp_path / "notes.txt").write_text("not a scenario", encoding="utf-8")
    table = rows(render(scenario_list(tmp_path, REPO)))
    assert list(table) == sorted((*SHIPPED_SCENARIOS, "broken"))
    assert table["broken"][1:4] == ["-", "-", "-"]
    assert table["broken"][4] == (
        "invalid (1 errors): bottleneck: no port 's1-eth9' in the topology"
    )
    assert table["isolation"][1] == "single"


def test_scenario_list_of_an_empty_directory(tmp_path: Path) -> None:
    assert rows(render(scenario_list(tmp_path, REPO))) == {}


# --------------------------------------------------------------------------------------------
# markdown_table
# --------------------------------------------------------------------------------------------

MARKDOWN_HEADER = [
    "phase",
    "inference p50 ms",
    "inference p99 ms",
    "p99/idle",
    "errors",
    "training Mbit/s",
    "goodput/capacity",
    "all-reduce/alone",
    "Jain",
]


def markdown_rows(text: str) -> list[list[str]]:
    """Every line of a Markdown table as its cells, after checking the pipes frame each line."""
    found = []
    for line in text.splitlines():
        assert line.startswith("| ") or line.startswith("|---"), line
        assert line.endswith("|"), line
        found.append([cell.strip() for cell in line[1:-1].split("|")])
    return found


def test_markdown_has_a_header_a_separator_and_every_phase(
    report_factory: Callable[..., Report],
) -> None:
    text = markdown_table(report_factory(with_allreduce=False))
    lines = text.splitlines()
    assert lines[1] == "|---|---|---|---|---|---|---|---|---|"
    assert not text.endswith("\n")
    table = markdown_rows(text)
    assert table[0] == MARKDOWN_HEADER
    assert table[1] == ["---"] * 9
    assert all(len(row) == 9 for row in table)
    assert table[2:] == [
        ["idle", "5.000", "10.000", "1.00", "0", "-", "-", "-", "-"],
        ["alone", "-", "-", "-", "-", "48.00", "0.960", "-", "-"],
        ["fifo", "20.000", "40.000", "4.00", "3", "40.00", "0.800", "-", "0.800"],
        ["static", "7.500", "15.000", "1.50", "0", "46.00", "0.920", "-", "1.000"],
        ["**flowlane**", "6.000", "12.000", "1.20", "0", "45.00", "0.900", "-", "1.000"],
    ]


def test_markdown_figures_come_from_the_headline(report_factory: Callable[..., Report]) -> None:
    report = report_factory(with_allreduce=False)
    body = {row[0].strip("*"): row for row in markdown_rows(markdown_table(report))[2:]}
    assert [row.mode for row in report.headline] == ["fifo", "static", "flowlane"]
    for row in report.headline:
        cells = body[row.mode]
        assert cells[2] == f"{row.inference_p99_ms:.3f}"
        assert cells[3] == f"{row.p99_over_idle:.2f}"
        inference = report.phases[row.mode].inference
        assert inference is not None
        assert cells[1] == f"{inference.latency_ms.p50:.3f}"
        assert cells[4] == str(inference.errors)
        assert cells[6] == f"{row.goodput_over_capacity:.3f}"
        assert cells[8] == f"{row.jain:.3f}"


def test_markdown_bolds_only_flowlane(report_factory: Callable[..., Report]) -> None:
    text = markdown_table(report_factory(with_allreduce=False))
    assert text.count("**") == 2
    assert "| **flowlane** |" in text
    assert "| fifo |" in text and "| static |" in text
    # plain text: no rich markup and no target marks leak into the Markdown
    assert "[" not in text and "✓" not in text and "✗" not in text


def test_markdown_with_allreduce(report_factory: Callable[..., Report]) -> None:
    table = markdown_rows(markdown_table(report_factory(with_allreduce=True)))
    body = {row[0]: row for row in table[2:]}
    assert body["alone"] == ["alone", "-", "-", "-", "-", "20.00", "0.400", "1.00", "-"]
    assert body["fifo"][7] == "1.50"
    assert body["static"][7] == "1.05"
    assert body["**flowlane**"] == [
        "**flowlane**",
        "6.000",
        "12.000",
        "1.20",
        "0",
        "20.00",
        "0.400",
        "1.04",
        "-",
    ]


def test_markdown_without_an_alone_phase(report_factory: Callable[..., Report]) -> None:
    report = report_factory(with_allreduce=False)
    phases = {name: phase for name, phase in report.phases.items() if name != "alone"}
    table = markdown_rows(markdown_table(report.model_copy(update={"phases": phases})))
    assert [row[0] for row in table[2:]] == ["idle", "fifo", "static", "**flowlane**"]


def test_markdown_follows_the_headline_order(report_factory: Callable[..., Report]) -> None:
    report = report_factory(with_allreduce=False)
    headline = [row for row in report.headline if row.mode != "static"][::-1]
    table = markdown_rows(markdown_table(report.model_copy(update={"headline": headline})))
    assert [row[0] for row in table[2:]] == ["idle", "alone", "**flowlane**", "fifo"]


# --------------------------------------------------------------------------------------------
# the control reference
# --------------------------------------------------------------------------------------------


def with_control(report: Report, p99: float = 11.0) -> Report:
    """The report plus a control phase (inference p99 ``p99`` ms), its headline recomputed."""
    loaded = report.phases["flowlane"]
    assert loaded.inference is not None
    latency = loaded.inference.latency_ms.model_copy(update={"p99": p99})
    inference = loaded.inference.model_copy(update={"latency_ms": latency})
    control = loaded.model_copy(update={"phase": CONTROL, "inference": inference})
    phases = {**report.phases, CONTROL: control}
    rows = headline(phases, report.modes, report.capacity_bps)
    return report.model_copy(update={"phases": phases, "headline": rows})


def test_summary_reads_every_mode_against_control(report_factory: Callable[..., Report]) -> None:
    text = render(summary_table(with_control(report_factory(with_allreduce=False))))
    assert "p99/control (<=1.25)" in text and "p99/idle (<=1.5)" in text
    table = rows(text)
    assert list(table) == ["idle", "alone", "control", "fifo", "static", "flowlane"]
    # idle has no control ratio; control/idle is what the CPU load alone costs inference
    assert table["idle"][3:5] == ["-", "1.00"]
    assert table["alone"][3:5] == ["-", "-"]
    assert table["control"][2:5] == ["11.000", "1.00", "1.10"]
    assert table["fifo"][3:5] == ["3.64", "4.00"]
    assert table["flowlane"][3:5] == ["1.09 ✓", "1.20 ✓"]


def test_markdown_has_the_control_column(report_factory: Callable[..., Report]) -> None:
    report = with_control(report_factory(with_allreduce=False), p99=9.0)
    table = markdown_rows(markdown_table(report))
    assert table[0] == [*MARKDOWN_HEADER[:3], "p99/control", *MARKDOWN_HEADER[3:]]
    assert all(len(row) == 10 for row in table)
    body = {row[0].strip("*"): row for row in table[2:]}
    assert list(body) == ["idle", "alone", "control", "fifo", "static", "flowlane"]
    assert body["control"][3:5] == ["1.00", "0.90"]
    assert body["flowlane"][3:5] == ["1.33", "1.20"]  # 12 / 9 misses 1.25; the table only reports
    for row in report.headline:
        assert body[row.mode][3] == f"{row.p99_over_control:.2f}"
