"""Leases, owner records and fenced generation ids against a real Redis.

A paused instance is one whose keeper stops calling ``round`` (what SIGSTOP does to
its heartbeat thread): its lease expires after the TTL, another takes its
switches, and when it runs again it cannot take a generation and steps down.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import redis

from controller.mastership.decide import Role
from controller.mastership.keeper import LeaseKeeper
from controller.mastership.leases import Leases

SWITCHES = frozenset({1, 2, 3, 4})


def wait_until(what: str, condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def keeper(
    client: redis.Redis, instance: str, ttl_s: float = 3.0, switches: frozenset[int] = SWITCHES
) -> tuple[LeaseKeeper, list[Mapping[int, Role]]]:
    published: list[Mapping[int, Role]] = []
    leases = Leases(client, instance, prefix="test", ttl_s=ttl_s)
    return LeaseKeeper(leases, lambda: switches, published.append), published


def masters(roles: Mapping[int, Role]) -> set[int]:
    return {dpid for dpid, role in roles.items() if role.name == "master"}


def test_alone_an_instance_masters_every_switch_with_generation_one(
    redis_client: redis.Redis,
) -> None:
    a, published = keeper(redis_client, "a")
    roles = a.round()
    assert roles == {dpid: Role("master", 1) for dpid in SWITCHES}
    assert published == [roles]
    assert a.round() == roles  # renewed: nothing taken again


def test_two_instances_split_the_switches_without_both_mastering_one(
    redis_client: redis.Redis,
) -> None:
    a, _ = keeper(redis_client, "a")
    b, _ = keeper(redis_client, "b")
    a.round()
    roles_b = b.round()
    assert roles_b is not None and masters(roles_b) == set()  # a owns all: b waits
    roles_a = a.round()  # a sees b and hands two over
    assert roles_a is not None and len(masters(roles_a)) == 2
    roles_b = b.round()
    assert roles_b is not None and masters(roles_b) == SWITCHES - masters(roles_a)
    assert all(role.generation == 2 for dpid, role in roles_b.items() if dpid in masters(roles_b))
    # Each is slave of the other's switches, with the switch's newest generation.
    roles_a = a.round()
    assert roles_a is not None
    for dpid in masters(roles_b):
        assert roles_a[dpid] == Role("slave", roles_b[dpid].generation)


def test_a_paused_instance_loses_its_switches_and_cannot_take_a_generation(
    redis_client: redis.Redis,
) -> None:
    a, _ = keeper(redis_client, "a", ttl_s=0.3)
    b, _ = keeper(redis_client, "b", ttl_s=3.0)
    a.round()
    assert b.round() is not None
    # a pauses (no more rounds); its lease expires; b takes everything with generation 2.
    wait_until("a's lease expires", lambda: not redis_client.exists("test:mastership:lease:a"))
    roles_b = b.round()
    assert roles_b == {dpid: Role("master", 2) for dpid in SWITCHES}
    # a wakes: its old lease's token cannot take anything...
    assert a.leases.take(1).generation is None
    assert redis_client.get("test:mastership:generation:0000000000000001") == "2"
    # ...and its next round finds the lease gone: it registers again, as everyone's slave.
    roles_a = a.round()
    assert roles_a is not None and masters(roles_a) == set()
    assert all(role == Role("slave", 2) for role in roles_a.values())


def test_generations_increase_across_a_switch_s_whole_history(
    redis_client: redis.Redis,
) -> None:
    seen: list[int] = []
    for instance in ("a", "b", "c", "a"):
        leases = Leases(redis_client, instance, prefix="test", ttl_s=3.0)
        leases.renew({7})
        taken = leases.take(7)
        assert taken.generation is not None, taken.why
        seen.append(taken.generation)
        assert leases.resign()
    assert seen == [1, 2, 3, 4]


def test_a_take_is_fenced_by_the_lease_and_by_a_live_owner(redis_client: redis.Redis) -> None:
    a = Leases(redis_client, "a", prefix="test", ttl_s=3.0)
    b = Leases(redis_client, "b", prefix="test", ttl_s=3.0)
    stranger = Leases(redis_client, "a", prefix="test", ttl_s=3.0)  # same id, other process
    a.renew({7})
    b.renew({7})
    assert a.take(7).generation == 1
    refused = b.take(7)
    assert refused.generation is None and "instance a" in refused.why
    assert stranger.take(7).generation is None  # not its token: fenced
    assert stranger.renew({7}).status == "conflict"
    assert redis_client.get("test:mastership:generation:0000000000000007") == "1"
    assert a.release(7) and b.take(7).generation == 2


def test_a_clean_stop_hands_its_switches_over_at_the_next_round(
    redis_client: redis.Redis,
) -> None:
    a, _ = keeper(redis_client, "a")
    b, _ = keeper(redis_client, "b")
    a.round()
    b.round()
    a.resign()
    roles_b = b.round()
    assert roles_b is not None and masters(roles_b) == SWITCHES
    assert not redis_client.sismember("test:mastership:instances", "a")


def test_a_step_down_makes_the_owner_take_a_new_generation(redis_client: redis.Redis) -> None:
    a, _ = keeper(redis_client, "a", switches=frozenset({9}))
    assert a.round() == {9: Role("master", 1)}
    a.stepped_down(9)
    assert a.round() == {9: Role("master", 2)}
    assert a.round() == {9: Role("master", 2)}


def test_redis_unreachable_keeps_the_roles(unused_port: int) -> None:
    client = redis.Redis(port=unused_port, socket_connect_timeout=0.2, socket_timeout=0.2)
    a, published = keeper(client, "a")
    assert a.round() is None and published == []


def test_a_slave_going_away_leaves_the_master_s_switch_report(redis_client: redis.Redis) -> None:
    from controller.store.switches import SwitchReport, SwitchStore

    store = SwitchStore(redis_client)
    store.report(SwitchReport(dpid=5, controller="master", connected_at=1.0, applied_version=3))
    store.remove(5, "slave")
    assert [(r.dpid, r.controller) for r in store.all()] == [(5, "master")]
    store.remove(5, "master")
    assert store.all() == []
