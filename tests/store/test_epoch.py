"""The store epoch: ``judge`` on every case, and the epoch, flags and sequence on a real Redis."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis

from controller.store.client import connect
from controller.store.epoch import (
    Enforced,
    Epoch,
    EpochStore,
    Regression,
    RegressionFlag,
    StoreView,
    judge,
)
from controller.store.policies import PolicyStore

DOCUMENT: dict[str, Any] = {
    "classes": {"inference": {"priority": 0, "dscp": 46, "min_rate": "20%"}},
    "default_class": "inference",
    "rules": [],
}
ENFORCED = Enforced(version=5, created_at=1000.0, epoch="e1")

# ---- judge: pure -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("store", "verdict"),
    [
        pytest.param(StoreView("e1", 5, 1000.0), "keep", id="unchanged"),
        pytest.param(StoreView("e1", 6, 2000.0), "adopt", id="newer"),
        pytest.param(StoreView("e2", 6, 2000.0), "adopt", id="newer-in-a-new-epoch"),
        pytest.param(StoreView("e1", None), Regression("gone", 5, None), id="policy-gone"),
        pytest.param(StoreView("e2", None), Regression("gone", 5, None), id="flushed"),
        pytest.param(StoreView("e1", 3, 900.0), Regression("older", 5, 3), id="older-snapshot"),
        pytest.param(StoreView("e1", 5, 1500.0), Regression("rewritten", 5, 5), id="number-reused"),
        pytest.param(StoreView("e2", 1, 3000.0), Regression("new-epoch", 5, 1), id="renumbered"),
        pytest.param(
            StoreView("e2", 5, 1000.0), Regression("new-epoch", 5, 5), id="same-number-new-epoch"
        ),
    ],
)
def test_judge_against_what_is_enforced(store: StoreView, verdict: object) -> None:
    assert judge(ENFORCED, store) == verdict


def test_judge_a_controller_on_its_policy_file_adopts_any_stored_version() -> None:
    assert judge(None, StoreView("e1", 1, 1.0)) == "adopt"
    assert judge(None, StoreView("e1", None)) == "keep"


def test_a_number_that_went_backwards_is_never_adopted() -> None:
    """Whatever the store says, a version at or below the enforced one is never "adopt"."""
    for epoch in ("e1", "e2"):
        for active in (None, 1, 4, 5):
            for created_at in (None, 1000.0, 1.0):
                verdict = judge(ENFORCED, StoreView(epoch, active, created_at))
                if verdict == "adopt":
                    pytest.fail(f"adopted {active} in {epoch} while enforcing 5")


def test_flag_message_says_who_what_and_how_to_recover() -> None:
    gone = RegressionFlag("ctl-a", Regression("gone", 5, None), since=10.0)
    assert gone.message() == (
        "controller ctl-a enforces version 5; the store has no active version: the store lost"
        " data; PUT a policy to recover (it gets a version above 5)"
    )
    older = RegressionFlag("ctl-a", Regression("older", 5, 2), since=10.0)
    assert "enforces version 5; the store's active version is 2: the store lost data" in (
        older.message()
    )
    assert RegressionFlag.from_json(older.to_json()) == older
    assert RegressionFlag.from_json(gone.to_json()) == gone


def test_an_epoch_written_by_hand_still_names_a_dataset() -> None:
    assert Epoch.from_json("not json") == Epoch("not json", 0.0)
    assert Epoch.from_json(Epoch("abc", 5.0).to_json()) == Epoch("abc", 5.0)


# ---- EpochStore and the sequence, on Redis -------------------------------------------------


@pytest.fixture
def epochs(redis_client: redis.Redis) -> EpochStore:
    return EpochStore(redis_client)


def test_the_first_writer_sets_the_epoch_and_everyone_reads_it(epochs: EpochStore) -> None:
    assert epochs.current() is None
    first = epochs.ensure(now=100.0)
    assert len(first.id) == 32 and first.created_at == 100.0
    assert epochs.ensure(now=200.0) == first
    assert epochs.current() == first


def test_concurrent_first_writers_agree(redis_url: str, redis_client: redis.Redis) -> None:
    seen: list[Epoch] = []
    barrier = threading.Barrier(8)

    def start() -> None:
        store = EpochStore(connect(redis_url))
        barrier.wait()
        seen.append(store.ensure())

    threads = [threading.Thread(target=start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(seen) == 8 and len(set(seen)) == 1


def test_a_flushed_store_gets_a_new_epoch(epochs: EpochStore, redis_client: redis.Redis) -> None:
    before = epochs.ensure()
    redis_client.flushall()
    assert epochs.current() is None
    assert epochs.ensure().id != before.id


def test_flags_are_per_controller(epochs: EpochStore) -> None:
    a = RegressionFlag("ctl-a", Regression("gone", 5, None), since=1.0)
    b = RegressionFlag("ctl-b", Regression("older", 7, 2), since=2.0)
    epochs.flag(b)
    epochs.flag(a)
    assert epochs.flags() == [a, b]
    epochs.clear("ctl-a")
    assert epochs.flags() == [b]


def test_reserve_through_numbers_the_next_write_above_the_enforced_version(
    redis_client: redis.Redis,
) -> None:
    policies = PolicyStore(redis_client)
    assert policies.put(DOCUMENT, author="op").version == 1
    assert policies.reserve_through(5) == 5
    assert policies.reserve_through(3) == 5  # never lowered
    # The same document as the active one is stored all the same: the switches do not run it.
    written = policies.write(DOCUMENT, author="op")
    assert not written.unchanged
    assert written.policy.version == 6
    assert policies.write(DOCUMENT, author="op").unchanged  # and deduplicated again after


def test_reserve_through_on_an_empty_store(redis_client: redis.Redis) -> None:
    policies = PolicyStore(redis_client)
    assert policies.reserve_through(9) == 9
    assert policies.put(DOCUMENT, author="op").version == 10
