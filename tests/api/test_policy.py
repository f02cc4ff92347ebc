"""GET/PUT /v1/policy: versions, ETags, If-Match compare-and-set and its 412s."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from fastapi.testclient import TestClient

from controller.store.policies import PolicyStore


def put(client: TestClient, document: dict[str, Any], **headers: str) -> Any:
    return client.put("/v1/policy", json=document, headers=headers)


def test_no_policy_yet_is_404(client: TestClient) -> None:
    response = client.get("/v1/policy")
    assert response.status_code == 404
    assert response.json() == {
        "detail": "no policy stored yet: PUT /v1/policy (flowlane policy apply) creates version 1"
    }
    assert "etag" not in response.headers


def test_put_stores_version_1_and_get_returns_it(
    client: TestClient, document: dict[str, Any], policies: PolicyStore
) -> None:
    response = client.put(
        "/v1/policy", json=document, params={"author": "alice", "comment": "first cut"}
    )
    assert response.status_code == 200, response.text
    assert response.headers["etag"] == '"1"'
    body = response.json()
    assert body["version"] == 1
    assert (body["author"], body["comment"], body["rollback_of"]) == ("alice", "first cut", None)
    assert body["policy"] == document
    assert body["applied"] == {}
    assert policies.active_version() == 1

    fetched = client.get("/v1/policy")
    assert fetched.status_code == 200
    assert fetched.headers["etag"] == '"1"'
    assert fetched.json() == body


def test_the_author_defaults_to_api(client: TestClient, document: dict[str, Any]) -> None:
    assert put(client, document).json()["author"] == "api"


def test_the_document_is_stored_as_sent(client: TestClient, document: dict[str, Any]) -> None:
    """The operator's spelling stays: rates, names, a port range as a string."""
    document["rules"][1]["match"]["tcp_dst"] = "8000-8010"
    document["classes"]["inference"]["min_rate"] = 10_000_000  # bit/s; fits the 50Mbit port
    response = put(client, document)
    assert response.status_code == 200, response.text
    stored = response.json()["policy"]
    assert stored["rules"][1]["match"]["tcp_dst"] == "8000-8010"
    assert stored["classes"]["inference"]["min_rate"] == 10_000_000


def test_get_shows_the_applied_version_of_live_switches_only(
    client: TestClient, document: dict[str, Any], report_switch: Any
) -> None:
    put(client, document)
    put(client, document)
    report_switch(0x1, applied=2)
    report_switch(0x2, applied=1)
    report_switch(0x3, applied=2, controller="crashed", beat=1.0)
    assert client.get("/v1/policy").json()["applied"] == {
        "0000000000000001": 2,
        "0000000000000002": 1,
    }


@pytest.mark.parametrize("if_match", ['"1"', "1"])
def test_if_match_current_version_writes(
    client: TestClient, document: dict[str, Any], if_match: str
) -> None:
    put(client, document)
    response = put(client, document, **{"If-Match": if_match})
    assert response.status_code == 200, response.text
    assert response.headers["etag"] == '"2"'


@pytest.mark.parametrize("if_match", ['"1"', "1", '"7"'])
def test_if_match_stale_version_is_412_with_the_active_version(
    client: TestClient, document: dict[str, Any], policies: PolicyStore, if_match: str
) -> None:
    put(client, document)
    put(client, document)
    response = put(client, document, **{"If-Match": if_match})
    assert response.status_code == 412
    expected = int(if_match.strip('"'))
    assert response.json() == {
        "detail": f"precondition failed: expected version {expected}, the active version is 2",
        "expected_version": expected,
        "active_version": 2,
    }
    assert policies.active_version() == 2
    assert [v.version for v in policies.history()] == [2, 1]


def test_if_match_on_an_empty_store_is_412(client: TestClient, document: dict[str, Any]) -> None:
    response = put(client, document, **{"If-Match": '"1"'})
    assert response.status_code == 412
    assert response.json()["active_version"] is None


def test_if_match_star_needs_an_existing_policy(
    client: TestClient, document: dict[str, Any]
) -> None:
    refused = put(client, document, **{"If-Match": "*"})
    assert refused.status_code == 412
    assert refused.json() == {
        "detail": "precondition failed: If-Match: * needs an active policy, there is none yet",
        "expected_version": None,
        "active_version": None,
    }
    put(client, document)
    assert put(client, document, **{"If-Match": "*"}).status_code == 200


def test_if_none_match_star_creates_only_the_first_version(
    client: TestClient, document: dict[str, Any]
) -> None:
    assert put(client, document, **{"If-None-Match": "*"}).status_code == 200
    second = put(client, document, **{"If-None-Match": "*"})
    assert second.status_code == 412
    assert second.json()["expected_version"] is None
    assert second.json()["active_version"] == 1
    assert second.json()["detail"] == (
        "precondition failed: expected no policy, the active version is 1"
    )


def test_the_etag_read_is_the_if_match_to_send(
    client: TestClient, document: dict[str, Any]
) -> None:
    """The read-modify-write loop a client does."""
    put(client, document)
    etag = client.get("/v1/policy").headers["etag"]
    document["rules"].pop()
    assert put(client, document, **{"If-Match": etag}).status_code == 200
    assert put(client, document, **{"If-Match": etag}).status_code == 412


def test_concurrent_writers_with_the_same_if_match_exactly_one_wins(
    client: TestClient, document: dict[str, Any], policies: PolicyStore
) -> None:
    put(client, document)
    writers = 6
    barrier = threading.Barrier(writers)
    statuses: list[int] = []
    lock = threading.Lock()

    def write(n: int) -> None:
        barrier.wait()
        response = client.put(
            "/v1/policy",
            json=document,
            params={"author": f"w{n}"},
            headers={"If-Match": '"1"'},
        )
        with lock:
            statuses.append(response.status_code)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(statuses) == [200] + [412] * (writers - 1)
    assert policies.active_version() == 2
    assert len(policies.history()) == 2
