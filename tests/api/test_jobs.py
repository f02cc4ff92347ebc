"""/v1/jobs: register (checked against the active policy), list, get, delete, and expiry."""

from __future__ import annotations

import json
import time
from typing import Any

import jsonschema_rs
import pytest
import redis
from fastapi.testclient import TestClient

from controller.store.client import connect
from controller.store.events import EventStore
from controller.store.jobs import JobStore
from tests.api.conftest import bearer

JOB: dict[str, Any] = {
    "name": "train-1",
    "class": "training",
    "endpoints": [{"ipv4": "10.0.0.0/24", "ports": [4791]}, {"ipv4": "10.0.1.7"}],
    "ttl": "10m",
}


@pytest.fixture
def jobs(redis_client: redis.Redis) -> JobStore:
    return JobStore(redis_client)


@pytest.fixture
def events(redis_client: redis.Redis) -> EventStore:
    return EventStore(redis_client)


@pytest.fixture
def with_policy(client: TestClient, document: dict[str, Any]) -> TestClient:
    """The client, with the conftest document (inference, training, best-effort) active."""
    assert client.put("/v1/policy", json=document).status_code == 201
    return client


def job_events(events: EventStore) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in e.to_dict().items() if k not in ("id", "time")}
        for e in events.read(limit=1000)
        if e.kind == "job"
    ]


def test_register_a_job(with_policy: TestClient, jobs: JobStore, events: EventStore) -> None:
    before = time.time()
    response = with_policy.post("/v1/jobs", json=JOB)
    assert response.status_code == 201, response.text
    assert response.headers["location"] == "/v1/jobs/train-1"
    body = response.json()
    endpoints = [
        {"ipv4": "10.0.0.0/24", "ports": [4791]},
        {"ipv4": "10.0.1.7/32", "ports": None},
    ]
    assert {k: v for k, v in body.items() if k not in ("created_at", "expires_at")} == {
        "name": "train-1",
        "class": "training",
        "endpoints": endpoints,
        "ttl": 600.0,
        "weight": 1,
        "tenant": None,
    }
    assert before <= body["created_at"] <= time.time()
    assert body["expires_at"] == pytest.approx(body["created_at"] + 600)
    [stored] = jobs.all()
    assert stored.to_dict() == body
    assert job_events(events) == [
        {
            "kind": "job",
            "name": "train-1",
            "op": "registered",
            "class": "training",
            "endpoints": endpoints,
            "weight": 1,
        }
    ]


def test_a_weight_is_stored_listed_and_in_the_event(
    with_policy: TestClient, jobs: JobStore, events: EventStore
) -> None:
    response = with_policy.post("/v1/jobs", json={**JOB, "weight": 3})
    assert response.status_code == 201, response.text
    assert response.json()["weight"] == 3
    [stored] = jobs.all()
    assert stored.document["weight"] == 3
    assert with_policy.get("/v1/jobs").json()["jobs"][0]["weight"] == 3
    assert with_policy.get("/v1/jobs/train-1").json()["weight"] == 3
    assert job_events(events)[0]["weight"] == 3


def test_a_bad_weight_is_422_naming_the_field_and_nothing_is_stored(
    with_policy: TestClient, jobs: JobStore
) -> None:
    response = with_policy.post("/v1/jobs", json={**JOB, "weight": 0})
    assert response.status_code == 422
    [error] = response.json()["errors"]
    assert error["path"] == "weight"
    assert error["message"].startswith("weight 0 is outside 1..100:")
    string = with_policy.post("/v1/jobs", json={**JOB, "weight": "2"}).json()["errors"]
    assert string == [
        {"path": "weight", "message": "weight must be a whole number from 1 to 100, not '2'"}
    ]
    assert jobs.all() == []


def test_a_job_stored_before_weights_is_shown_with_weight_one(
    with_policy: TestClient, jobs: JobStore
) -> None:
    document = {"class": "training", "endpoints": [{"ipv4": "10.0.1.7/32", "ports": None}]}
    jobs.put("old-1", {**document, "ttl": 60.0}, 60)
    assert with_policy.get("/v1/jobs/old-1").json()["weight"] == 1


def test_the_ttl_defaults_to_an_hour(with_policy: TestClient) -> None:
    job = {k: v for k, v in JOB.items() if k != "ttl"}
    assert with_policy.post("/v1/jobs", json=job).json()["ttl"] == 3600.0


def test_registering_again_replaces_the_job_and_restarts_its_ttl(
    with_policy: TestClient, jobs: JobStore, events: EventStore
) -> None:
    first = with_policy.post("/v1/jobs", json=JOB).json()
    second = with_policy.post("/v1/jobs", json={**JOB, "class": "best-effort", "ttl": 30}).json()
    assert second["created_at"] >= first["created_at"]
    assert second["expires_at"] == pytest.approx(second["created_at"] + 30)
    [stored] = jobs.all()
    assert stored.document["class"] == "best-effort"
    assert [e["op"] for e in job_events(events)] == ["registered", "registered"]


def test_no_policy_yet_is_a_conflict(client: TestClient, jobs: JobStore) -> None:
    response = client.post("/v1/jobs", json=JOB)
    assert response.status_code == 409
    assert response.json() == {
        "detail": "no policy stored yet: a job names a class of the active policy;"
        " PUT /v1/policy (flowlane policy apply) first"
    }
    assert jobs.all() == []


def test_an_unknown_class_is_refused_with_its_path(
    with_policy: TestClient, jobs: JobStore, events: EventStore
) -> None:
    response = with_policy.post("/v1/jobs", json={**JOB, "class": "bulk"})
    assert response.status_code == 422
    assert response.json() == {
        "detail": "invalid request body: 1 error(s)",
        "errors": [
            {
                "path": "class",
                "message": "unknown class 'bulk' (classes: inference, training, best-effort)",
            }
        ],
    }
    assert jobs.all() == []
    assert job_events(events) == []


def test_the_class_is_checked_against_the_active_version(
    with_policy: TestClient, document: dict[str, Any]
) -> None:
    del document["classes"]["best-effort"]
    document["rules"] = [r for r in document["rules"] if r["class"] != "best-effort"]
    document["classes"]["training"]["min_rate"] = "80%"
    assert with_policy.put("/v1/policy", json=document).status_code == 201
    response = with_policy.post("/v1/jobs", json={**JOB, "class": "best-effort"})
    assert response.status_code == 422
    assert "classes: inference, training)" in response.json()["errors"][0]["message"]


def test_every_field_error_is_listed_with_its_path(with_policy: TestClient, jobs: JobStore) -> None:
    response = with_policy.post(
        "/v1/jobs",
        json={
            "name": "x y",
            "class": "training",
            "endpoints": [{"ipv4": "10.0.0.1/24"}, {"ipv4": "10.0.0.0/8", "ports": "90-80"}],
            "ttl": "8d",
            "owner": "slurm",
        },
    )
    assert response.status_code == 422
    body = response.json()
    assert body["detail"] == "invalid request body: 5 error(s)"
    assert [e["path"] for e in body["errors"]] == [
        "name",
        "endpoints[0].ipv4",
        "endpoints[1].ports",
        "ttl",
        "owner",
    ]
    assert "port range '90-80' is empty" in body["errors"][2]["message"]
    assert jobs.all() == []


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "empty body"),
        (b"{", "invalid JSON"),
        (b"[1]", "Input should be a valid dictionary"),
        (b'{"name": NaN}', "NaN is not valid JSON"),
    ],
)
def test_a_body_that_is_not_a_job(with_policy: TestClient, body: bytes, message: str) -> None:
    response = with_policy.post(
        "/v1/jobs", content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422
    [error] = response.json()["errors"]
    assert error["path"] == "(document)"
    assert message in error["message"]


def test_list_and_get(with_policy: TestClient) -> None:
    assert with_policy.get("/v1/jobs").json() == {"jobs": []}
    with_policy.post("/v1/jobs", json={**JOB, "name": "b"})
    with_policy.post("/v1/jobs", json={**JOB, "name": "a", "class": "inference"})
    listed = with_policy.get("/v1/jobs").json()["jobs"]
    assert [(j["name"], j["class"]) for j in listed] == [("a", "inference"), ("b", "training")]
    one = with_policy.get("/v1/jobs/b")
    assert one.status_code == 200
    assert one.json() == {**listed[1], "pinned": []}  # no fabric snapshot: nothing placed


def test_get_an_unknown_job(client: TestClient) -> None:
    response = client.get("/v1/jobs/nope")
    assert (response.status_code, response.json()) == (404, {"detail": "no job 'nope'"})


def test_a_name_no_job_can_have_is_invalid(client: TestClient) -> None:
    for method in ("GET", "DELETE"):
        response = client.request(method, "/v1/jobs/-x")
        assert response.status_code == 422
        assert response.json()["errors"][0]["path"] == "path.name"


def test_delete(with_policy: TestClient, jobs: JobStore, events: EventStore) -> None:
    with_policy.post("/v1/jobs", json=JOB)
    response = with_policy.delete("/v1/jobs/train-1")
    assert (response.status_code, response.content) == (204, b"")
    assert jobs.all() == []
    again = with_policy.delete("/v1/jobs/train-1")
    assert (again.status_code, again.json()) == (404, {"detail": "no job 'train-1'"})
    assert job_events(events)[1:] == [{"kind": "job", "name": "train-1", "op": "deleted"}]


def test_expired_jobs_are_invisible_and_purged_with_an_event(
    client: TestClient, jobs: JobStore, events: EventStore
) -> None:
    jobs.put("old", {"class": "training", "endpoints": [], "ttl": 10.0}, 10, now=1000.0)
    jobs.put("gone", {"class": "training", "endpoints": [], "ttl": 10.0}, 10, now=1000.0)
    jobs.put("live", {"class": "training", "endpoints": [], "ttl": 60.0}, 60)
    assert client.get("/v1/jobs/old").status_code == 404
    assert [j["name"] for j in client.get("/v1/jobs").json()["jobs"]] == ["live"]
    assert client.delete("/v1/jobs/gone").status_code == 404
    assert [j.name for j in jobs.all(now=0.0)] == ["live"]  # purged, not merely hidden
    expired = [e for e in job_events(events) if e["op"] == "expired"]
    assert sorted(e["name"] for e in expired) == ["gone", "old"]  # each recorded once


def test_a_job_registered_again_after_expiry_is_live(
    with_policy: TestClient, jobs: JobStore, events: EventStore
) -> None:
    jobs.put("train-1", {"class": "training", "endpoints": [], "ttl": 1.0}, 1, now=1000.0)
    assert with_policy.post("/v1/jobs", json=JOB).status_code == 201
    assert [j["name"] for j in with_policy.get("/v1/jobs").json()["jobs"]] == ["train-1"]
    assert [e["op"] for e in job_events(events)] == ["expired", "registered"]


def test_registering_publishes_on_the_jobs_channel(
    with_policy: TestClient, redis_client: redis.Redis, jobs: JobStore
) -> None:
    pubsub = redis_client.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(jobs.channel)
    pubsub.get_message(timeout=1)
    with_policy.post("/v1/jobs", json=JOB)
    with_policy.delete("/v1/jobs/train-1")
    received = [pubsub.get_message(timeout=1) for _ in range(2)]
    pubsub.close()
    assert [m["data"] for m in received if m] == ['{"job": "train-1"}'] * 2


# --------------------------------------------------------------------------------------------
# Redis down: every new route (jobs, flows, events) answers 503, and recovers
# --------------------------------------------------------------------------------------------

DOWN_ROUTES: list[tuple[str, str, dict[str, Any]]] = [
    ("POST", "/v1/jobs", {"json": JOB}),
    ("GET", "/v1/jobs", {}),
    ("GET", "/v1/jobs/train-1", {}),
    ("DELETE", "/v1/jobs/train-1", {}),
    ("GET", "/v1/flows", {}),
    ("GET", "/v1/flows?switch=2a&class=training&min_bytes=1&limit=5", {}),
    ("GET", "/v1/events", {}),
    ("GET", "/v1/events?since=1-0&kind=job", {}),
]


@pytest.mark.parametrize(("method", "path", "options"), DOWN_ROUTES)
def test_every_new_route_is_503_while_redis_is_down(
    down_client: TestClient, method: str, path: str, options: dict[str, Any]
) -> None:
    response = down_client.request(method, path, **options)
    assert response.status_code == 503
    assert response.json()["detail"].startswith("Redis unavailable: ")


def test_jobs_recover_when_redis_comes_up(
    down_client: TestClient, unused_port: int, start_redis: Any, document: dict[str, Any]
) -> None:
    assert down_client.get("/v1/jobs").status_code == 503
    down_client.headers.update(bearer(connect(start_redis(unused_port).url)))
    assert down_client.put("/v1/policy", json=document).status_code == 201
    assert down_client.post("/v1/jobs", json=JOB).status_code == 201
    assert [j["name"] for j in down_client.get("/v1/jobs").json()["jobs"]] == ["train-1"]


# --------------------------------------------------------------------------------------------
# OpenAPI
# --------------------------------------------------------------------------------------------


@pytest.fixture
def job_schema(client: TestClient) -> dict[str, Any]:
    operation = client.get("/openapi.json").json()["paths"]["/v1/jobs"]["post"]
    body = operation["requestBody"]
    assert body["required"] is True
    schema: dict[str, Any] = body["content"]["application/json"]["schema"]
    return schema


def test_the_job_body_is_documented_inline(job_schema: dict[str, Any]) -> None:
    assert "$ref" not in json.dumps(job_schema)  # nothing to dangle
    assert job_schema["required"] == ["name", "class", "endpoints"]
    endpoint = job_schema["properties"]["endpoints"]["items"]
    assert endpoint["required"] == ["ipv4"]
    assert endpoint["additionalProperties"] is False


@pytest.mark.parametrize(
    "job",
    [
        JOB,
        {**JOB, "ttl": 90},
        {**JOB, "ttl": "1.5s"},
        {**JOB, "endpoints": [{"ipv4": "10.0.0.0/255.255.255.0", "ports": "8000-8010"}]},
        {**JOB, "endpoints": [{"ipv4": "10.0.0.5", "ports": [22, "8000-8010"]}]},
        {**JOB, "endpoints": [{"ipv4": "10.0.0.5", "ports": None}]},
    ],
)
def test_accepted_jobs_conform_to_the_documented_schema(
    job_schema: dict[str, Any], with_policy: TestClient, job: dict[str, Any]
) -> None:
    """The schema must not be stricter than what the API accepts."""
    assert with_policy.post("/v1/jobs", json=job).status_code == 201
    assert jsonschema_rs.Draft202012Validator(job_schema).is_valid(job)


def test_job_statuses_are_documented(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert sorted(paths["/v1/jobs"]["post"]["responses"]) == [
        "201",
        "401",
        "403",
        "409",
        "422",
        "429",
        "503",
    ]
    assert sorted(paths["/v1/jobs"]["get"]["responses"]) == ["200", "401", "403", "503"]
    assert sorted(paths["/v1/jobs/{name}"]["get"]["responses"]) == [
        "200",
        "401",
        "403",
        "404",
        "422",
        "503",
    ]
    assert sorted(paths["/v1/jobs/{name}"]["delete"]["responses"]) == [
        "204",
        "401",
        "403",
        "404",
        "422",
        "503",
    ]
    for path in ("/v1/flows", "/v1/events"):
        assert sorted(paths[path]["get"]["responses"]) == ["200", "401", "403", "422", "503"]
