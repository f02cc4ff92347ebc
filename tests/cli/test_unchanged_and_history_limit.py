"""`flowlane policy apply` of the active document, and `flowlane api --history-limit`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from controller.api.settings import ApiSettings
from controller.cli.main import app

REPO = Path(__file__).resolve().parents[2]
DEFAULT_POLICY = REPO / "policies" / "default.yaml"
FIFO_POLICY = REPO / "policies" / "examples" / "fifo.yaml"
ENV = {"COLUMNS": "250", "USER": "tester"}


def apply(runner: CliRunner, api_url: str, path: Path, *extra: str) -> Any:
    return runner.invoke(
        app,
        ["policy", "apply", str(path), "--no-wait", *extra],
        env={**ENV, "FLOWLANE_API": api_url},
    )


def test_applying_the_active_policy_again_says_nothing_changed(
    runner: CliRunner, api_url: str
) -> None:
    first = apply(runner, api_url, DEFAULT_POLICY)
    assert first.exit_code == 0, first.output
    assert "stored policy version 1 by cli-admin" in first.stdout
    again = apply(runner, api_url, DEFAULT_POLICY)
    assert again.exit_code == 0, again.output
    assert "unchanged: nothing stored, already the active policy version 1 by cli-admin" in (
        " ".join(again.stdout.split())
    )
    assert again.stdout.startswith("unchanged:")
    other = apply(runner, api_url, FIFO_POLICY, "--json")
    assert (json.loads(other.stdout)["version"], json.loads(other.stdout)["unchanged"]) == (
        2,
        False,
    )


@pytest.mark.parametrize("limit", ["0", "-3"])
def test_api_refuses_a_history_limit_below_one(runner: CliRunner, limit: str) -> None:
    result = runner.invoke(app, ["api", "--history-limit", limit], env=ENV)
    assert result.exit_code == 2
    text = " ".join(result.output.split())
    assert "--history-limit" in text
    assert "Invalid value for '--history-limit': Input should be greater than or equal to 1" in (
        text
    )


def test_api_passes_the_history_limit_to_the_app(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    import controller.api.app

    seen: list[ApiSettings] = []
    monkeypatch.setattr(controller.api.app, "create_app", seen.append)
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: None)
    assert runner.invoke(app, ["api", "--history-limit", "7"], env=ENV).exit_code == 0
    assert runner.invoke(app, ["api"], env=ENV).exit_code == 0
    assert [s.history_limit for s in seen] == [7, 1000]
