"""Plots from a report alone: valid PNGs, and the all-reduce plot only when there is one."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from flowlane_bench.suite import plots
from flowlane_bench.suite.plots import ALLREDUCE, LATENCY_CDF, THROUGHPUT, write_plots
from flowlane_bench.suite.report import Report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk, after checking the signature and the end."""
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, f"{path.name} is not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert data.endswith(b"IEND\xaeB`\x82"), f"{path.name} is truncated"
    return width, height


@pytest.fixture(scope="module")
def written(
    tmp_path_factory: pytest.TempPathFactory, report_factory: Callable[..., Report]
) -> dict[bool, tuple[Path, list[str]]]:
    """write_plots once per variant (matplotlib is the slow part), from report.json text."""
    out = {}
    for with_allreduce in (False, True):
        directory = tmp_path_factory.mktemp(f"plots-{with_allreduce}")
        text = report_factory(with_allreduce=with_allreduce).model_dump_json()
        out[with_allreduce] = (directory, write_plots(Report.model_validate_json(text), directory))
    return out


def test_plots_without_allreduce(written: dict[bool, tuple[Path, list[str]]]) -> None:
    directory, names = written[False]
    assert names == [LATENCY_CDF, THROUGHPUT] == ["latency-cdf.png", "throughput.png"]
    assert sorted(p.name for p in directory.iterdir()) == sorted(names)
    for name in names:
        path = directory / name
        assert path.stat().st_size > 10_000
        width, height = png_size(path)
        assert width > 500 and height > 300


def test_plots_with_allreduce(written: dict[bool, tuple[Path, list[str]]]) -> None:
    directory, names = written[True]
    assert (
        names
        == [LATENCY_CDF, THROUGHPUT, ALLREDUCE]
        == [
            "latency-cdf.png",
            "throughput.png",
            "allreduce.png",
        ]
    )
    assert sorted(p.name for p in directory.iterdir()) == sorted(names)
    for name in names:
        assert (directory / name).stat().st_size > 10_000
        width, height = png_size(directory / name)
        assert width > 500 and height > 300


def test_throughput_has_one_panel_per_mode(
    tmp_path: Path,
    written: dict[bool, tuple[Path, list[str]]],
    report_factory: Callable[..., Report],
) -> None:
    three_modes = png_size(written[False][0] / THROUGHPUT)[1]
    single = report_factory(with_allreduce=False).model_copy(update={"modes": ["flowlane"]})
    plots.throughput(single, tmp_path / THROUGHPUT)
    assert png_size(tmp_path / THROUGHPUT)[1] < three_modes


def test_allreduce_plot_is_skipped_without_iterations(
    tmp_path: Path, report_factory: Callable[..., Report]
) -> None:
    assert plots.allreduce(report_factory(with_allreduce=False), tmp_path / ALLREDUCE) is False
    assert not (tmp_path / ALLREDUCE).exists()
