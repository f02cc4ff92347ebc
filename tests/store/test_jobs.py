"""JobStore against a real Redis: records, expiry by an injected clock, purge, and the channel."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from controller.store.client import connect
from controller.store.errors import StoreUnavailableError
from controller.store.jobs import JobOwnedError, JobRecord, JobStore

DOCUMENT: dict[str, Any] = {
    "class": "training",
    "endpoints": [{"ipv4": "10.0.0.0/24", "ports": ["4791"]}],
    "ttl": 60.0,
}


@pytest.fixture
def store(redis_client: redis.Redis) -> JobStore:
    return JobStore(redis_client)


@pytest.fixture
def messages(redis_client: redis.Redis, store: JobStore) -> Iterator[Any]:
    """A subscriber of the jobs channel; call it to get what was published so far."""
    pubsub = redis_client.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(store.channel)
    pubsub.get_message(timeout=1)  # the subscribe confirmation

    def received() -> list[dict[str, Any]]:
        found = []
        while (message := pubsub.get_message(timeout=0.2)) is not None:
            found.append(json.loads(message["data"]))
        return found

    yield received
    pubsub.close()


def test_put_returns_and_stores_the_record(store: JobStore) -> None:
    record = store.put("train-1", DOCUMENT, 60, now=1000.0)
    assert record == JobRecord("train-1", DOCUMENT, 1000.0, 1060.0)
    assert store.all(now=1000.0) == [record]
    assert store.get("train-1", now=1059.9) == record
    assert record.to_dict() == {
        **DOCUMENT,
        "name": "train-1",
        "tenant": None,
        "created_at": 1000.0,
        "expires_at": 1060.0,
    }


def test_a_tenant_cannot_take_over_another_tenants_live_job(store: JobStore) -> None:
    store.put("train-1", DOCUMENT, 60, now=1000.0, tenant="blue")
    with pytest.raises(JobOwnedError, match="belongs to another tenant"):
        store.put("train-1", {**DOCUMENT, "ttl": 5.0}, 5, now=1001.0, tenant="red")
    assert store.get("train-1", now=1001.0) == JobRecord(
        "train-1", DOCUMENT, 1000.0, 1060.0, "blue"
    )
    # Its own tenant renews it; once expired, the name is free for anyone.
    assert store.put("train-1", DOCUMENT, 60, now=1002.0, tenant="blue").tenant == "blue"
    assert store.put("train-1", DOCUMENT, 60, now=2000.0, tenant="red").tenant == "red"


def test_a_tenant_cannot_take_over_an_unscoped_job_but_an_unscoped_caller_can(
    store: JobStore,
) -> None:
    store.put("train-1", DOCUMENT, 60, now=1000.0)
    with pytest.raises(JobOwnedError):
        store.put("train-1", DOCUMENT, 60, now=1001.0, tenant="red")
    assert store.put("train-1", DOCUMENT, 60, now=1001.0).tenant is None


def test_a_tenant_deletes_only_its_own_jobs(store: JobStore) -> None:
    store.put("blue-job", DOCUMENT, 60, tenant="blue")
    store.put("open-job", DOCUMENT, 60)
    assert not store.delete("blue-job", tenant="red")
    assert not store.delete("open-job", tenant="red")
    assert [job.name for job in store.all()] == ["blue-job", "open-job"]
    assert store.delete("blue-job", tenant="blue")
    assert store.delete("open-job")  # an unscoped caller deletes any
    assert store.all() == []


def test_jobs_are_listed_by_name(store: JobStore) -> None:
    for name in ("b", "c", "a"):
        store.put(name, DOCUMENT, 60, now=1000.0)
    assert [job.name for job in store.all(now=1000.0)] == ["a", "b", "c"]


def test_an_expired_job_is_invisible_before_any_purge(store: JobStore) -> None:
    store.put("short", DOCUMENT, 10, now=1000.0)
    store.put("long", DOCUMENT, 100, now=1000.0)
    assert [job.name for job in store.all(now=1009.9)] == ["long", "short"]
    assert [job.name for job in store.all(now=1010.0)] == ["long"]  # expiry is exclusive
    assert store.get("short", now=1010.0) is None
    assert store.get("long", now=1010.0) is not None
    assert store.all(now=2000.0) == []


def test_a_second_put_replaces_the_job_and_restarts_its_ttl(store: JobStore) -> None:
    store.put("train-1", DOCUMENT, 10, now=1000.0)
    changed = {**DOCUMENT, "class": "inference"}
    store.put("train-1", changed, 10, now=1008.0)
    [job] = store.all(now=1015.0)
    assert (job.document, job.created_at, job.expires_at) == (changed, 1008.0, 1018.0)


def test_purge_deletes_expired_jobs_only_and_names_them(store: JobStore) -> None:
    store.put("a", DOCUMENT, 10, now=1000.0)
    store.put("b", DOCUMENT, 30, now=1000.0)
    store.put("c", DOCUMENT, 5, now=1000.0)
    assert sorted(store.purge(now=1020.0)) == ["a", "c"]
    assert store.purge(now=1020.0) == []
    # Gone from the hash, not merely filtered: even an earlier clock does not see them.
    assert [job.name for job in store.all(now=0.0)] == ["b"]


def test_delete_says_whether_there_was_a_job(store: JobStore) -> None:
    store.put("a", DOCUMENT, 60)
    assert store.delete("a") is True
    assert store.delete("a") is False
    assert store.all() == []


def test_every_change_is_published_on_the_channel(store: JobStore, messages: Any) -> None:
    store.put("a", DOCUMENT, 60)
    store.put("b", DOCUMENT, 1, now=1000.0)
    store.delete("a")
    assert messages() == [{"job": "a"}, {"job": "b"}, {"job": "a"}]
    store.purge()  # b expired long ago
    assert messages() == [{"job": "b"}]


def test_prefixes_keep_stores_apart(redis_client: redis.Redis) -> None:
    JobStore(redis_client, "one").put("a", DOCUMENT, 60)
    assert JobStore(redis_client, "two").all() == []
    assert JobStore(redis_client, "two").channel == "two:jobs:events"


def test_unreachable_redis_is_store_unavailable(unused_port: int) -> None:
    client = connect(f"redis://127.0.0.1:{unused_port}/0")
    store = JobStore(client)
    calls = [
        lambda: store.put("a", DOCUMENT, 60),
        store.all,
        lambda: store.get("a"),
        lambda: store.delete("a"),
        store.purge,
    ]
    for call in calls:
        with pytest.raises(StoreUnavailableError, match=r"^Redis unavailable: "):
            call()
    client.close()


def test_a_weight_round_trips_through_the_record(store: JobStore) -> None:
    """The API stores the normalized document, weight included; readers get it back as written
    (a record from before weights has none, and ``JobOut``/``JobSpec`` read that as 1)."""
    store.put("train-1", {**DOCUMENT, "weight": 3}, 60, now=1000.0)
    [record] = store.all(now=1000.0)
    assert record.document["weight"] == 3
    assert record.to_dict()["weight"] == 3
    assert "weight" not in store.put("old-1", DOCUMENT, 60, now=1000.0).to_dict()
