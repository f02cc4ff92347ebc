"""The CLI's one table renderer (``controller.cli.render.table`` and ``print_table``): every
list command prints a titled table, or one line saying why there is nothing to show."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from controller.cli import render


@pytest.fixture
def printed(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    """What ``render.out`` prints, as plain text 80 columns wide."""
    buffer = io.StringIO()
    monkeypatch.setattr(render, "out", Console(file=buffer, width=80, color_system=None))
    return buffer


def test_rows_make_a_table_titled_on_the_left_with_numbers_on_the_right(
    printed: io.StringIO,
) -> None:
    render.print_table(
        "jobs (2)",
        ("name", "rate"),
        [("a", "1"), ("long-name", "1000")],
        empty="no job",
        right=("rate",),
    )
    lines = printed.getvalue().splitlines()
    assert lines[0].rstrip() == "jobs (2)"
    assert [line for line in lines if "long-name" in line] == ["│ long-name │ 1000 │"]
    assert [line for line in lines if "│ a " in line] == ["│ a         │    1 │"]


def test_no_rows_print_the_empty_line_and_no_table(printed: io.StringIO) -> None:
    render.print_table("jobs (0)", ("name", "rate"), [], empty="[yellow]no job[/] (none live)")
    assert printed.getvalue() == "no job (none live)\n"


def test_table_returns_the_renderable_for_a_caller_that_groups_tables() -> None:
    grid = render.table("t", ("a", "b"), [("1", render.plain("[x]"))], right=("b",))
    assert [column.header for column in grid.columns] == ["a", "b"]
    assert [column.justify for column in grid.columns] == ["left", "right"]
    assert grid.title == "t" and grid.title_justify == "left" and grid.row_count == 1
