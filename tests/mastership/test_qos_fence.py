"""``LeaseKeeper.may_write``: the fence on a master's OVSDB writes, which no switch refuses.

A switch refuses a stale master's flow-mods (generation ids), but a bridge's queues are
written through OVSDB: a process woken from a pause must not write them before its keeper has
run again. The keeper answers from its last successful round and the lease TTL alone.
"""

from __future__ import annotations

import redis

from controller.mastership.keeper import LeaseKeeper
from controller.mastership.leases import Leases

SWITCHES = frozenset({1, 2})


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def keeper(client: redis.Redis, clock: Clock) -> LeaseKeeper:
    leases = Leases(client, "a", prefix="fence", ttl_s=3.0)
    kept = LeaseKeeper(leases, lambda: SWITCHES, lambda _roles: None)
    kept._clock = clock
    return kept


def test_no_write_before_the_first_round(redis_client: redis.Redis) -> None:
    assert not keeper(redis_client, Clock()).may_write(1)


def test_a_master_writes_until_a_ttl_after_its_last_round_began(
    redis_client: redis.Redis,
) -> None:
    clock = Clock()
    kept = keeper(redis_client, clock)
    assert kept.round() is not None
    assert kept.may_write(1) and kept.may_write(2)  # alone: master of both
    assert not kept.may_write(3)  # not a switch it was given
    clock.now += 2.9
    assert kept.may_write(1)
    clock.now += 0.2  # woken past the TTL: no, before any round ran again
    assert not kept.may_write(1)
    assert kept.round() is not None  # renewed (nobody took them meanwhile)
    assert kept.may_write(1)
