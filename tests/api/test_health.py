"""/healthz answers without Redis; /readyz needs Redis and a controller heartbeat."""

from __future__ import annotations

import time

from fastapi.testclient import TestClient

from controller.store.switches import SwitchStore


def test_healthz(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_without_a_heartbeat_is_503(client: TestClient) -> None:
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"detail": "no controller heartbeat in the last 10 s"}


def test_readyz_with_a_fresh_heartbeat(client: TestClient, switches: SwitchStore) -> None:
    switches.heartbeat("ctl-b")
    switches.heartbeat("ctl-a", now=time.time() - 5)
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ready", "controllers": ["ctl-a", "ctl-b"]}


def test_readyz_with_a_stale_heartbeat_is_503(client: TestClient, switches: SwitchStore) -> None:
    switches.heartbeat("ctl-1", now=time.time() - 11)
    assert client.get("/readyz").status_code == 503
    switches.heartbeat("ctl-1")
    assert client.get("/readyz").status_code == 200
