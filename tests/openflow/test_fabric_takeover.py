"""Pins across a takeover: two fabric owners (two controllers) sharing their pins.

Each owner is told which switches its instance masters and every instance's pins
(``FabricShared``, what ``controller.shell.mastership.FabricExchange`` reads from Redis).
The master of a flow's source switch places it; every owner plans every switch with
every pin; the instance that takes a switch over keeps its predecessor's pins: no
flow is re-placed and no switch's inputs change.
"""

from __future__ import annotations

from collections.abc import Mapping

from controller.openflow.fabric_events import FabricOffer, FabricShared, SharedPin
from controller.openflow.fabric_owner import INHERITED_GRACE_S
from tests.openflow.fabric_harness import (
    DATA,
    EPOCH,
    LEAF_A,
    LEAF_B,
    SPINE,
    SPINE_2,
    Fabric,
    new_fabric,
    observed,
    two_spines,
)

Pins = Mapping[int, tuple[SharedPin, ...]]


def instance(offers: list[FabricOffer], now: float) -> Fabric:
    """An owner that shares its pins (``offers``), its monotonic clock at ``now``; every
    instance's wall clock agrees."""
    return two_spines(new_fabric(now=now, share=offers.append, wall_origin=now))


def shared(fabric: Fabric, mastered: set[int], pins: Pins | None = None) -> None:
    fabric.tell(FabricShared(frozenset(mastered), pins or {}, fabric.clock.now))


def test_the_master_of_the_source_places_everyone_plans_with_it_and_a_takeover_keeps_it() -> None:
    from_a: list[FabricOffer] = []
    from_b: list[FabricOffer] = []
    a = instance(from_a, 1000.0)
    b = instance(from_b, 50_000.0)  # another process: another monotonic clock
    shared(a, {LEAF_A, SPINE})
    shared(b, {LEAF_B, SPINE_2})
    assert from_a[-1].pins == {LEAF_A: (), SPINE: ()}  # nothing pinned: records emptied

    a.flows(LEAF_A, [observed(DATA, 9e6)])
    a.place()
    [pin] = from_a[-1].pins[LEAF_A]
    assert pin.flow == DATA and pin.path[0][0] == LEAF_A
    assert pin.since_wall == EPOCH + (a.clock.now - 1000.0)  # two_spines: settled 1.5 s

    # b plans every switch with a's pin, on the same path.
    b.clock.now += 0.5
    shared(b, {LEAF_B, SPINE_2}, from_a[-1].pins)
    for dpid in (LEAF_A, LEAF_B, SPINE, SPINE_2):
        assert b.sent.latest[dpid].pinned == a.sent.latest[dpid].pinned
    assert DATA in b.sent.latest[LEAF_A].pinned

    # a dies; b masters every switch: nothing any switch plans from changes.
    b.sent.clear()
    b.clock.now += 0.5
    shared(b, {LEAF_A, LEAF_B, SPINE, SPINE_2}, from_a[-1].pins)
    assert b.sent.publishes == []
    kept = b.owner.pins()[DATA]
    assert kept.path == pin.path
    assert kept.since == b.clock.now - 1.0  # a's pin time, on b's clock
    assert [p.flow for p in from_b[-1].pins[LEAF_A]] == [DATA]  # b publishes it as its own

    # Its flow shows up in b's counters: placement keeps it where it is.
    b.clock.now += 1.0
    b.flows(LEAF_A, [observed(DATA, 9e6)])
    b.place()
    assert b.placement_events() == [] and b.sent.publishes == []
    assert b.owner.pins()[DATA].path == pin.path
    # a's last record is fenced out in Redis (controller.mastership.pins); here, b's own
    # pins of its switches win over any record it reads for them.
    shared(b, {LEAF_A, LEAF_B, SPINE, SPINE_2}, {LEAF_A: ()})
    assert b.owner.pins()[DATA].path == pin.path


def test_a_pin_taken_over_whose_flow_never_shows_up_goes_after_the_grace() -> None:
    from_a: list[FabricOffer] = []
    a = instance(from_a, 1000.0)
    shared(a, {LEAF_A, SPINE})
    a.flows(LEAF_A, [observed(DATA, 9e6)])
    a.place()
    b = instance([], 7000.0)
    shared(b, {LEAF_A, LEAF_B, SPINE, SPINE_2}, from_a[-1].pins)
    assert DATA in b.owner.pins()
    b.clock.now += INHERITED_GRACE_S / 2
    b.place()
    assert DATA in b.owner.pins()
    b.clock.now += INHERITED_GRACE_S
    b.place()
    assert DATA not in b.owner.pins()
    assert DATA not in b.sent.latest[LEAF_A].pinned


def test_a_switch_no_longer_mastered_is_not_placed_here_any_more() -> None:
    from_a: list[FabricOffer] = []
    a = instance(from_a, 1000.0)
    shared(a, {LEAF_A, SPINE})
    a.flows(LEAF_A, [observed(DATA, 9e6)])
    a.place()
    [pin] = from_a[-1].pins[LEAF_A]
    # LEAF_A handed over to b, which publishes its own (empty) record: a follows b's.
    shared(a, {SPINE}, {LEAF_A: ()})
    assert DATA not in a.owner.pins()
    assert LEAF_A not in from_a[-1].pins
    shared(a, {SPINE}, {LEAF_A: (pin,)})
    assert a.owner.pins()[DATA].path == pin.path
