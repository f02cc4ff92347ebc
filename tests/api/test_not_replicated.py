"""A write too few replicas confirmed is answered 503, never 2xx, saying what that means."""

from __future__ import annotations

import pytest
import redis
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from controller.api.app import create_app
from controller.api.settings import ApiSettings
from tests.api.conftest import DOCUMENT, bearer


def test_the_api_answers_503_never_201_for_a_write_not_on_a_replica(
    redis_client: redis.Redis, redis_url: str
) -> None:
    settings = ApiSettings(
        redis_url=f"{redis_url}?min_replicas=1&wait_ms=20", registry=CollectorRegistry()
    )
    with TestClient(create_app(settings), headers=bearer(redis_client)) as client:
        answer = client.put("/v1/policy", json=DOCUMENT)
    assert answer.status_code == 503
    body = answer.json()
    assert (body["replicas"], body["required_replicas"]) == (0, 1)
    assert "primary only" in body["detail"]
    assert answer.headers["Retry-After"]


def test_the_api_refuses_to_start_on_a_bad_url() -> None:
    with pytest.raises(ValueError, match="no master name"):
        ApiSettings(redis_url="redis+sentinel://127.0.0.1:26379")
