"""GET /v1/events: oldest first, resumable with ``since``, filtered by kind; policy writes log."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from controller.api.routes.events import LAST_ID, SCAN_BATCH, collect
from controller.store.events import Event, EventStore
from tests.api.conftest import bearer

MAX = 2**64 - 1


@pytest.fixture
def events(redis_client: redis.Redis) -> EventStore:
    return EventStore(redis_client)


def test_no_events(client: TestClient) -> None:
    assert client.get("/v1/events").json() == {"events": [], "last_id": None}
    assert client.get("/v1/events?since=5-1").json() == {"events": [], "last_id": "5-1"}


def test_events_oldest_first_with_their_data(client: TestClient, events: EventStore) -> None:
    first = events.append("job", {"name": "t", "op": "registered"}, now=1000.0)
    second = events.append("reclassified", {"switch": "000000000000000a", "to": "training"})
    body = client.get("/v1/events").json()
    assert body["last_id"] == second
    assert body["events"][0] == {
        "id": first,
        "kind": "job",
        "time": 1000.0,
        "name": "t",
        "op": "registered",
    }
    assert [e["kind"] for e in body["events"]] == ["job", "reclassified"]


def test_since_resumes_after_an_id(client: TestClient, events: EventStore) -> None:
    ids = [events.append("job", {"n": n}) for n in range(5)]
    body = client.get("/v1/events", params={"since": ids[1]}).json()
    assert [e["id"] for e in body["events"]] == ids[2:]
    assert body["last_id"] == ids[-1]
    caught_up = client.get("/v1/events", params={"since": body["last_id"]}).json()
    assert caught_up == {"events": [], "last_id": ids[-1]}


def test_limit_pages(client: TestClient, events: EventStore) -> None:
    ids = [events.append("job", {"n": n}) for n in range(5)]
    page = client.get("/v1/events", params={"limit": 2}).json()
    assert ([e["id"] for e in page["events"]], page["last_id"]) == (ids[:2], ids[1])
    page = client.get("/v1/events", params={"limit": 2, "since": page["last_id"]}).json()
    assert [e["id"] for e in page["events"]] == ids[2:4]


def test_kind_filters_and_last_id_moves_past_what_it_skipped(
    client: TestClient, events: EventStore
) -> None:
    job = events.append("job", {"n": 0})
    events.append("reclassified", {"n": 1})
    skipped = events.append("reclassified", {"n": 2})
    body = client.get("/v1/events", params={"kind": "job"}).json()
    assert ([e["id"] for e in body["events"]], body["last_id"]) == ([job], skipped)
    assert client.get("/v1/events", params={"kind": "policy"}).json() == {
        "events": [],
        "last_id": skipped,
    }


def test_a_rare_kind_is_found_past_a_full_batch(client: TestClient, events: EventStore) -> None:
    for n in range(SCAN_BATCH + 50):
        events.append("reclassified", {"n": n})
    job = events.append("job", {"name": "t"})
    after = events.append("reclassified", {"n": -1})
    body = client.get("/v1/events", params={"kind": "job", "limit": 1}).json()
    assert [e["id"] for e in body["events"]] == [job]
    assert body["last_id"] == job  # stopped at the limit: what follows is read next time
    rest = client.get("/v1/events", params={"kind": "job", "since": job}).json()
    assert rest == {"events": [], "last_id": after}


def test_data_cannot_shadow_id_kind_or_time(client: TestClient, events: EventStore) -> None:
    event_id = events.append("job", {"id": "x", "kind": "y", "time": "z", "n": 1}, now=5.0)
    [event] = client.get("/v1/events").json()["events"]
    assert event == {"id": event_id, "kind": "job", "time": 5.0, "n": 1}


@pytest.mark.parametrize(
    ("query", "path"),
    [
        ({"since": "abc"}, "query.since"),
        ({"since": "1700000000000"}, "query.since"),
        ({"since": "1-2-3"}, "query.since"),
        ({"since": "\u0661-0"}, "query.since"),  # an Arabic-Indic one: a digit, not [0-9]
        ({"since": f"{MAX + 1}-0"}, "query.since"),
        ({"since": f"0-{MAX + 1}"}, "query.since"),
        ({"since": "123456789012345678901-0"}, "query.since"),
        ({"limit": 0}, "query.limit"),
        ({"limit": 1001}, "query.limit"),
        ({"kind": ""}, "query.kind"),
    ],
)
def test_bad_queries_are_422_with_their_path(
    client: TestClient, query: dict[str, Any], path: str
) -> None:
    response = client.get("/v1/events", params=query)
    assert response.status_code == 422
    body = response.json()
    assert body["detail"] == "invalid request: 1 error(s)"
    assert [e["path"] for e in body["errors"]] == [path]


def test_the_largest_id_is_answered_without_asking_redis(
    client: TestClient, events: EventStore
) -> None:
    """Redis refuses it as an exclusive start; nothing can follow it anyway."""
    events.append("job", {})
    assert client.get("/v1/events", params={"since": LAST_ID}).json() == {
        "events": [],
        "last_id": LAST_ID,
    }
    leading_zeros = client.get("/v1/events", params={"since": "0001-0"}).json()
    assert leading_zeros["last_id"] != "0001-0"
    assert len(leading_zeros["events"]) == 1


def test_policy_writes_and_rollbacks_are_events(
    client: TestClient, document: dict[str, Any], redis_client: redis.Redis
) -> None:
    """Each version's author is the name of the token that wrote it."""
    ann, bob, cy = (bearer(redis_client, name=name) for name in ("ann", "bob", "cy"))
    client.put("/v1/policy", params={"comment": "first"}, json=document, headers=ann)
    document["default_class"] = "training"
    client.put("/v1/policy", json=document, headers=bob)
    client.post("/v1/policy/rollback", json={"version": 1}, headers=cy)
    document["classes"] = {}
    assert client.put("/v1/policy", json=document).status_code == 422  # stores nothing
    body = client.get("/v1/events", params={"kind": "policy"}).json()
    assert [{k: v for k, v in e.items() if k not in ("id", "time")} for e in body["events"]] == [
        {"kind": "policy", "version": 1, "author": "ann", "comment": "first", "rollback_of": None},
        {"kind": "policy", "version": 2, "author": "bob", "comment": "", "rollback_of": None},
        {
            "kind": "policy",
            "version": 3,
            "author": "cy",
            "comment": "rollback to version 1",
            "rollback_of": 1,
        },
    ]


# --------------------------------------------------------------------------------------------
# collect, the paging logic alone
# --------------------------------------------------------------------------------------------


def stream(kinds: str) -> list[Event]:
    return [Event(f"1-{n}", kind, 0.0, {}) for n, kind in enumerate(kinds)]


def reader(events: list[Event], calls: list[tuple[str | None, int]]) -> Any:
    def read(since: str | None, count: int) -> list[Event]:
        calls.append((since, count))
        start = 0 if since is None else int(since.split("-")[1]) + 1
        return events[start : start + count]

    return read


def test_collect_without_a_filter_reads_once() -> None:
    calls: list[tuple[str | None, int]] = []
    found, last = collect(reader(stream("abab"), calls), None, 3)
    assert ([e.id for e in found], last) == (["1-0", "1-1", "1-2"], "1-2")
    assert calls == [(None, 3)]


def test_collect_with_a_filter_reads_in_batches_until_the_end() -> None:
    calls: list[tuple[str | None, int]] = []
    events = stream("a" * (SCAN_BATCH * 2) + "b")
    found, last = collect(reader(events, calls), None, 5, "b")
    assert [e.kind for e in found] == ["b"]
    assert last == events[-1].id
    assert calls == [
        (None, SCAN_BATCH),
        (events[SCAN_BATCH - 1].id, SCAN_BATCH),
        (events[-2].id, SCAN_BATCH),
    ]


def test_collect_after_the_last_possible_id_reads_nothing() -> None:
    calls: list[tuple[str | None, int]] = []
    assert collect(reader(stream("a"), calls), LAST_ID, 5) == ([], LAST_ID)
    assert calls == []
