"""Hosts shared through Redis, fenced by each switch's generation (``controller.mastership.hosts``),
and the lease's ``ready`` switches that a rebalance reads (``controller.mastership.assign``)."""

from __future__ import annotations

import redis

from controller.mastership.decide import Role
from controller.mastership.hosts import HostStore, decode, encode
from controller.mastership.keeper import LeaseKeeper
from controller.mastership.leases import Leases
from controller.mastership.pins import PinStore
from controller.openflow.fabric_events import FabricOffer, FabricShared, SharedHost
from controller.shell.mastership import FabricExchange

H1 = SharedHost(0x0A0000000001, 5, 0x0A000001)
H2 = SharedHost(0x0A0000000002, 6, None)


def test_a_record_round_trips_an_empty_one_is_kept_and_a_bad_one_is_none() -> None:
    assert decode(encode("a", 7, (H1, H2))) == (H1, H2)
    assert decode(encode("a", 7, ())) == ()  # a master with no host at its switch says so
    assert decode("{not json") is None and decode('{"hosts": [[1]]}') is None


def test_only_the_current_master_of_a_switch_writes_its_hosts(redis_client: redis.Redis) -> None:
    a = Leases(redis_client, "a", prefix="hosts")
    b = Leases(redis_client, "b", prefix="hosts")
    a.renew({11})
    b.renew({11})
    first = a.take(11).generation
    assert first is not None
    a_hosts, b_hosts = HostStore(a), HostStore(b)
    assert a_hosts.write({11: (first, (H1, H2))}) == 1
    assert b_hosts.read() == {11: (H1, H2)}
    assert b_hosts.write({11: (first, ())}) == 0  # not b's switch
    a.close()
    assert b.watch().ended == ("a",)
    second = b.take(11).generation
    assert second is not None
    assert b_hosts.read() == {11: (H1, H2)}  # what b starts from: a's hosts
    stale = HostStore(Leases(redis_client, "a", prefix="hosts"))
    assert stale.write({11: (first, ())}) == 0
    assert b_hosts.write({11: (second, (H1,))}) == 1 and b_hosts.read() == {11: (H1,)}


def test_the_exchange_carries_hosts_and_where_switches_are_attached_and_the_lease_readiness(
    redis_client: redis.Redis,
) -> None:
    a = Leases(redis_client, "a", prefix="hx")
    b = Leases(redis_client, "b", prefix="hx")
    told: list[FabricShared] = []
    holder: list[FabricExchange] = []
    keeper = LeaseKeeper(
        a, connected=lambda: {11, 12}, publish=lambda roles: None, ready=lambda: holder[0].ready()
    )
    exchange = FabricExchange(PinStore(a), HostStore(a), told.append, lambda: keeper.reading)
    holder.append(exchange)
    keeper.watch(exchange)
    b.renew({12, 13})
    roles = keeper.round()
    assert roles is not None and {d for d, r in roles.items() if r.name == "master"} == {11}
    # a was ready for nothing (no offer yet): b, ready for 12 (no readiness sent), has it.
    assert b.renew({12, 13}).reading.ready == {"a": frozenset(), "b": frozenset({12, 13})}
    assert told[-1].attached == frozenset({11, 12, 13}) and dict(told[-1].hosts) == {}
    generation = roles[11].generation
    exchange.offer(FabricOffer({}, {11: (H1,), 12: (H2,)}, frozenset({11, 12})))
    keeper.round()
    assert dict(told[-1].hosts) == {11: (H1,)}  # 12 is b's: a's offer for it is not written
    readiness = b.renew({12, 13}).reading.ready
    assert readiness is not None and readiness["a"] == {11, 12}
    assert keeper.roles[11] == Role("master", generation)
