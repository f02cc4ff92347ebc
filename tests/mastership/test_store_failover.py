"""A Redis failover longer than the lease TTL moves no switch (the three-controller test's
0.7 s of lost probes: ``test_the_redis_primary_killed_during_policy_writes``).

Every lease runs out during the failover (the new primary holds them with their old
expiry), and the instances renew on the new primary one after the other.  Read as dead,
the peers' switches went to whoever renewed first and came back a renewal later: each
switch of the others changed master twice, and the transient master re-synced it from
its own view.  Now an instance whose renewal comes late enough that a peer's lease may
have run out meanwhile (more than a TTL less a beat after its previous one) presumes, for
one TTL, that owners whose lease is missing are alive: each instance keeps (re-takes) its
own switches and takes nobody else's.  A peer truly gone is taken over a TTL later.
"""

from __future__ import annotations

from collections.abc import Mapping

import redis

from controller.mastership.decide import Owner, Reading, Role, decide, presume_owners_live
from controller.mastership.keeper import LeaseKeeper
from controller.mastership.leases import Leases

SWITCHES = frozenset({1, 2, 3, 4})
TTL_S = 3.0


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def keeper(client: redis.Redis, instance: str, clock: Clock) -> LeaseKeeper:
    leases = Leases(client, instance, prefix="failover", ttl_s=TTL_S)
    kept = LeaseKeeper(leases, lambda: SWITCHES, lambda roles: None)
    kept._clock = clock
    return kept


def masters(roles: Mapping[int, Role] | None) -> frozenset[int]:
    assert roles is not None
    return frozenset(dpid for dpid, role in roles.items() if role.name == "master")


BEAT_S = 1.0


def settled(keepers: list[LeaseKeeper], clock: Clock) -> dict[str, frozenset[int]]:
    """Renewals every beat until the split is stable."""
    for _ in range(3):
        clock.now += BEAT_S
        found = {k.instance_id: masters(k.round()) for k in keepers}
    return found


def test_every_lease_lost_in_a_failover_moves_no_switch(redis_client: redis.Redis) -> None:
    clock = Clock()
    keepers = [keeper(redis_client, name, clock) for name in ("a", "b", "c")]
    before = settled(keepers, clock)
    assert sorted(len(owned) for owned in before.values()) == [1, 1, 2]
    # The failover, a little shorter than the TTL: this instance's lease lives on, but
    # the peers renewed up to a beat earlier and theirs ran out (what the Mininet test
    # saw: the first to renew took a peer's switch).
    clock.now += TTL_S - 0.1
    redis_client.delete(*(f"failover:mastership:lease:{name}" for name in before))
    for kept in keepers:  # one after the other, each on its own, as they come back
        assert masters(kept.round()) == before[kept.instance_id]
    assert settled(keepers, clock) == before


def test_a_peer_that_never_comes_back_is_taken_over_after_one_more_ttl(
    redis_client: redis.Redis,
) -> None:
    clock = Clock()
    keepers = [keeper(redis_client, name, clock) for name in ("a", "b")]
    before = settled(keepers, clock)
    clock.now += TTL_S + 1
    redis_client.delete("failover:mastership:lease:a", "failover:mastership:lease:b")
    b = keepers[1]
    assert masters(b.round()) == before["b"]  # a presumed alive for a TTL
    for _ in range(int(TTL_S / BEAT_S) - 1):
        clock.now += BEAT_S
        assert masters(b.round()) == before["b"]
    clock.now += BEAT_S
    assert masters(b.round()) == SWITCHES  # a never renewed: its switches are b's


def test_a_regular_renewal_takes_a_dead_peers_switches_at_once(redis_client: redis.Redis) -> None:
    clock = Clock()
    keepers = [keeper(redis_client, name, clock) for name in ("a", "b")]
    before = settled(keepers, clock)
    redis_client.delete("failover:mastership:lease:a")  # a alone is gone (expired, ended)
    clock.now += BEAT_S
    assert masters(keepers[1].round()) == SWITCHES
    assert before["a"]


def test_presumed_owners_are_live_only_at_switches_someone_is_connected_to() -> None:
    reading = Reading(
        {"b": frozenset({1, 2})},
        owners={1: Owner("a", 5), 2: Owner("b", 6), 9: Owner("a", 7)},
    )
    presumed = presume_owners_live("b", reading, {"a", "b"})
    assert presumed.instances == {"b": frozenset({1, 2}), "a": frozenset({1})}
    assert decide("b", presumed).roles[1] == Role("slave", 0)
    assert decide("b", reading).take == {1}  # read as it is: a is dead
    assert presume_owners_live("a", Reading({"a": frozenset({1})}, owners={}), {"a"}) is not None
    # Not live at the renewal before (or seen gone by the presence watch): not presumed.
    assert decide("b", presume_owners_live("b", reading, {"b"})).take == {1}


def test_late_renewals_in_a_row_do_not_keep_a_dead_peer_presumed(
    redis_client: redis.Redis,
) -> None:
    """A loaded machine, or a TTL near the renewal interval, makes every renewal late: the
    presumption covers only who was live at the renewal before, so it never chains."""
    clock = Clock()
    keepers = [keeper(redis_client, name, clock) for name in ("a", "b")]
    before = settled(keepers, clock)
    b = keepers[1]
    late = TTL_S - BEAT_S / 2  # each gap over a TTL less a beat
    clock.now += late
    assert masters(b.round()) == before["b"]  # late, a still live: nothing to presume
    redis_client.delete("failover:mastership:lease:a")  # a dies; its lease is gone
    clock.now += late
    assert masters(b.round()) == before["b"]  # a was live at the renewal before: presumed
    clock.now += late
    assert masters(b.round()) == SWITCHES  # late again, but a was missing then: taken
