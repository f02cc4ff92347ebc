"""SwitchStore against a real Redis: snapshots, applied versions, heartbeats, liveness,
and the pruning of controllers that stopped beating long ago."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest
import redis

from controller.qos.plan import QueueSpec
from controller.store.switches import (
    PRUNE_AFTER_S,
    PortReport,
    SwitchReport,
    SwitchStore,
)

QUEUE = QueueSpec(
    queue_id=0, class_name="inference", min_bps=2_000, max_bps=10_000, priority=0, dscp=46
)


def report(
    dpid: int, controller: str = "c1", applied: int | None = 1, **extra: object
) -> SwitchReport:
    return SwitchReport(
        dpid=dpid,
        controller=controller,
        connected_at=1_700_000_000.5,
        applied_version=applied,
        ports=(
            PortReport("s1-eth1", 1, 10_000_000_000, 10_000_000_000, (QUEUE,)),
            PortReport("s1-eth2", 2, None),
        ),
        flows=(
            (0, 4196, (("eth_type", 0x800, None), ("tcp_dst", 8000, 0xFFFE)), 0xF1020000000000AA),
            (2, 0, (), 0xF103000000000001),
        ),
        datapath_type="netdev",
        **extra,  # type: ignore[arg-type]
    )


@pytest.fixture
def store(redis_client: redis.Redis) -> SwitchStore:
    return SwitchStore(redis_client)


def test_report_round_trips_every_field(store: SwitchStore) -> None:
    sent = report(0xABC, updated_at=1_700_000_001.25)
    store.report(sent)
    assert store.all() == [sent]
    assert store.all()[0].dpid_hex == "0000000000000abc"


def test_report_text_is_plain_json_of_its_fields() -> None:
    # Each flow's text is cached by content; the report must still be one JSON document
    # whose flows are exactly the report's, however reports share or change entries.
    first = report(1)
    changed = dataclasses.replace(
        report(2), flows=((1, 7, (("ip_dscp", 46, None),), 5), first.flows[1])
    )
    for sent in (first, changed, first):
        document = json.loads(sent.to_json())
        assert document["flows"] == [
            [t, p, [list(field) for field in match], c] for t, p, match, c in sent.flows
        ]
        assert document["ports"][0]["queues"][0]["dscp"] == 46
        assert SwitchReport.from_json(sent.to_json()) == sent
    assert json.loads(dataclasses.replace(first, flows=()).to_json())["flows"] == []


def test_reports_are_sorted_by_dpid_and_replace_each_other(store: SwitchStore) -> None:
    store.report(report(3))
    store.report(report(1))
    store.report(report(3, applied=2))
    assert [(r.dpid, r.applied_version) for r in store.all()] == [(1, 1), (3, 2)]


def test_applied_versions_follow_the_reports(store: SwitchStore) -> None:
    assert store.applied() == {}
    store.report(report(1, applied=4))
    store.report(report(2, applied=None))
    assert store.applied() == {"0000000000000001": 4}
    store.report(report(2, applied=5))
    store.report(report(1, applied=None))
    assert store.applied() == {"0000000000000002": 5}


def test_remove_forgets_the_snapshot_and_the_applied_version(store: SwitchStore) -> None:
    store.report(report(1))
    store.report(report(2))
    store.remove(1)
    store.remove(99)  # unknown: nothing to do
    assert [r.dpid for r in store.all()] == [2]
    assert store.applied() == {"0000000000000002": 1}


def test_remove_controller_forgets_its_switches_only(store: SwitchStore) -> None:
    store.heartbeat("c1")
    store.heartbeat("c2")
    store.report(report(1, controller="c1"))
    store.report(report(2, controller="c2"))
    store.remove_controller("c1")
    assert [r.dpid for r in store.all()] == [2]
    assert store.live_controllers(60) == ["c2"]


def test_live_controllers_by_heartbeat_age(store: SwitchStore) -> None:
    now = time.time()
    store.heartbeat("fresh", now=now - 1)
    store.heartbeat("stale", now=now - 30)
    assert store.live_controllers(10, now=now) == ["fresh"]
    assert sorted(store.live_controllers(60, now=now)) == ["fresh", "stale"]
    assert store.live_controllers(0.5, now=now) == []
    store.heartbeat("stale", now=now)  # a beat refreshes the same member
    assert sorted(store.live_controllers(10, now=now)) == ["fresh", "stale"]


def test_live_reports_drop_switches_of_a_stale_controller(store: SwitchStore) -> None:
    store.heartbeat("alive")
    store.heartbeat("crashed", now=time.time() - 60)
    store.report(report(1, controller="alive"))
    store.report(report(2, controller="crashed"))
    store.report(report(3, controller="never-beat"))
    assert [r.dpid for r in store.live_reports(10)] == [1]
    assert [r.dpid for r in store.all()] == [1, 2, 3]
    store.heartbeat("crashed")
    assert [r.dpid for r in store.live_reports(10)] == [1, 2]


def test_no_heartbeat_means_no_live_switch(store: SwitchStore) -> None:
    store.report(report(1))
    assert store.live_controllers(10) == []
    assert store.live_reports(10) == []


# ---- pruning controllers that stopped beating long ago -----------------------------------


def test_a_heartbeat_prunes_only_controllers_silent_beyond_the_bound(
    redis_client: redis.Redis,
) -> None:
    store = SwitchStore(redis_client, prune_after_s=100)
    now = 1_700_000_000.0
    store.heartbeat("ancient", now=now - 101)
    store.heartbeat("late", now=now - 99)  # not live for the API, but not pruned either
    store.heartbeat("fresh", now=now - 1)
    assert store.heartbeat("beating", now=now) == ["ancient"]
    members = redis_client.zrange("flowlane:controllers", 0, -1)
    assert sorted(members) == ["beating", "fresh", "late"]
    assert store.heartbeat("beating", now=now) == []  # nothing left to prune


def test_pruning_forgets_the_switches_a_pruned_controller_still_owns(
    redis_client: redis.Redis,
) -> None:
    store = SwitchStore(redis_client, prune_after_s=100)
    now = time.time()
    store.heartbeat("crashed", now=now - 500)
    store.report(report(1, controller="crashed", applied=3))
    store.report(report(2, controller="alive", applied=3))
    store.report(report(3, controller="never-beat", applied=3))
    assert store.heartbeat("alive", now=now) == ["crashed"]
    assert [r.dpid for r in store.all()] == [2, 3]
    assert sorted(store.applied()) == ["0000000000000002", "0000000000000003"]
    assert sorted(redis_client.hkeys("flowlane:switch-owners")) == [
        "0000000000000002",
        "0000000000000003",
    ]


def test_pruning_keeps_a_switch_another_controller_took_over(redis_client: redis.Redis) -> None:
    """The new owner confirmed a version before sending its full snapshot: the switch stays."""
    store = SwitchStore(redis_client, prune_after_s=100)
    now = time.time()
    store.heartbeat("crashed", now=now - 500)
    store.report(report(1, controller="crashed", applied=3))
    store.set_applied(1, 4, "successor")  # the snapshot still names "crashed"
    assert store.heartbeat("successor", now=now) == ["crashed"]
    assert [(r.dpid, r.controller) for r in store.all()] == [(1, "crashed")]
    assert store.applied() == {"0000000000000001": 4}
    assert store.live_switches(10) == ["0000000000000001"]


def test_the_default_bound_spares_a_controller_that_is_merely_late(store: SwitchStore) -> None:
    now = time.time()
    store.heartbeat("late", now=now - 60)
    store.report(report(1, controller="late"))
    assert store.heartbeat("other", now=now) == []
    assert [r.dpid for r in store.all()] == [1]
    assert store.prune_after_s == PRUNE_AFTER_S


def test_remove_controller_keeps_a_switch_another_controller_took_over(
    store: SwitchStore,
) -> None:
    store.heartbeat("old")
    store.heartbeat("new")
    store.report(report(1, controller="old"))
    store.report(report(2, controller="old"))
    store.set_applied(2, 5, "new")
    store.remove_controller("old")
    assert [r.dpid for r in store.all()] == [2]
    assert store.applied() == {"0000000000000002": 5}
    assert store.live_controllers(60) == ["new"]


def test_many_confirmations_are_one_write_with_one_announcement_each(
    redis_client: redis.Redis, store: SwitchStore
) -> None:
    store.set_applied(3, 1, "ctl")
    subscriber = redis_client.pubsub()
    subscriber.subscribe(store.applied_channel)
    assert subscriber.get_message(timeout=1)["type"] == "subscribe"
    store.set_applied_many({1: 7, 2: 7, 3: None}, "ctl")
    assert store.applied() == {"0000000000000001": 7, "0000000000000002": 7}
    assert redis_client.hgetall("flowlane:switch-owners") == {
        "0000000000000001": "ctl",
        "0000000000000002": "ctl",
        "0000000000000003": "ctl",
    }
    announced = [subscriber.get_message(timeout=1) for _ in range(3)]
    assert sorted(m["data"] for m in announced if m) == [
        "0000000000000001",
        "0000000000000002",
        "0000000000000003",
    ]
    store.set_applied_many({}, "ctl")  # nothing to write: no round trip, no error
    subscriber.close()


@pytest.mark.parametrize("bound", [0.0, -1.0])
def test_the_prune_bound_must_be_positive(redis_client: redis.Redis, bound: float) -> None:
    with pytest.raises(ValueError, match=r"^prune_after_s must be positive"):
        SwitchStore(redis_client, prune_after_s=bound)
