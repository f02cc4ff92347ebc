"""GET/PUT /v1/policy: versions, ETags, If-Match compare-and-set and its 412s, unchanged
writes, and the policy events stored with each version."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from controller.store.policies import PolicyStore


def put(client: TestClient, document: dict[str, Any], **headers: str) -> Any:
    return client.put("/v1/policy", json=document, headers=headers)


def variant(document: dict[str, Any], n: int) -> dict[str, Any]:
    """``document`` with its first rule renamed: a different version for each ``n``."""
    rules = [{**document["rules"][0], "name": f"variant-{n}"}, *document["rules"][1:]]
    return {**document, "rules": rules}


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
    response = client.put("/v1/policy", json=document, params={"comment": "first cut"})
    assert response.status_code == 201, response.text
    assert response.headers["etag"] == '"1"'
    body = response.json()
    assert body.pop("unchanged") is False
    assert body["version"] == 1
    # the author is the token's name
    assert (body["author"], body["comment"], body["rollback_of"]) == (
        "test-admin",
        "first cut",
        None,
    )
    assert body["policy"] == document
    assert body["applied"] == {}
    assert policies.active_version() == 1

    fetched = client.get("/v1/policy")
    assert fetched.status_code == 200
    assert fetched.headers["etag"] == '"1"'
    assert fetched.json() == body


def test_the_author_is_the_token_and_cannot_be_claimed(
    client: TestClient, document: dict[str, Any], policies: PolicyStore
) -> None:
    assert put(client, document).json()["author"] == "test-admin"
    claimed = client.put("/v1/policy", params={"author": "root"}, json={**document, "rules": []})
    assert claimed.status_code == 422
    assert claimed.json()["errors"] == [
        {"path": "query.author", "message": "the author is the name of the request's token"}
    ]
    assert policies.active_version() == 1


def test_the_document_is_stored_as_sent(client: TestClient, document: dict[str, Any]) -> None:
    """The operator's spelling stays: rates, names, a port range as a string."""
    document["rules"][1]["match"]["tcp_dst"] = "8000-8010"
    document["classes"]["inference"]["min_rate"] = 10_000_000  # bit/s; fits the 50Mbit port
    response = put(client, document)
    assert response.status_code == 201, response.text
    stored = response.json()["policy"]
    assert stored["rules"][1]["match"]["tcp_dst"] == "8000-8010"
    assert stored["classes"]["inference"]["min_rate"] == 10_000_000


def test_get_shows_the_applied_version_of_live_switches_only(
    client: TestClient, document: dict[str, Any], report_switch: Any
) -> None:
    put(client, document)
    put(client, variant(document, 2))
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
    response = put(client, variant(document, 2), **{"If-Match": if_match})
    assert response.status_code == 201, response.text
    assert response.headers["etag"] == '"2"'


@pytest.mark.parametrize("if_match", ['"1"', "1", '"7"'])
def test_if_match_stale_version_is_412_with_the_active_version(
    client: TestClient, document: dict[str, Any], policies: PolicyStore, if_match: str
) -> None:
    put(client, document)
    put(client, variant(document, 2))
    response = put(client, variant(document, 3), **{"If-Match": if_match})
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
    assert put(client, variant(document, 2), **{"If-Match": "*"}).status_code == 201


def test_if_none_match_star_creates_only_the_first_version(
    client: TestClient, document: dict[str, Any]
) -> None:
    assert put(client, document, **{"If-None-Match": "*"}).status_code == 201
    second = put(client, variant(document, 2), **{"If-None-Match": "*"})
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
    assert put(client, document, **{"If-Match": etag}).status_code == 201
    assert put(client, variant(document, 2), **{"If-Match": etag}).status_code == 412


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
            json=variant(document, n),
            headers={"If-Match": '"1"'},
        )
        with lock:
            statuses.append(response.status_code)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(statuses) == [201] + [412] * (writers - 1)
    assert policies.active_version() == 2
    assert len(policies.history()) == 2


# ---- a write that changes nothing ---------------------------------------------------------


def policy_events(client: TestClient) -> list[int]:
    """The versions the events stream records, oldest first."""
    events = client.get("/v1/events", params={"kind": "policy"}).json()["events"]
    return [e["version"] for e in events]


def test_putting_the_active_document_again_stores_nothing(
    client: TestClient,
    document: dict[str, Any],
    policies: PolicyStore,
    redis_client: redis.Redis,
) -> None:
    first = client.put("/v1/policy", json=document)
    pubsub = redis_client.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(policies.channel)
    try:
        assert pubsub.get_message(timeout=5) is None
        again = client.put(
            "/v1/policy",
            params={"comment": "same"},
            json=dict(reversed(list(document.items()))),  # key order does not matter
        )
        assert pubsub.get_message(timeout=0.5) is None  # nothing announced
    finally:
        pubsub.close()
    assert again.status_code == 200, again.text
    assert again.headers["etag"] == '"1"'
    body = again.json()
    assert body.pop("unchanged") is True
    expected = first.json()
    expected.pop("unchanged")
    assert body == expected  # version 1 as alice stored it
    assert [v.version for v in policies.history()] == [1]
    assert policy_events(client) == [1]


def test_a_different_document_is_a_new_version(
    client: TestClient, document: dict[str, Any]
) -> None:
    put(client, document)
    response = put(client, variant(document, 2))
    assert response.status_code == 201
    assert (response.json()["version"], response.json()["unchanged"]) == (2, False)
    back = put(client, document)  # version 1's document, but 2 is active: a new version
    assert (back.status_code, back.json()["version"]) == (201, 3)
    assert policy_events(client) == [1, 2, 3]


def test_an_unchanged_put_with_if_match_of_the_active_version(
    client: TestClient, document: dict[str, Any]
) -> None:
    put(client, document)
    same = put(client, document, **{"If-Match": '"1"'})
    assert (same.status_code, same.json()["unchanged"]) == (200, True)
    stale = put(client, document, **{"If-Match": '"7"'})  # the precondition comes first
    assert stale.status_code == 412


def test_waiting_on_an_unchanged_put_answers_at_once(
    client: TestClient, document: dict[str, Any], report_switch: Any
) -> None:
    put(client, document)
    report_switch(0xA, applied=1)
    response = client.put("/v1/policy", params={"wait": "applied", "timeout": 5}, json=document)
    assert response.status_code == 200, response.text
    assert response.json()["unchanged"] is True
    assert response.json()["applied"] == {"000000000000000a": 1}


def test_a_refused_write_records_no_event(client: TestClient, document: dict[str, Any]) -> None:
    put(client, document)
    assert put(client, variant(document, 2), **{"If-Match": '"9"'}).status_code == 412
    assert put(client, variant(document, 2), **{"If-None-Match": "*"}).status_code == 412
    assert policy_events(client) == [1]
