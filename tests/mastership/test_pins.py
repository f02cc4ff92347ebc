"""Pins shared through Redis, fenced by each switch's generation (``controller.mastership.pins``),
and the exchange that carries them between the fabric owner and Redis."""

from __future__ import annotations

import redis

from controller.flowid import FlowId
from controller.mastership.decide import Role
from controller.mastership.hosts import HostStore
from controller.mastership.leases import Leases
from controller.mastership.pins import PinStore, decode, encode
from controller.openflow.fabric_events import FabricOffer, FabricShared, SharedPin
from controller.shell.mastership import FabricExchange

FLOW = FlowId(0x0800, 6, 0x0A000001, 0x0A000002, 40000, 5201)
PIN = SharedPin(FLOW, ((11, 1), (1, 2)), 1_700_000_000.5)
OTHER = SharedPin(FLOW._replace(src_port=40001), ((11, 2), (2, 2)), 1_700_000_001.0, 1.7e9)


def test_a_record_round_trips_and_a_bad_one_is_none() -> None:
    assert decode(encode("a", 7, (PIN, OTHER))) == (PIN, OTHER)
    assert encode("a", 7, ()) == ""
    assert decode("{not json") == () and decode('{"pins": [[1]]}') == ()


def test_only_the_current_master_of_a_switch_writes_its_pins(redis_client: redis.Redis) -> None:
    a = Leases(redis_client, "a", prefix="pins", time_floor=True)
    b = Leases(redis_client, "b", prefix="pins", time_floor=True)
    a.renew({11})
    b.renew({11})
    first = a.take(11).generation
    assert first is not None
    a_pins, b_pins = PinStore(a), PinStore(b)
    assert a_pins.write({11: (first, (PIN,))}) == 1
    assert b_pins.read() == {11: (PIN,)}
    assert b_pins.write({11: (first, (OTHER,))}) == 0  # not b's switch

    a.close()  # a is killed: b ends its lease and takes the switch
    assert b.watch().ended == ("a",)
    second = b.take(11).generation
    assert second is not None and second > first
    assert b_pins.read() == {11: (PIN,)}  # what b starts from: a's pins
    assert b_pins.write({11: (second, (PIN, OTHER))}) == 1
    # a's writer, woken with its old generation, is fenced out (as the switch fences it).
    stale = PinStore(Leases(redis_client, "a", prefix="pins"))
    assert stale.write({11: (first, ())}) == 0
    assert b_pins.read() == {11: (PIN, OTHER)}
    assert b_pins.write({11: (second, ())}) == 1 and b_pins.read() == {}


def test_the_exchange_writes_what_was_offered_and_tells_the_owner_everyone_s(
    redis_client: redis.Redis,
) -> None:
    a = Leases(redis_client, "a", prefix="pins")
    a.renew({11, 12})
    generation = a.take(11).generation
    assert generation is not None
    told: list[FabricShared] = []
    exchange = FabricExchange(PinStore(a), HostStore(a), told.append)
    assert exchange.ready() == frozenset()  # nothing offered yet: ready for nothing
    exchange.published({11: Role("master", generation), 12: Role("slave", 0)})
    assert told[-1].mastered == {11} and dict(told[-1].pins) == {}
    # 12 is not ours: not written
    exchange.offer(FabricOffer({11: (PIN,), 12: (OTHER,)}, {}, frozenset({11, 12})))
    exchange.published({11: Role("master", generation), 12: Role("slave", 0)})
    assert dict(told[-1].pins) == {11: (PIN,)}
    assert exchange.ready() == {11, 12}
