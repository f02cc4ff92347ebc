"""PolicyStore against a real Redis: versions, compare-and-set, unchanged writes, history
and its trimming, rollback, and the events written by the same script."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
import redis

from controller.store.errors import UnknownVersionError, VersionConflictError
from controller.store.events import EventStore
from controller.store.policies import ANY_VERSION, PolicyStore, document_digest

DOCUMENT: dict[str, Any] = {
    "classes": {"inference": {"priority": 0, "dscp": 46, "min_rate": "20%"}},
    "default_class": "inference",
    "rules": [{"name": "triton", "match": {"tcp_dst": [8000, 8001]}, "class": "inference"}],
}


def document(n: int) -> dict[str, Any]:
    """A distinct document per ``n``, to tell versions apart."""
    return {**DOCUMENT, "rules": [{**DOCUMENT["rules"][0], "name": f"rule{n}"}]}


@pytest.fixture
def store(redis_client: redis.Redis) -> PolicyStore:
    return PolicyStore(redis_client)


def snapshot(client: redis.Redis) -> dict[str, Any]:
    """Every key the store owns, to prove a refused write changed nothing."""
    return {
        "seq": client.get("flowlane:policy:seq"),
        "active": client.get("flowlane:policy:active"),
        "digest": client.get("flowlane:policy:active-digest"),
        "trimmed": client.get("flowlane:policy:trimmed"),
        "versions": client.hgetall("flowlane:policy:versions"),
        "events": (
            client.xrange("flowlane:events")
            if client.type("flowlane:events") == "stream"
            else client.get("flowlane:events")
        ),
    }


def policy_events(client: redis.Redis) -> list[dict[str, Any]]:
    """The data of every ``policy`` entry on the events stream, oldest first."""
    return [e.data for e in EventStore(client).read(limit=10_000) if e.kind == "policy"]


def test_empty_store_has_no_policy(store: PolicyStore) -> None:
    assert store.active_version() is None
    assert store.active() is None
    assert store.get(1) is None
    assert store.history() == []


def test_versions_are_monotonic_and_the_newest_is_active(store: PolicyStore) -> None:
    versions = [store.put(document(n), author="alice").version for n in range(5)]
    assert versions == [1, 2, 3, 4, 5]
    assert store.active_version() == 5
    active = store.active()
    assert active is not None
    assert active.document == document(4)
    assert active.author == "alice"
    assert active.rollback_of is None


def test_put_returns_what_was_stored(store: PolicyStore) -> None:
    stored = store.put(document(1), author="bob", comment="first")
    assert stored == store.get(1)
    assert stored.to_dict()["comment"] == "first"
    assert stored.created_at > 0


def test_expected_none_means_no_policy_yet(store: PolicyStore) -> None:
    assert store.put(document(1), author="a", expected_version=None).version == 1
    with pytest.raises(VersionConflictError) as caught:
        store.put(document(2), author="a", expected_version=None)
    assert caught.value.expected is None
    assert caught.value.active == 1


def test_expected_version_compare_and_set(store: PolicyStore) -> None:
    store.put(document(1), author="a")
    assert store.put(document(2), author="a", expected_version=1).version == 2
    with pytest.raises(VersionConflictError) as caught:
        store.put(document(3), author="a", expected_version=1)
    assert (caught.value.expected, caught.value.active) == (1, 2)
    assert store.put(document(3), author="a", expected_version=ANY_VERSION).version == 3


def test_expected_version_on_an_empty_store_conflicts(store: PolicyStore) -> None:
    with pytest.raises(VersionConflictError) as caught:
        store.put(document(1), author="a", expected_version=4)
    assert (caught.value.expected, caught.value.active) == (4, None)
    assert store.active_version() is None


def test_conflict_leaves_nothing_behind(store: PolicyStore, redis_client: redis.Redis) -> None:
    store.put(document(1), author="a")
    store.put(document(2), author="a")
    before = snapshot(redis_client)
    for expected in (None, 1, 3, 99):
        with pytest.raises(VersionConflictError):
            store.put(document(9), author="mallory", expected_version=expected)
    assert snapshot(redis_client) == before
    assert [v.version for v in store.history()] == [2, 1]


def race(store: PolicyStore, expected: int | None, writers: int = 2) -> list[int | str]:
    """Start ``writers`` puts at the same instant, all based on ``expected``; collect outcomes.

    Each writer sends a document no earlier round sent, so none is ``unchanged``.
    """
    first = (0 if expected is None else expected) * writers
    barrier = threading.Barrier(writers)
    outcomes: list[int | str] = []
    lock = threading.Lock()

    def write(writer: int) -> None:
        barrier.wait()
        try:
            result: int | str = store.put(
                document(first + writer), author=f"w{writer}", expected_version=expected
            ).version
        except VersionConflictError:
            result = "conflict"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    return sorted(outcomes, key=str)


def test_racing_writers_with_the_same_expected_version_one_wins(
    store: PolicyStore, redis_client: redis.Redis
) -> None:
    store.put(document(0), author="setup")
    for round_number in range(1, 51):
        outcomes = race(store, expected=round_number)
        assert outcomes == [round_number + 1, "conflict"], (round_number, outcomes)
    assert store.active_version() == 51
    assert int(redis_client.get("flowlane:policy:seq") or 0) == 51
    assert len(store.history(limit=500)) == 51


def test_racing_creators_of_the_first_version_one_wins(redis_client: redis.Redis) -> None:
    for round_number in range(20):
        redis_client.flushdb()
        outcomes = race(PolicyStore(redis_client), expected=None, writers=3)
        assert outcomes == [1, "conflict", "conflict"], (round_number, outcomes)


def test_empty_rules_list_survives_the_round_trip(store: PolicyStore) -> None:
    doc = {**DOCUMENT, "rules": [], "ports": {"overrides": {}}}
    stored = store.put(doc, author="a")
    again = store.get(stored.version)
    assert again is not None
    assert again.document == doc
    assert again.document["rules"] == []
    assert isinstance(again.document["rules"], list)
    assert again.document["ports"]["overrides"] == {}


def test_unicode_and_nested_values_round_trip(store: PolicyStore) -> None:
    doc = {**DOCUMENT, "comment-free": {"ünï": [1, 2.5, None, True, "🚀"]}}
    stored = store.put(doc, author="zoë", comment="naïve ✓")
    again = store.get(stored.version)
    assert again is not None
    assert (again.document, again.author, again.comment) == (doc, "zoë", "naïve ✓")


def test_history_is_newest_first_and_limited(store: PolicyStore) -> None:
    for n in range(7):
        store.put(document(n), author=f"a{n}")
    assert [v.version for v in store.history()] == [7, 6, 5, 4, 3, 2, 1]
    assert [v.version for v in store.history(limit=3)] == [7, 6, 5]
    assert [v.version for v in store.history(limit=1)] == [7]
    assert [v.version for v in store.history(limit=100)] == [7, 6, 5, 4, 3, 2, 1]
    assert store.history(limit=3)[0].author == "a6"


def test_history_with_limit_zero_is_empty(store: PolicyStore) -> None:
    store.put(document(1), author="a")
    assert store.history(limit=0) == []


def test_rollback_creates_a_new_version_with_the_old_document(store: PolicyStore) -> None:
    for n in range(3):
        store.put(document(n), author="a")
    rolled = store.rollback(1, author="ops").policy
    assert rolled.version == 4
    assert rolled.rollback_of == 1
    assert rolled.document == document(0)
    assert rolled.author == "ops"
    assert rolled.comment == "rollback to version 1"
    assert store.active_version() == 4
    assert [v.version for v in store.history()] == [4, 3, 2, 1]
    assert store.rollback(2, author="ops", comment="why").policy.comment == "why"


def test_rollback_respects_the_expected_version(store: PolicyStore) -> None:
    store.put(document(1), author="a")
    store.put(document(2), author="a")
    with pytest.raises(VersionConflictError):
        store.rollback(1, author="ops", expected_version=1)
    assert store.rollback(1, author="ops", expected_version=2).policy.version == 3


@pytest.mark.parametrize("version", [0, -1, 5])
def test_rollback_to_an_unknown_version(store: PolicyStore, version: int) -> None:
    store.put(document(1), author="a")
    with pytest.raises(UnknownVersionError) as caught:
        store.rollback(version, author="ops")
    assert caught.value.version == version
    assert store.active_version() == 1


def test_every_put_is_announced_on_the_channel(
    store: PolicyStore, redis_client: redis.Redis
) -> None:
    pubsub = redis_client.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(store.channel)
    try:
        assert pubsub.get_message(timeout=5) is None  # the subscription confirmation is skipped
        store.put(document(1), author="a")
        store.put(document(2), author="a")
        store.rollback(1, author="a")
        with pytest.raises(VersionConflictError):
            store.put(document(3), author="a", expected_version=1)
        received = []
        while (message := pubsub.get_message(timeout=1)) is not None:
            received.append(message)
    finally:
        pubsub.close()
    assert [m["channel"] for m in received] == [store.channel] * 3
    assert [json.loads(m["data"]) for m in received] == [
        {"version": 1},
        {"version": 2},
        {"version": 3},
    ]


def test_prefixes_keep_stores_apart(redis_client: redis.Redis) -> None:
    blue, green = PolicyStore(redis_client, "blue"), PolicyStore(redis_client, "green")
    blue.put(document(1), author="a")
    assert green.active_version() is None
    assert green.channel == "green:policy:events"
    assert redis_client.exists("blue:policy:active") == 1


# ---- unchanged writes ---------------------------------------------------------------------


def test_the_digest_ignores_key_order_and_spacing_but_not_values() -> None:
    reordered = dict(reversed(list(DOCUMENT.items())))
    assert document_digest(reordered) == document_digest(DOCUMENT)
    assert document_digest(json.loads(json.dumps(DOCUMENT, indent=4))) == document_digest(DOCUMENT)
    assert document_digest(document(1)) != document_digest(document(2))
    as_number = {**DOCUMENT, "ports": {"rate": 10_000_000_000}}
    assert document_digest(as_number) != document_digest({**DOCUMENT, "ports": {"rate": "10Gbit"}})
    assert document_digest({"a": [1, 2]}) != document_digest({"a": [2, 1]})


def test_writing_the_active_document_again_stores_nothing(
    store: PolicyStore, redis_client: redis.Redis
) -> None:
    first = store.write(document(1), author="alice", comment="first")
    assert not first.unchanged
    before = snapshot(redis_client)
    again = store.write(
        dict(reversed(list(document(1).items()))), author="bob", comment="same again"
    )
    assert again.unchanged
    assert again.policy == first.policy  # the active version, as alice stored it
    assert snapshot(redis_client) == before
    assert [v.version for v in store.history()] == [1]


def test_only_the_active_document_counts_as_unchanged(store: PolicyStore) -> None:
    store.put(document(1), author="a")
    store.put(document(2), author="a")
    back = store.write(document(1), author="a")
    assert not back.unchanged
    assert back.policy.version == 3
    assert store.write(document(2), author="a").policy.version == 4


def test_an_unchanged_write_is_not_announced(store: PolicyStore, redis_client: redis.Redis) -> None:
    pubsub = redis_client.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(store.channel)
    try:
        assert pubsub.get_message(timeout=5) is None
        store.put(document(1), author="a")
        store.put(document(1), author="a")
        store.rollback(1, author="a")  # the active document too
        store.put(document(2), author="a")
        received = []
        while (message := pubsub.get_message(timeout=1)) is not None:
            received.append(json.loads(message["data"]))
    finally:
        pubsub.close()
    assert received == [{"version": 1}, {"version": 2}]
    assert [e["version"] for e in policy_events(redis_client)] == [1, 2]


def test_the_precondition_is_checked_before_the_document(store: PolicyStore) -> None:
    """A writer based on a stale version is told so, even when it sends the active document."""
    store.put(document(1), author="a")
    store.put(document(2), author="a")
    with pytest.raises(VersionConflictError):
        store.write(document(2), author="a", expected_version=1)
    with pytest.raises(VersionConflictError):
        store.write(document(2), author="a", expected_version=None)
    assert store.write(document(2), author="a", expected_version=2).unchanged


def test_rolling_back_to_the_active_document_is_unchanged(store: PolicyStore) -> None:
    store.put(document(1), author="a")
    store.put(document(2), author="a")
    store.put(document(1), author="a")  # version 3 holds version 1's document
    rolled = store.rollback(1, author="ops")
    assert rolled.unchanged
    assert (rolled.policy.version, rolled.policy.rollback_of) == (3, None)
    assert store.active_version() == 3


# ---- history trimming ---------------------------------------------------------------------


def stored_versions(client: redis.Redis) -> list[int]:
    return sorted(int(v) for v in client.hkeys("flowlane:policy:versions"))


def test_history_keeps_the_newest_versions_up_to_the_limit(redis_client: redis.Redis) -> None:
    store = PolicyStore(redis_client, history_limit=3)
    for n in range(7):
        store.put(document(n), author="a")
        assert stored_versions(redis_client) == list(range(max(n - 1, 1), n + 2))
    assert [v.version for v in store.history(limit=50)] == [7, 6, 5]
    assert store.active_version() == 7
    assert store.get(4) is None
    assert int(redis_client.get("flowlane:policy:seq") or 0) == 7  # numbers are never reused


def test_a_limit_of_one_keeps_only_the_active_version(redis_client: redis.Redis) -> None:
    store = PolicyStore(redis_client, history_limit=1)
    for n in range(4):
        active = store.put(document(n), author="a")
        assert stored_versions(redis_client) == [active.version]
        assert store.active() == active
    assert store.write(document(3), author="a").unchanged  # the digest outlives nothing
    assert stored_versions(redis_client) == [4]


def test_a_lowered_limit_trims_the_surplus_at_the_next_write(redis_client: redis.Redis) -> None:
    roomy = PolicyStore(redis_client, history_limit=100)
    for n in range(10):
        roomy.put(document(n), author="a")
    tight = PolicyStore(redis_client, history_limit=4)
    assert tight.write(document(9), author="a").unchanged  # nothing stored: nothing trimmed
    assert len(stored_versions(redis_client)) == 10
    tight.put(document(10), author="a")
    assert stored_versions(redis_client) == [8, 9, 10, 11]
    roomy.put(document(11), author="a")  # a raised limit keeps what is left, trims nothing
    assert stored_versions(redis_client) == [8, 9, 10, 11, 12]


def test_rollback_to_a_trimmed_version_is_unknown(redis_client: redis.Redis) -> None:
    store = PolicyStore(redis_client, history_limit=2)
    for n in range(4):
        store.put(document(n), author="a")
    with pytest.raises(UnknownVersionError) as caught:
        store.rollback(2, author="ops")
    assert caught.value.version == 2
    assert store.rollback(3, author="ops").policy.version == 5


@pytest.mark.parametrize("limit", [0, -5])
def test_the_history_limit_must_be_positive(redis_client: redis.Redis, limit: int) -> None:
    with pytest.raises(ValueError, match=rf"^history_limit must be at least 1, got {limit}$"):
        PolicyStore(redis_client, history_limit=limit)


# ---- the policy events written with the version ---------------------------------------------


def test_each_stored_version_has_its_event(store: PolicyStore, redis_client: redis.Redis) -> None:
    one = store.put(document(1), author="alice", comment="first ✓")
    store.put(document(2), author="bob")
    store.rollback(1, author="ops")
    events = [e for e in EventStore(redis_client).read() if e.kind == "policy"]
    assert [e.data for e in events] == [
        {"version": 1, "author": "alice", "comment": "first ✓", "rollback_of": None},
        {"version": 2, "author": "bob", "comment": "", "rollback_of": None},
        {"version": 3, "author": "ops", "comment": "rollback to version 1", "rollback_of": 1},
    ]
    assert events[0].time == one.created_at


def test_the_event_entry_is_the_one_event_store_writes(
    store: PolicyStore, redis_client: redis.Redis
) -> None:
    """Field for field and byte for byte, so every reader of the stream sees one format."""
    stored = store.put(document(1), author="zoë", comment='say "hi"')
    EventStore(redis_client).append(
        "policy",
        {"version": 1, "author": "zoë", "comment": 'say "hi"', "rollback_of": None},
        now=stored.created_at,
    )
    [(_, from_script), (_, from_append)] = redis_client.xrange("flowlane:events")
    assert from_script == from_append


def test_a_refused_write_records_no_event(store: PolicyStore, redis_client: redis.Redis) -> None:
    store.put(document(1), author="a")
    with pytest.raises(VersionConflictError):
        store.put(document(2), author="a", expected_version=7)
    with pytest.raises(VersionConflictError):
        store.put(document(2), author="a", expected_version=None)
    assert [e["version"] for e in policy_events(redis_client)] == [1]


def test_the_events_cap_applies_to_policy_events(redis_client: redis.Redis) -> None:
    store = PolicyStore(redis_client, events=EventStore(redis_client, max_len=100))
    for n in range(600):
        store.put(document(n), author="a")
    kept = policy_events(redis_client)
    assert 100 <= len(kept) < 300  # approximate, as EventStore.append trims
    assert kept[-1]["version"] == 600


def test_a_write_whose_event_cannot_be_written_stores_nothing(
    store: PolicyStore, redis_client: redis.Redis
) -> None:
    """The version and its event land together or not at all."""
    store.put(document(1), author="a")
    redis_client.delete("flowlane:events")
    redis_client.set("flowlane:events", "not a stream")
    before = snapshot(redis_client)
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        store.put(document(2), author="a")
    assert snapshot(redis_client) == before
    assert store.active_version() == 1
