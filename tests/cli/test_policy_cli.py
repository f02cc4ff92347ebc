"""``flowlane policy validate``: a table for a good file, every error path for a bad one."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from controller.cli.main import app

REPO = Path(__file__).resolve().parents[2]
DEFAULT_POLICY = REPO / "policies" / "default.yaml"

BAD_POLICY = """\
classes:
  inference:   {priority: 0, dscp: 46, min_rate: 20%}
  training:    {priority: 1, dscp: 26, min_rate: 70%}
  best-effort: {priority: 9, dscp: 0,  min_rate: 10%}
default_class: inference
rules:
  - {name: roce, match: {udp_dst: 4791}, class: training}
  - {name: triton, match: {tcp_dst: 70000}, class: inference}
ports:
  rate: 10Gbit
  overrides: {s1-eth4: 10mbps}
"""


def flat(text: str) -> str:
    """Console output with rich's line wrapping undone."""
    return " ".join(text.split())


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_validate_default_policy_prints_the_classes(runner: CliRunner) -> None:
    result = runner.invoke(app, ["policy", "validate", str(DEFAULT_POLICY)])
    assert result.exit_code == 0, result.output
    assert result.exception is None
    assert "valid" in result.stdout
    lines = result.stdout.splitlines()
    rows = {}
    for line in lines:
        cells = [cell.strip() for cell in line.strip("│┃ ").split("│")]
        if len(cells) == 7:
            rows[cells[0]] = cells[1:]
    assert rows == {
        "inference": ["0", "0", "46", "2Gbit", "10Gbit", "10Gbit"],
        "training": ["1", "1", "26", "7Gbit", "10Gbit", "10Gbit"],
        "best-effort": ["2", "2", "0", "1Gbit", "10Gbit", "10Gbit"],
    }
    assert "7 rules, default class 'inference', 53 OpenFlow entries per switch" in result.stdout
    assert result.stderr == ""


def test_validate_bad_policy_lists_every_error(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(BAD_POLICY, encoding="utf-8")
    result = runner.invoke(app, ["policy", "validate", str(path)])
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    stderr = flat(result.stderr)
    assert "invalid policy" in stderr
    assert f"{path}:3error(s)" in "".join(stderr.split())  # a long path may be folded
    for error_path in (
        "classes.best-effort.priority",
        "rules[1].match.tcp_dst",
        "ports.overrides.s1-eth4",
    ):
        assert f" {error_path}: " in stderr, error_path
    assert "rules[1].match.tcp_dst: port 70000 out of range (0-65535)" in stderr
    assert "valid" not in result.stdout


def test_validate_semantic_errors(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "semantic.yaml"
    path.write_text(
        BAD_POLICY.replace("priority: 9", "priority: 2")
        .replace("70000", "8000")
        .replace("10mbps", "1Gbit")
        .replace("class: training", "class: bulk"),
        encoding="utf-8",
    )
    result = runner.invoke(app, ["policy", "validate", str(path)])
    assert result.exit_code == 1
    assert "1 error(s) rules[0].class: unknown class 'bulk'" in flat(result.stderr)


def test_validate_missing_file(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "missing.yaml"
    result = runner.invoke(app, ["policy", "validate", str(path)])
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    stderr = flat(result.stderr)
    assert f"{path}:1error(s)" in "".join(stderr.split())
    assert "(file): cannot read: No such file or directory" in stderr
    assert result.stdout == ""


def test_validate_invalid_yaml_reports_the_line(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("classes:\n  a: {priority: 1\n", encoding="utf-8")
    result = runner.invoke(app, ["policy", "validate", str(path)])
    assert result.exit_code == 1
    assert "line 3, column 1: invalid YAML" in flat(result.stderr)


def test_validate_binary_file_is_a_clean_error(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"\xff\xfe\x00\x01classes")
    result = runner.invoke(app, ["policy", "validate", str(path)])
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "(file)" in flat(result.stderr)
