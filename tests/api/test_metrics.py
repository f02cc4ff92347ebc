"""GET /metrics: requests by route template and status, latency by route, on the app's registry."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from controller.api.settings import ApiSettings


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def requests(method: str, route: str, status: int) -> tuple[str, tuple[tuple[str, str], ...]]:
    labels = {"method": method, "route": route, "status": str(status)}
    return ("flowlane_api_requests_total", tuple(sorted(labels.items())))


def test_requests_are_counted_by_route_template_and_status(
    client: TestClient, document: dict[str, Any]
) -> None:
    client.get("/v1/policy")
    client.put("/v1/policy", json=document)
    client.put("/v1/policy", json=document)
    client.put("/v1/policy", json={"classes": {}})
    client.get("/v1/policy/history?limit=3")
    client.get("/no/such/page/123")
    client.get("/no/such/page/456")
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    found = samples(response.text)
    assert found[requests("GET", "/v1/policy", 404)] == 1
    assert found[requests("PUT", "/v1/policy", 201)] == 1  # stored
    assert found[requests("PUT", "/v1/policy", 200)] == 1  # the same document: unchanged
    assert found[requests("PUT", "/v1/policy", 422)] == 1
    assert found[requests("GET", "/v1/policy/history", 200)] == 1
    assert found[requests("GET", "unmatched", 404)] == 2
    assert not any("/no/such" in str(labels) for _, labels in found)


def test_latency_histogram_by_route(client: TestClient, document: dict[str, Any]) -> None:
    client.put("/v1/policy", json=document)
    found = samples(client.get("/metrics").text)
    labels = (("method", "PUT"), ("route", "/v1/policy"))
    assert found[("flowlane_api_request_seconds_count", labels)] == 1
    assert 0 < found[("flowlane_api_request_seconds_sum", labels)] < 5
    assert (
        found[("flowlane_api_request_seconds_bucket", tuple(sorted((*labels, ("le", "+Inf")))))]
        == 1
    )


def test_metrics_live_on_the_injected_registry(client: TestClient, settings: ApiSettings) -> None:
    client.get("/healthz")
    value = settings.registry.get_sample_value(
        "flowlane_api_requests_total", {"method": "GET", "route": "/healthz", "status": "200"}
    )
    assert value == 1
    assert isinstance(settings.registry, CollectorRegistry)
