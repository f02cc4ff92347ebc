"""GET /v1/policy/history and POST /v1/policy/rollback, and the history limit."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from controller.api.app import create_app
from controller.api.settings import ApiSettings
from controller.store.policies import PolicyStore
from tests.api.conftest import bearer


@pytest.fixture
def three_versions(
    client: TestClient, document: dict[str, Any], redis_client: redis.Redis
) -> list[dict[str, Any]]:
    """Versions 1-3, each with one rule fewer, so they are told apart by their rules;
    written with tokens a0, a1 and a2, their authors."""
    bodies = []
    for n in range(3):
        doc = {**document, "rules": document["rules"][n:]}
        response = client.put(
            "/v1/policy",
            params={"comment": f"c{n}"},
            json=doc,
            headers=bearer(redis_client, name=f"a{n}"),
        )
        assert response.status_code == 201
        bodies.append(response.json())
    return bodies


def test_empty_history(client: TestClient) -> None:
    response = client.get("/v1/policy/history")
    assert response.status_code == 200
    assert response.json() == {"active_version": None, "versions": []}


def test_history_is_newest_first(client: TestClient, three_versions: list[dict[str, Any]]) -> None:
    body = client.get("/v1/policy/history").json()
    assert body["active_version"] == 3
    assert [
        (v["version"], v["author"], v["comment"], v["active"], v["rollback_of"])
        for v in body["versions"]
    ] == [
        (3, "a2", "c2", True, None),
        (2, "a1", "c1", False, None),
        (1, "a0", "c0", False, None),
    ]
    assert body["versions"][0]["created_at"] == three_versions[2]["created_at"]


def test_history_limit(client: TestClient, three_versions: list[dict[str, Any]]) -> None:
    versions = client.get("/v1/policy/history", params={"limit": 2}).json()["versions"]
    assert [v["version"] for v in versions] == [3, 2]


def test_rollback_stores_the_old_document_as_a_new_version(
    client: TestClient, three_versions: list[dict[str, Any]]
) -> None:
    response = client.post("/v1/policy/rollback", json={"version": 1})
    assert response.status_code == 201, response.text
    assert response.headers["etag"] == '"4"'
    body = response.json()
    assert (body["version"], body["rollback_of"], body["author"]) == (4, 1, "test-admin")
    assert body["comment"] == "rollback to version 1"
    assert body["policy"] == three_versions[0]["policy"]
    assert client.get("/v1/policy").json()["policy"] == three_versions[0]["policy"]
    history = client.get("/v1/policy/history").json()
    assert [(v["version"], v["rollback_of"], v["active"]) for v in history["versions"]] == [
        (4, 1, True),
        (3, None, False),
        (2, None, False),
        (1, None, False),
    ]


def test_rollback_with_a_comment(client: TestClient, three_versions: list[dict[str, Any]]) -> None:
    response = client.post(
        "/v1/policy/rollback", params={"comment": "bad rule"}, json={"version": 2}
    )
    assert response.json()["comment"] == "bad rule"


def test_rollback_to_an_unknown_version_is_404(
    client: TestClient, three_versions: list[dict[str, Any]], policies: PolicyStore
) -> None:
    response = client.post("/v1/policy/rollback", json={"version": 9})
    assert response.status_code == 404
    assert response.json() == {"detail": "no policy version 9"}
    assert policies.active_version() == 3


def test_rollback_honours_if_match(
    client: TestClient, three_versions: list[dict[str, Any]], policies: PolicyStore
) -> None:
    stale = client.post("/v1/policy/rollback", json={"version": 1}, headers={"If-Match": '"2"'})
    assert stale.status_code == 412
    assert stale.json()["active_version"] == 3
    fresh = client.post("/v1/policy/rollback", json={"version": 1}, headers={"If-Match": '"3"'})
    assert fresh.status_code == 201
    assert policies.active_version() == 4


def test_rollback_to_a_document_that_no_longer_validates_is_422(
    client: TestClient, document: dict[str, Any], policies: PolicyStore
) -> None:
    """A version stored by an older, laxer flowlane must not reach today's controllers."""
    policies.put({**document, "default_class": "gone"}, author="old-flowlane")
    client.put("/v1/policy", json=document)
    response = client.post("/v1/policy/rollback", json={"version": 1})
    assert response.status_code == 422
    assert response.json() == {
        "detail": "invalid policy: 1 error(s)",
        "errors": [
            {
                "path": "default_class",
                "message": "unknown class 'gone' (classes: inference, training, best-effort)",
            }
        ],
    }
    assert policies.active_version() == 2


def test_rollback_to_the_active_document_is_unchanged(
    client: TestClient, three_versions: list[dict[str, Any]], policies: PolicyStore
) -> None:
    response = client.post("/v1/policy/rollback", json={"version": 3})
    assert response.status_code == 200, response.text
    assert response.headers["etag"] == '"3"'
    assert (response.json()["version"], response.json()["unchanged"]) == (3, True)
    assert policies.active_version() == 3
    assert len(client.get("/v1/policy/history").json()["versions"]) == 3


# ---- the history limit --------------------------------------------------------------------


@pytest.fixture
def short_history(redis_client: redis.Redis, redis_url: str) -> Iterator[TestClient]:
    """An app that keeps two versions."""
    settings = ApiSettings(redis_url=redis_url, registry=CollectorRegistry(), history_limit=2)
    with TestClient(create_app(settings), headers=bearer(redis_client)) as test_client:
        yield test_client


def test_history_is_trimmed_to_the_limit(
    short_history: TestClient, document: dict[str, Any]
) -> None:
    docs = [{**document, "rules": document["rules"][n:]} for n in range(3)]
    for doc in [*docs, docs[0]]:  # the last is version 1's document, stored as version 4
        assert short_history.put("/v1/policy", json=doc).status_code == 201
    body = short_history.get("/v1/policy/history").json()
    assert body["active_version"] == 4
    assert [(v["version"], v["active"]) for v in body["versions"]] == [(4, True), (3, False)]
    assert short_history.get("/v1/policy").json()["version"] == 4


def test_rollback_to_a_trimmed_version_is_404(
    short_history: TestClient, document: dict[str, Any], policies: PolicyStore
) -> None:
    for n in range(3):
        short_history.put("/v1/policy", json={**document, "rules": document["rules"][n:]})
    response = short_history.post("/v1/policy/rollback", json={"version": 1})
    assert response.status_code == 404
    assert response.json() == {"detail": "no policy version 1"}
    assert policies.active_version() == 3
    kept = short_history.post("/v1/policy/rollback", json={"version": 2})
    assert (kept.status_code, kept.json()["version"]) == (201, 4)
    versions = short_history.get("/v1/policy/history").json()["versions"]
    assert [v["version"] for v in versions] == [4, 3]


@pytest.mark.parametrize("limit", [0, -1])
def test_the_history_limit_setting_must_be_positive(limit: int) -> None:
    with pytest.raises(ValueError, match=r"^history_limit must be at least 1 "):
        ApiSettings(redis_url="redis://127.0.0.1:1/0", history_limit=limit)
