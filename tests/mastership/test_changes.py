"""What the lease keeper tells others: ``mastership`` events, takeover records, the
``flowlane_switch_master`` gauge and the read-side view, against a real Redis.

A paused instance is one whose keeper stops calling ``round`` (see test_leases.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
import redis
from prometheus_client import generate_latest

from controller.auth.tenancy import UNSCOPED, Scope
from controller.link.redis_link import RedisLink
from controller.mastership.changes import Change, MastershipReport
from controller.mastership.keeper import LeaseKeeper
from controller.mastership.leases import Leases
from controller.mastership.view import MastershipView
from controller.metrics import ControllerMetrics
from controller.store.events import EventStore
from tests.mastership.test_leases import wait_until

SWITCHES = frozenset({1, 2, 3, 4})


class Recorded:
    def __init__(self) -> None:
        self.changes: list[Change] = []

    def __call__(self, changes: Sequence[Change]) -> None:
        self.changes.extend(changes)

    def take(self) -> list[tuple[str, int, str | None]]:
        """(op, dpid, other) of what was recorded since the last take."""
        done = [(c.op, c.dpid, c.other) for c in self.changes]
        self.changes.clear()
        return sorted(done, key=lambda change: (change[1], change[0]))


def keeper(
    client: redis.Redis,
    instance: str,
    metrics: ControllerMetrics | None = None,
    ttl_s: float = 3.0,
    switches: frozenset[int] = SWITCHES,
) -> tuple[LeaseKeeper, Recorded]:
    recorded = Recorded()
    leases = Leases(client, instance, prefix="test", ttl_s=ttl_s)
    keeper = LeaseKeeper(leases, lambda: switches, lambda _roles: None)
    gauge = metrics.switch_master if metrics is not None else None
    keeper.watch(MastershipReport(recorded, gauge))
    return keeper, recorded


def master_series(metrics: ControllerMetrics) -> dict[str, float]:
    return {
        sample.labels["dpid"]: sample.value
        for family in metrics.registry.collect()
        if family.name == "flowlane_switch_master"
        for sample in family.samples
    }


def test_takes_hand_overs_and_a_dead_instances_switches_are_told(
    redis_client: redis.Redis,
) -> None:
    a, told_a = keeper(redis_client, "a", ttl_s=0.3)
    b, told_b = keeper(redis_client, "b")
    a.round()
    assert told_a.take() == [("took", dpid, None) for dpid in sorted(SWITCHES)]
    b.round()
    assert told_b.take() == []  # a owns them all: b waits for the hand-over
    roles_a = a.round()
    assert roles_a is not None
    handed = sorted(d for d, role in roles_a.items() if role.name == "slave")
    assert told_a.take() == [("released", dpid, "b") for dpid in handed]
    b.round()
    assert told_b.take() == [("took", dpid, None) for dpid in handed]  # a free switch
    # a pauses past its TTL: b takes the rest from a.
    wait_until("a's lease expires", lambda: not redis_client.exists("test:mastership:lease:a"))
    b.round()
    kept = sorted(SWITCHES - set(handed))
    assert told_b.take() == [("took", dpid, "a") for dpid in kept]
    # a wakes up: registered again, it cannot take a generation; it says it stepped down.
    a.round()
    assert told_a.take() == [("stepped-down", dpid, None) for dpid in kept]


def test_a_refused_master_says_it_stepped_down_and_takes_the_switch_again(
    redis_client: redis.Redis,
) -> None:
    a, told = keeper(redis_client, "a", switches=frozenset({7}))
    a.round()
    told.changes.clear()
    a.stepped_down(7)
    roles = a.round()
    assert roles is not None and roles[7].generation == 2
    assert [(c.op, c.generation, c.reason) for c in told.changes] == [
        ("stepped-down", 1, "refused"),
        ("took", 2, ""),
    ]
    assert told.changes[1].other == "a"  # its own record, taken again with a new generation


def test_the_gauge_has_one_series_per_connected_switch(redis_client: redis.Redis) -> None:
    connected = {1, 2}
    metrics_a, metrics_b = ControllerMetrics(), ControllerMetrics()
    a, _ = keeper(redis_client, "a", metrics_a)
    recorded = Recorded()
    leases = Leases(redis_client, "b", prefix="test")
    b = LeaseKeeper(leases, lambda: frozenset(connected), lambda _roles: None)
    b.watch(MastershipReport(recorded, metrics_b.switch_master))
    a.round()
    b.round()
    assert master_series(metrics_a) == {f"{d:016x}": 1.0 for d in SWITCHES}
    assert master_series(metrics_b) == {f"{d:016x}": 0.0 for d in connected}
    connected.discard(2)
    b.round()
    assert master_series(metrics_b) == {f"{1:016x}": 0.0}  # 2 left b: its series goes
    assert (
        'flowlane_switch_master{dpid="0000000000000001"} 0.0'
        in generate_latest(metrics_b.registry).decode()
    )


def test_the_view_shows_leases_masters_and_the_last_takeover(redis_client: redis.Redis) -> None:
    a, _ = keeper(redis_client, "a", ttl_s=0.3)
    b, _ = keeper(redis_client, "b", switches=frozenset({1, 2}))
    a.round()
    b.round()
    view = MastershipView(redis_client, "test")
    [seen_a, seen_b] = view.instances()
    assert (seen_a.id, seen_a.alive, seen_a.connected) == ("a", True, tuple(sorted(SWITCHES)))
    assert [m.dpid for m in seen_a.masters] == sorted(SWITCHES)
    assert seen_a.expires_in_s is not None and 0 < seen_a.expires_in_s <= 0.3
    assert seen_a.registered_at is not None and seen_a.takeovers == ()
    assert seen_b.masters == ()
    wait_until("a's lease expires", lambda: not redis_client.exists("test:mastership:lease:a"))
    b.round()
    # a is dead but still named as the owner of the switches b is not connected to.
    [dead_a, live_b] = view.instances(also=["c"])[:2]
    assert (dead_a.alive, dead_a.expires_in_s) == (False, None)
    assert [m.dpid for m in dead_a.masters] == [3, 4]
    assert [(m.dpid, m.generation) for m in live_b.masters] == [(1, 2), (2, 2)]
    assert live_b.masters[0].takeover is not None
    assert live_b.masters[0].takeover.previous == "a"
    assert [t.dpid for t in live_b.takeovers] in ([1, 2], [2, 1])
    assert [v.id for v in view.instances(also=["c"])] == ["a", "b", "c"]  # c: a heartbeat only
    ttl = redis_client.ttl("test:mastership:takeovers:b")
    assert 0 < ttl <= 7 * 24 * 3600
    assert not any("token" in str(v) for v in view.instances())


@pytest.fixture
def link(redis_url: str, redis_client: redis.Redis) -> Iterator[RedisLink]:
    redis_link = RedisLink(redis_url, "a")
    yield redis_link
    redis_link.stop()


def test_changes_become_mastership_events_every_viewer_reads(
    link: RedisLink, redis_client: redis.Redis
) -> None:
    link.mastership_changed(
        [
            Change("took", 1, "a", 5, other="dead"),
            Change("released", 2, "a", 3, other="b"),
            Change("stepped-down", 3, "a", 4, reason="refused"),
        ]
    )
    assert link.drain()
    stored = EventStore(redis_client).read()
    assert [(e.kind, e.data) for e in stored] == [
        (
            "mastership",
            {"op": "took", "switch": f"{1:016x}", "instance": "a", "generation": 5, "from": "dead"},
        ),
        (
            "mastership",
            {"op": "released", "switch": f"{2:016x}", "instance": "a", "generation": 3, "to": "b"},
        ),
        (
            "mastership",
            {
                "op": "stepped-down",
                "switch": f"{3:016x}",
                "instance": "a",
                "generation": 4,
                "reason": "refused",
            },
        ),
    ]
    tenant = Scope(tenant="blue", networks=())
    assert all(tenant.sees_event(e.kind, e.data) for e in stored)
    assert all(UNSCOPED.sees_event(e.kind, e.data) for e in stored)
