"""Redis down: 503 with Retry-After on every route that needs it; the same app serves again
once it is back.

Every route but the probes needs Redis, if only to check the caller's token.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from controller.api.errors import RETRY_AFTER_S
from controller.store.client import connect
from controller.store.errors import StoreUnavailableError
from controller.store.policies import PolicyStore
from tests.api.conftest import bearer

JOB: dict[str, Any] = {
    "name": "allreduce",
    "class": "training",
    "endpoints": [{"ipv4": "10.0.0.0/24", "ports": [4791]}],
}
ROUTES: list[tuple[str, str, dict[str, Any]]] = [
    ("GET", "/readyz", {}),
    ("GET", "/v1/policy", {}),
    ("PUT", "/v1/policy", {"json": "DOCUMENT"}),
    ("PUT", "/v1/policy?wait=applied", {"json": "DOCUMENT"}),
    ("PUT", "/v1/policy", {"json": "DOCUMENT", "headers": {"If-Match": "*"}}),
    ("POST", "/v1/policy/plan", {"json": "DOCUMENT"}),
    ("GET", "/v1/policy/history", {}),
    ("POST", "/v1/policy/rollback", {"json": {"version": 1}}),
    ("GET", "/v1/switches", {}),
    ("GET", "/v1/switches/0x2a/queues", {}),
    ("GET", "/v1/controllers", {}),
    ("GET", "/v1/jobs", {}),
    ("POST", "/v1/jobs", {"json": JOB}),
    ("GET", "/v1/jobs/allreduce", {}),
    ("DELETE", "/v1/jobs/allreduce", {}),
    ("GET", "/v1/flows", {}),
    ("GET", "/v1/topology", {}),
    ("GET", "/v1/paths?src=10.0.0.1&dst=10.0.0.2", {}),
    ("GET", "/v1/events", {}),
    ("GET", "/metrics", {}),
    ("POST", "/v1/tokens", {"json": {"name": "ci", "role": "viewer"}}),
    ("GET", "/v1/tokens", {}),
    ("DELETE", "/v1/tokens/ci", {}),
    ("GET", "/v1/audit", {}),
]
WITHOUT_REDIS = {("GET", "/healthz")}
"""Routes that answer from the process alone, so a Redis outage cannot fail them."""


def authorize(client: TestClient, server: Any) -> None:
    """Give ``client`` an admin token of the (new, empty) Redis ``server``."""
    client.headers.update(bearer(connect(server.url)))


def send(client: TestClient, method: str, path: str, options: dict[str, Any], document: Any) -> Any:
    kwargs = {k: (document if v == "DOCUMENT" else v) for k, v in options.items()}
    return client.request(method, path, **kwargs)


@pytest.mark.parametrize(("method", "path", "options"), ROUTES)
def test_every_redis_route_is_503(
    down_client: TestClient,
    document: dict[str, Any],
    method: str,
    path: str,
    options: dict[str, Any],
) -> None:
    response = send(down_client, method, path, options, document)
    assert response.status_code == 503
    detail = response.json()["detail"]
    assert detail.startswith("Redis unavailable: ")
    assert "onnection refused" in detail
    assert response.headers["retry-after"] == str(RETRY_AFTER_S)


def test_every_route_is_in_the_list(down_client: TestClient) -> None:
    """A new route either needs Redis (and joins ROUTES) or says it does not."""
    operations = {
        (method.upper(), path)
        for path, methods in down_client.get("/openapi.json").json()["paths"].items()
        for method in methods
    }
    listed = {(method, path.split("?")[0]) for method, path, _ in ROUTES}
    named = {
        "/v1/jobs/allreduce": "/v1/jobs/{name}",
        "/v1/tokens/ci": "/v1/tokens/{name}",
        "/v1/switches/0x2a/queues": "/v1/switches/{dpid}/queues",
    }
    listed = {(m, named.get(p, p)) for m, p in listed}
    assert operations == listed | WITHOUT_REDIS


def test_every_route_recovers_when_redis_comes_up(
    down_client: TestClient, unused_port: int, start_redis: Any, document: dict[str, Any]
) -> None:
    for method, path, options in ROUTES:
        assert send(down_client, method, path, options, document).status_code == 503, path
    authorize(down_client, start_redis(unused_port))
    for method, path, options in ROUTES:
        response = send(down_client, method, path, options, document)
        # /readyz stays 503 (no controller beats here), for that reason, not Redis.
        assert "Redis unavailable" not in response.text, (method, path, response.text)
        assert response.status_code < 500 or path == "/readyz", (method, path, response.text)


def test_liveness_and_the_schema_do_not_need_redis(
    down_client: TestClient, document: dict[str, Any]
) -> None:
    assert down_client.get("/healthz").status_code == 200
    assert down_client.get("/openapi.json").status_code == 200
    # an invalid document too: nothing is validated for a caller whose token is unchecked
    document["classes"] = {}
    assert down_client.put("/v1/policy", json=document).status_code == 503


def test_the_app_recovers_when_redis_comes_up(
    down_client: TestClient, unused_port: int, start_redis: Any, document: dict[str, Any]
) -> None:
    assert down_client.get("/v1/policy").status_code == 503
    server = start_redis(unused_port)
    authorize(down_client, server)
    assert down_client.get("/v1/policy").status_code == 404
    assert down_client.put("/v1/policy", json=document).status_code == 201

    server.stop()
    assert down_client.get("/v1/policy").status_code == 503
    assert down_client.put("/v1/policy", json=document).status_code == 503

    server.start()  # a fresh, empty Redis: no persistence in tests
    assert down_client.get("/v1/policy").status_code == 401  # its tokens went with it
    authorize(down_client, server)
    assert down_client.get("/v1/policy").status_code == 404
    response = down_client.put("/v1/policy", json=document)  # the write script is loaded again
    assert response.status_code == 201
    assert response.json()["version"] == 1


def test_redis_failing_after_the_write_still_names_the_stored_version(
    client: TestClient,
    document: dict[str, Any],
    policies: PolicyStore,
    report_switch: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The client must learn that version 1 exists, or it would write it again."""
    report_switch(0xA)  # a live switch to wait for

    def gone() -> dict[str, int]:
        raise StoreUnavailableError("Redis unavailable: connection reset")

    services = client.app.state.services  # type: ignore[attr-defined]
    monkeypatch.setattr(services.switches, "applied", gone)
    response = client.put("/v1/policy", params={"wait": "applied"}, json=document)
    assert response.status_code == 503
    assert response.headers["etag"] == '"1"'
    assert response.headers["retry-after"] == str(RETRY_AFTER_S)
    assert response.json() == {
        "detail": "version 1 is stored and active, but Redis failed afterwards:"
        " Redis unavailable: connection reset",
        "version": 1,
    }
    assert policies.active_version() == 1
