"""deploy/prometheus: the configuration, rules and their unit tests pass promtool, both
/metrics outputs pass its lint, and every metric a rule names is one flowlane exports."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import redis
import yaml
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, generate_latest

from controller.api.app import create_app
from controller.api.settings import ApiSettings
from controller.auth.model import Role
from controller.metrics import ControllerMetrics
from controller.qos.telemetry import QueueStats
from controller.store.switches import SwitchStore
from controller.store.tokens import TokenStore

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
DOCUMENT = {
    "classes": {
        "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
        "training": {"priority": 1, "dscp": 26, "min_rate": "70%"},
    },
    "default_class": "inference",
}


def promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("promtool")
    if tool is None:
        pytest.fail("promtool not found: apt-get install prometheus (deploy/setup.sh does)")
    return subprocess.run(
        [tool, *args], cwd=DEPLOY, input=stdin, capture_output=True, text=True, check=False
    )


def controller_metrics() -> str:
    """The controller's /metrics with every labelled family holding a series."""
    metrics = ControllerMetrics()
    metrics.totals.set_classes("0000000000000001", {"inference": (1, 100)})
    queue = QueueStats("s1-eth1", "inference", 0, 100, 1, 0, 0, 0, 0, 8.0, 1.0, 1000, 0)
    metrics.totals.set_queues("0000000000000001", [queue])
    metrics.store_up.set(1)
    return generate_latest(metrics.registry).decode()


@pytest.fixture
def api_metrics(redis_client: redis.Redis, redis_url: str) -> str:
    """The API's /metrics after a request or two, with a policy and a controller beating."""
    _, secret = TokenStore(redis_client).create("prometheus", Role.admin)
    SwitchStore(redis_client).heartbeat("ctl-1")
    app = create_app(ApiSettings(redis_url=redis_url, registry=CollectorRegistry()))
    with TestClient(app, headers={"Authorization": f"Bearer {secret}"}) as client:
        assert client.put("/v1/policy", json=DOCUMENT).status_code == 201
        response = client.get("/metrics")
    assert response.status_code == 200
    return response.text


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


def test_both_metrics_outputs_pass_promtools_lint(api_metrics: str) -> None:
    for name, text in (("controller", controller_metrics()), ("api", api_metrics)):
        done = promtool("check", "metrics", stdin=text)
        assert done.returncode == 0, f"{name}: {done.stdout}{done.stderr}"


def exported_names(text: str) -> set[str]:
    """Every series name the output can carry, from its TYPE lines (present even for a
    labelled family with no series yet); histograms add their bucket, sum and count."""
    names = set()
    for name, kind in re.findall(r"^# TYPE (flowlane_\w+) (\w+)$", text, re.M):
        names.add(name)
        if kind == "histogram":
            names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    return names


def test_rules_name_only_exported_metrics(api_metrics: str) -> None:
    exported = exported_names(controller_metrics()) | exported_names(api_metrics)
    rules = yaml.safe_load((DEPLOY / "flowlane-rules.yml").read_text())
    named = {
        name
        for group in rules["groups"]
        for rule in group["rules"]
        for name in re.findall(r"\b(flowlane_[a-z_]+)", rule["expr"])
    }
    assert named, "no flowlane metric in the rules"
    assert named <= exported, f"rules name metrics flowlane does not export: {named - exported}"
