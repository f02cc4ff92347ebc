"""What flowlane exports, for the tests of what deploy/ refers to: both /metrics outputs
with a series in every family that matters, and the names and labels they carry."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
import redis
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, generate_latest

from controller.api.app import create_app
from controller.api.settings import ApiSettings
from controller.auth.model import Role
from controller.metrics import ControllerMetrics
from controller.qos.telemetry import QueueStats
from controller.store.switches import SwitchStore
from controller.store.tokens import TokenStore

DOCUMENT = {
    "classes": {
        "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
        "training": {"priority": 1, "dscp": 26, "min_rate": "70%"},
    },
    "default_class": "inference",
}


@pytest.fixture
def controller_metrics() -> str:
    """The controller's /metrics with a switch, its class totals, a queue, and a series in
    each labelled family the rules and the dashboard use."""
    metrics = ControllerMetrics()
    dpid = "0000000000000001"
    metrics.totals.set_classes(dpid, {"inference": (1, 100)})
    queue = QueueStats("s1-eth1", "inference", 0, 100, 1, 0, 0, 0, 0, 8.0, 1.0, 1000, 0)
    metrics.totals.set_queues(dpid, [queue])
    metrics.store_up.set(1)
    metrics.applied_version.labels(dpid).set(1)
    metrics.detections.labels(dpid, "rate").inc()
    metrics.releases.labels(dpid, "idle").inc()
    metrics.overrides_active.labels(dpid).set(0)
    metrics.tracked_flows.labels(dpid).set(0)
    metrics.link_utilization.labels(dpid, "1").set(0.5)
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


@dataclass(frozen=True)
class Exported:
    names: frozenset[str]
    labels: frozenset[str]


@pytest.fixture
def exported(controller_metrics: str, api_metrics: str) -> Exported:
    """Series names (from TYPE lines, so labelled families without series count too; a
    histogram adds its bucket, sum and count) and every label name a series carries, plus
    the labels Prometheus adds itself."""
    names: set[str] = set()
    labels = {"job", "instance", "le"}
    for text in (controller_metrics, api_metrics):
        for name, kind in re.findall(r"^# TYPE (flowlane_\w+) (\w+)$", text, re.M):
            names.add(name)
            if kind == "histogram":
                names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
        labels |= set(re.findall(r'[{,](\w+)="', text))
    return Exported(frozenset(names), frozenset(labels))
