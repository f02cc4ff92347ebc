"""deploy/prometheus: the configuration, rules and their unit tests pass promtool, both
/metrics outputs pass its lint, and every metric a rule names is one flowlane exports."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.deploy.conftest import Exported

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"


def promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("promtool")
    if tool is None:
        pytest.fail("promtool not found: apt-get install prometheus (deploy/setup.sh does)")
    return subprocess.run(
        [tool, *args], cwd=DEPLOY, input=stdin, capture_output=True, text=True, check=False
    )


def test_the_configuration_is_valid() -> None:
    done = promtool("check", "config", "--syntax-only", "prometheus.yml")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_rules_are_valid_and_their_unit_tests_pass() -> None:
    checked = promtool("check", "rules", "flowlane-rules.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", "flowlane-rules.test.yml")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout + tested.stderr


def test_every_alert_has_a_unit_test_that_fires_it() -> None:
    rules = yaml.safe_load((DEPLOY / "flowlane-rules.yml").read_text())
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    tests = yaml.safe_load((DEPLOY / "flowlane-rules.test.yml").read_text())["tests"]
    fired = {
        case["alertname"]
        for test in tests
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert alerts == fired, f"alerts without a firing test: {alerts - fired}"


def test_both_metrics_outputs_pass_promtools_lint(
    controller_metrics: str, api_metrics: str
) -> None:
    for name, text in (("controller", controller_metrics), ("api", api_metrics)):
        done = promtool("check", "metrics", stdin=text)
        assert done.returncode == 0, f"{name}: {done.stdout}{done.stderr}"


def test_rules_name_only_exported_metrics(exported: Exported) -> None:
    rules = yaml.safe_load((DEPLOY / "flowlane-rules.yml").read_text())
    named = {
        name
        for group in rules["groups"]
        for rule in group["rules"]
        for name in re.findall(r"\b(flowlane_[a-z_]+)", rule["expr"])
    }
    assert named, "no flowlane metric in the rules"
    missing = named - exported.names
    assert not missing, f"rules name metrics flowlane does not export: {missing}"
