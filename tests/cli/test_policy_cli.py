"""``flowlane policy validate``: a table for a good file, every error path for a bad one;
``apply`` and ``rollback`` with no live switch: a failure, unless ``--store-only``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner, Result

from controller.cli.main import app
from controller.cli.policy import render_written
from controller.cli.remote import WriteOptions
from controller.store.policies import PolicyStore
from controller.store.switches import SwitchStore

REPO = Path(__file__).resolve().parents[2]
DEFAULT_POLICY = REPO / "policies" / "default.yaml"
FIFO_POLICY = REPO / "policies" / "examples" / "fifo.yaml"
NO_LIVE_SWITCH = (
    "error: no live switch (no controller with a switch beat in the last 3 s): nothing would"
    " apply this version, so nothing was stored; write without wait=applied (flowlane policy"
    " apply --store-only) to store it anyway"
)

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


# --------------------------------------------------------------------------------------------
# apply / rollback with no live switch
# --------------------------------------------------------------------------------------------


def write(runner: CliRunner, api_url: str, *args: str) -> Result:
    result = runner.invoke(
        app, list(args), env={"FLOWLANE_API": api_url, "COLUMNS": "250", "USER": "tester"}
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


@pytest.fixture
def policies(redis_client: redis.Redis) -> PolicyStore:
    return PolicyStore(redis_client)


def test_apply_with_no_live_switch_fails_and_stores_nothing(
    runner: CliRunner, api_url: str, redis_client: redis.Redis, policies: PolicyStore
) -> None:
    SwitchStore(redis_client).heartbeat("crashed", now=time.time() - 60)  # a dead controller
    started = time.monotonic()
    result = write(runner, api_url, "policy", "apply", str(DEFAULT_POLICY), "--timeout", "60")
    assert time.monotonic() - started < 5  # refused at once, not after the timeout
    assert result.exit_code == 1
    assert flat(result.stderr) == NO_LIVE_SWITCH
    assert result.stdout == ""
    assert policies.active_version() is None


def test_apply_json_with_no_live_switch_prints_the_refusal(
    runner: CliRunner, api_url: str, policies: PolicyStore
) -> None:
    result = write(runner, api_url, "policy", "apply", str(DEFAULT_POLICY), "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["detail"].startswith("no live switch")


@pytest.mark.parametrize("flag", ["--store-only", "--no-wait"])
def test_store_only_stores_without_a_switch(
    runner: CliRunner, api_url: str, policies: PolicyStore, flag: str
) -> None:
    result = write(runner, api_url, "policy", "apply", str(DEFAULT_POLICY), flag)
    assert result.exit_code == 0, result.output
    assert "stored policy version 1 by cli-admin" in result.stdout
    assert "stored only: not waiting for the switches" in result.stdout
    assert policies.active_version() == 1


def test_rollback_with_no_live_switch_fails_unless_store_only(
    runner: CliRunner, api_url: str, policies: PolicyStore
) -> None:
    write(runner, api_url, "policy", "apply", str(DEFAULT_POLICY), "--store-only")
    write(runner, api_url, "policy", "apply", str(FIFO_POLICY), "--store-only")
    refused = write(runner, api_url, "policy", "rollback", "1")
    assert refused.exit_code == 1
    assert flat(refused.stderr) == NO_LIVE_SWITCH
    assert policies.active_version() == 2
    stored = write(runner, api_url, "policy", "rollback", "1", "--store-only")
    assert stored.exit_code == 0, stored.output
    assert policies.active_version() == 3


def test_the_help_names_store_only(runner: CliRunner) -> None:
    result = runner.invoke(app, ["policy", "apply", "--help"], env={"COLUMNS": "200"})
    assert "--store-only" in result.stdout


def test_a_waited_write_that_no_switch_reports_is_not_a_success() -> None:
    """Every switch confirmed, then left before the answer: rare, but not "applied"."""
    body = {"version": 4, "author": "op", "created_at": 0.0, "comment": "", "applied": {}}
    assert render_written(body, WriteOptions("op", wait=True)) is False
    assert render_written({**body, "applied": {"000000000000000a": 4}}, WriteOptions("op"))
    assert render_written(body, WriteOptions("op", wait=False)) is True


SILENT_TRAPS = """\
classes:
  inference: {priority: 0, dscp: 46, min_rate: 20%}
  training: {priority: 1, dscp: 26, min_rate: 70%}
default_class: inference
ports:
  rate: 10Gbit
  overrides: {s1-eth1: 100Mbit}
"""


def test_validate_warns_of_a_detection_rate_a_port_cannot_reach(
    runner: CliRunner, tmp_path: Path
) -> None:
    """Valid, so exit 0, but the default 10% (1Gbit/s) never fires on a 100Mbit port."""
    path = tmp_path / "slow-port.yaml"
    path.write_text(SILENT_TRAPS + "detection:\n  elephant: {class: training}\n")
    result = runner.invoke(app, ["policy", "validate", str(path)])
    assert result.exit_code == 0, result.output
    assert (
        "warning: detection.elephant.rate: 10% of ports.rate 10Gbit = 1Gbit/s is at or above"
        " the ceiling of ports.overrides.s1-eth1 (100Mbit)"
    ) in flat(result.stdout)


def test_validate_warns_of_fabric_placement_without_detection(
    runner: CliRunner, tmp_path: Path
) -> None:
    path = tmp_path / "fabric.yaml"
    path.write_text(SILENT_TRAPS + "forwarding: fabric\n")
    result = runner.invoke(app, ["policy", "validate", str(path)])
    assert result.exit_code == 0, result.output
    assert "warning: forwarding.placement: placement is on" in flat(result.stdout)
    assert "no `detection` section" in flat(result.stdout)


def test_validate_of_the_default_policy_has_no_warning(runner: CliRunner) -> None:
    result = runner.invoke(app, ["policy", "validate", str(DEFAULT_POLICY)])
    assert "warning" not in result.stdout
