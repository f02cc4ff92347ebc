"""EventStore on a real Redis: order, ``since`` exclusivity, limits, the cap, blocking reads,
and the policy entries ``PolicyStore`` writes from its script."""

from __future__ import annotations

import threading

import pytest
import redis

from controller.store.client import connect
from controller.store.errors import StoreUnavailableError
from controller.store.events import Event, EventStore
from controller.store.policies import PolicyStore


@pytest.fixture
def store(redis_client: redis.Redis) -> EventStore:
    return EventStore(redis_client)


def test_events_read_back_oldest_first(store: EventStore) -> None:
    first = store.append("policy", {"version": 1, "author": "a"}, now=1000.5)
    second = store.append("job", {"name": "t", "op": "registered"}, now=1001.0)
    assert store.read() == [
        Event(first, "policy", 1000.5, {"version": 1, "author": "a"}),
        Event(second, "job", 1001.0, {"name": "t", "op": "registered"}),
    ]
    assert store.read()[0].to_dict() == {
        "id": first,
        "kind": "policy",
        "time": 1000.5,
        "version": 1,
        "author": "a",
    }


def test_since_is_exclusive(store: EventStore) -> None:
    ids = [store.append("job", {"n": n}) for n in range(5)]
    assert [e.id for e in store.read(since=ids[1])] == ids[2:]
    assert store.read(since=ids[-1]) == []
    assert [e.id for e in store.read(since="0-0")] == ids


def test_limit_pages_through_the_stream(store: EventStore) -> None:
    ids = [store.append("job", {"n": n}) for n in range(7)]
    pages, since = [], None
    while page := store.read(since=since, limit=3):
        pages.append([e.id for e in page])
        since = page[-1].id
    assert pages == [ids[0:3], ids[3:6], ids[6:7]]


def test_an_empty_or_missing_stream_reads_as_nothing(store: EventStore) -> None:
    assert store.read() == []
    assert store.read(since="1-0") == []


def test_the_stream_is_capped(redis_client: redis.Redis) -> None:
    """The cap is approximate (whole stream nodes are trimmed), but it holds, oldest first."""
    store = EventStore(redis_client, max_len=200)
    ids = [store.append("job", {"n": n}) for n in range(1000)]
    kept = [e.id for e in store.read(limit=10_000)]
    assert 200 <= len(kept) < 400
    assert kept == ids[-len(kept) :]


def test_a_blocking_read_waits_for_the_next_event(store: EventStore) -> None:
    last = store.append("job", {"n": 0})
    assert store.read(since=last, block_ms=50) == []
    timer = threading.Timer(0.1, lambda: store.append("job", {"n": 1}))
    timer.start()
    try:
        [event] = store.read(since=last, block_ms=5000)
    finally:
        timer.join()
    assert event.data == {"n": 1}


def test_prefixes_keep_streams_apart(redis_client: redis.Redis) -> None:
    EventStore(redis_client, "one").append("job", {})
    assert EventStore(redis_client, "two").read() == []


def test_unreachable_redis_is_store_unavailable(unused_port: int) -> None:
    client = connect(f"redis://127.0.0.1:{unused_port}/0")
    store = EventStore(client)
    with pytest.raises(StoreUnavailableError, match=r"^Redis unavailable: "):
        store.append("job", {})
    with pytest.raises(StoreUnavailableError, match=r"^Redis unavailable: "):
        store.read()
    client.close()


def test_a_blocking_reader_wakes_for_a_policy_version(
    store: EventStore, redis_client: redis.Redis
) -> None:
    """``PolicyStore`` writes its event from a Lua script; a follower still wakes for it."""
    last = store.append("job", {"n": 0})
    policies = PolicyStore(redis_client, events=store)
    timer = threading.Timer(0.1, lambda: policies.put({"classes": {}}, author="a"))
    timer.start()
    try:
        [event] = store.read(since=last, block_ms=5000)
    finally:
        timer.join()
    assert (event.kind, event.data["version"], event.data["author"]) == ("policy", 1, "a")


def test_the_stream_key_follows_the_prefix(redis_client: redis.Redis) -> None:
    assert EventStore(redis_client, "blue").stream == "blue:events"
    PolicyStore(redis_client, "blue").put({"classes": {}}, author="a")
    assert [e.kind for e in EventStore(redis_client, "blue").read()] == ["policy"]
    assert EventStore(redis_client).read() == []
