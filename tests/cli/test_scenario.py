"""``flowlane scenario``: ``list`` the shipped scenarios; ``run`` checks options, then execs.

``run`` replaces the process (``os.execv``) with ``mininet/scenario.py``, which
needs root and Mininet; these tests record the call instead of making it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from controller.cli import scenario as scenario_cli
from controller.cli.main import app

REPO = Path(__file__).resolve().parents[2]
RUNNER = REPO / "mininet" / "scenario.py"
SHIPPED = ("allreduce", "incast", "isolation", "leafspine")

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


def test_the_cli_finds_the_checkout() -> None:
    assert scenario_cli.RUNNER == RUNNER
    assert RUNNER.is_file()
    assert scenario_cli.SCENARIOS == REPO / "mininet" / "scenarios"


# --------------------------------------------------------------------------------------------
# list
# --------------------------------------------------------------------------------------------


def test_list_shows_the_four_shipped_scenarios(runner: CliRunner) -> None:
    result = runner.invoke(app, ["scenario", "list"])
    assert result.exit_code == 0, result.output
    assert result.exception is None
    lines = result.stdout.splitlines()
    names = [line.split("│")[1].strip() for line in lines if line.startswith("│")]
    assert [name for name in names if name] == list(SHIPPED)
    text = flat(result.stdout)
    assert "invalid" not in text
    assert "leaf-spine" in text and "dumbbell" in text and "single" in text


def test_scenario_without_a_command_shows_help(runner: CliRunner) -> None:
    result = runner.invoke(app, ["scenario"])
    assert "list" in result.output and "run" in result.output


# --------------------------------------------------------------------------------------------
# run: option checks happen before anything runs
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("modes", "message"),
    [
        ("bogus", "'bogus' is not a mode (fifo, static, flowlane)"),
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
                str(RUNNER),
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
    assert execv == [(sys.executable, [sys.executable, str(RUNNER), "run", "leafspine"])]


def test_run_passes_a_scenario_file_through(
    runner: CliRunner, execv: ExecCalls, tmp_path: Path
) -> None:
    path = tmp_path / "mine.yaml"
    result = runner.invoke(app, ["scenario", "run", str(path), "--modes", "static"])
    assert result.exit_code == 0, result.output
    (_, args) = execv[0]
    assert args[2:] == ["run", str(path), "--modes", "static"]
