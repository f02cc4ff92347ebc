"""Writes wait for replicas only when the URL asks, and a write too few replicas confirmed is
never acknowledged: the store raises (the API's 503: tests/api/test_not_replicated.py)."""

from __future__ import annotations

import time

import pytest
import redis

from controller.auth.model import Role
from controller.store.client import StoreClient, connect, durability_of, translate_errors
from controller.store.errors import NotReplicatedError, StoreUnavailableError
from controller.store.jobs import JobStore, jobs_fingerprint
from controller.store.policies import PolicyStore
from controller.store.retry import DeadlineRetry
from controller.store.tokens import TokenStore
from controller.store.url import StoreUrlError
from tests.api.conftest import DOCUMENT


def test_the_client_carries_the_urls_durability(redis_url: str) -> None:
    client = connect(f"{redis_url}?min_replicas=2&wait_ms=40")
    assert isinstance(client, StoreClient)
    assert (durability_of(client).min_replicas, durability_of(client).wait_ms) == (2, 40)
    assert not durability_of(redis.Redis()).waits
    with pytest.raises(StoreUrlError):
        connect("redis+sentinel://h")


def test_without_replicas_asked_a_write_is_acknowledged_by_the_primary(
    redis_client: redis.Redis, redis_url: str
) -> None:
    store = PolicyStore(connect(redis_url))
    assert store.put(DOCUMENT, author="t").version == 1


def test_a_write_no_replica_confirmed_raises_and_says_it_may_be_on_the_primary_only(
    redis_client: redis.Redis, redis_url: str
) -> None:
    client = connect(f"{redis_url}?min_replicas=1&wait_ms=20")
    with pytest.raises(NotReplicatedError) as refused:
        PolicyStore(client).put(DOCUMENT, author="t")
    assert isinstance(refused.value, StoreUnavailableError)
    assert (refused.value.replicas, refused.value.required) == (0, 1)
    assert "may exist on the primary only" in str(refused.value)
    # The primary did take it: that is why the API must not call it lost either.
    assert PolicyStore(redis_client).active_version() == 1
    for write in (
        lambda: TokenStore(client).create("t", Role.admin),
        lambda: TokenStore(client).revoke("t"),
        lambda: JobStore(client).put("j", {"class": "training"}, 60),
        lambda: JobStore(client).put("k", {"class": "training"}, 60, admit=lambda live: None),
        lambda: JobStore(client).delete("j"),
        lambda: PolicyStore(client).reserve_through(5),
    ):
        with pytest.raises(NotReplicatedError):
            write()


def test_a_checked_job_put_judges_again_when_the_jobs_changed(
    redis_client: redis.Redis, redis_url: str
) -> None:
    store = JobStore(connect(redis_url))
    seen: list[list[str]] = []

    def admit(live: list[object]) -> None:
        seen.append(sorted(job.name for job in live))  # type: ignore[attr-defined]
        if len(seen) == 1:  # someone registers a job between this read and the write
            JobStore(redis_client).put("other", {"class": "training"}, 60)

    store.put("mine", {"class": "training"}, 60, admit=admit)
    assert seen == [[], ["other"]]
    assert {job.name for job in store.all()} == {"mine", "other"}


def test_the_jobs_fingerprint_is_the_scripts(redis_client: redis.Redis) -> None:
    # Non-ASCII names too: Lua counts bytes, and the digests are sorted, not the names.
    for name in ("a", "zé", "日本"):
        redis_client.hset("flowlane:jobs", name, '{"x": 1}')
    raw = redis_client.hgetall("flowlane:jobs")
    script = redis_client.register_script(
        "local all = redis.call('HGETALL', KEYS[1]) local d = {}"
        " for i = 1, #all, 2 do d[#d + 1] = redis.sha1hex(#all[i] .. ':' .. all[i] .. all[i + 1])"
        " end table.sort(d) return redis.sha1hex(table.concat(d))"
    )
    assert script(keys=["flowlane:jobs"]) == jobs_fingerprint(raw)


def test_the_retry_gives_up_after_its_window_however_deep_the_nesting(unused_port: int) -> None:
    # Nothing listens: every connect is refused, at both levels redis-py retries at.
    client = connect(f"redis://127.0.0.1:{unused_port}/0?retry_s=0.6")
    assert client.get_retry() == DeadlineRetry(0.6)
    with pytest.raises(StoreUnavailableError):
        _timed_ping(client, within_s=3.0)


def _timed_ping(client: redis.Redis, within_s: float) -> None:
    start = time.monotonic()
    try:
        translate_errors(client.ping)()
    finally:
        assert time.monotonic() - start < within_s
