"""``assign`` and ``decide``: balanced within one switch, sticky, deterministic."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.mastership.assign import assign, counts
from controller.mastership.decide import Owner, Reading, Role, decide

SWITCHES = frozenset(range(1, 101))


def everyone(*ids: str, switches: frozenset[int] = SWITCHES) -> dict[str, frozenset[int]]:
    return {instance: switches for instance in ids}


def spread(owner: dict[int, str]) -> int:
    loads = counts(owner).values()
    return max(loads) - min(loads)


def test_one_instance_masters_every_switch() -> None:
    assert assign(everyone("a"), {}) == dict.fromkeys(SWITCHES, "a")


def test_three_instances_split_a_hundred_switches_34_33_33() -> None:
    owner = assign(everyone("a", "b", "c"), {})
    assert sorted(counts(owner).values()) == [33, 33, 34]
    assert set(owner) == SWITCHES


def test_a_new_instance_takes_only_its_share() -> None:
    before = assign(everyone("a", "b"), {})
    after = assign(everyone("a", "b", "c"), before)
    moved = [dpid for dpid in SWITCHES if before[dpid] != after[dpid]]
    assert all(after[dpid] == "c" for dpid in moved)  # nothing moves between a and b
    assert len(moved) == counts(after)["c"] == 33


def test_a_dead_instance_s_switches_go_to_the_others_and_nothing_else_moves() -> None:
    before = assign(everyone("a", "b", "c"), {})
    after = assign(everyone("a", "b"), before)
    for dpid in SWITCHES:
        if before[dpid] != "c":
            assert after[dpid] == before[dpid]
    assert spread(after) == 0


def test_the_answer_does_not_depend_on_the_order_things_were_read_in() -> None:
    one = assign({"b": SWITCHES, "a": SWITCHES, "c": SWITCHES}, {})
    two = assign(dict(reversed(list({"b": SWITCHES, "a": SWITCHES, "c": SWITCHES}.items()))), {})
    assert one == two == assign(everyone("a", "b", "c"), {})


def test_an_instance_masters_only_switches_it_is_connected_to() -> None:
    instances = {"a": frozenset({1, 2, 3, 4}), "b": frozenset({3, 4}), "c": frozenset()}
    owner = assign(instances, {1: "c", 3: "gone"})
    assert owner[1] == "a" and owner[2] == "a"  # only a reaches them
    assert {owner[3], owner[4]} == {"b"}  # balance: b takes what it can
    assert 5 not in owner


@settings(max_examples=200, deadline=None)
@given(
    n_switches=st.integers(0, 60),
    ids=st.lists(st.sampled_from("abcdefg"), min_size=1, max_size=7, unique=True),
    joined=st.sampled_from("abcdefgh"),
    data=st.data(),
)
def test_balanced_sticky_and_deterministic(
    n_switches: int, ids: list[str], joined: str, data: st.DataObject
) -> None:
    switches = frozenset(range(n_switches))
    current_owners = data.draw(
        st.dictionaries(st.sampled_from(range(max(n_switches, 1))), st.sampled_from("abcdefgh"))
    )
    instances = everyone(*ids, switches=switches)
    owner = assign(instances, current_owners)
    assert set(owner) == switches and set(owner.values()) <= set(ids)
    loads = [counts(owner).get(i, 0) for i in ids]
    if switches:
        assert max(loads) - min(loads) <= 1
    assert assign(dict(reversed(list(instances.items()))), dict(current_owners)) == owner
    assert assign(instances, owner) == owner  # a balanced answer is stable
    # A newcomer takes only its share, from the others; nothing moves between the others.
    grown = everyone(*{*ids, joined}, switches=switches)
    after = assign(grown, owner)
    moved = [d for d in switches if after[d] != owner[d]]
    assert all(after[d] == joined for d in moved)
    if joined not in ids:
        assert len(moved) == counts(after).get(joined, 0) <= -(-n_switches // len(grown))


def test_decide_takes_free_switches_keeps_its_own_and_waits_for_a_live_owner() -> None:
    reading = Reading(
        {"a": frozenset({1, 2, 3, 4}), "b": frozenset({1, 2, 3, 4})},
        owners={1: Owner("a", 5), 2: Owner("b", 6), 3: Owner("dead", 2)},
        generations={1: 5, 2: 6, 3: 2, 4: 0},
    )
    decision = decide("a", reading)
    mine = {d for d, o in decision.assignment.items() if o == "a"}
    assert decision.assignment[1] == "a" and decision.assignment[2] == "b"  # sticky
    assert decision.roles[1] == Role("master", 5)  # its own, kept with its generation
    assert decision.roles[2] == Role("slave", 6)  # b's: a slave with the newest generation
    assert decision.take == frozenset(mine & {3, 4}) and len(mine) == 2  # dead owner's, free
    assert decide("a", reading, fresh={1}).take == frozenset({1} | (mine & {3, 4}))


def test_decide_hands_over_what_is_assigned_elsewhere() -> None:
    both = frozenset({1, 2})
    reading = Reading({"a": both, "b": both}, owners={1: Owner("a", 3), 2: Owner("a", 4)})
    decision = decide("a", reading)
    assert len(decision.release) == 1  # one of its two goes to b
    (given_away,) = decision.release
    assert decision.roles[given_away].name == "slave"
    assert decide("b", reading).take == frozenset()  # b waits for a's release


def test_a_starting_instance_takes_its_share_only_once_it_is_ready_for_it() -> None:
    """A voluntary hand-over goes to an instance that knows the fabric, never before."""
    all_four = frozenset({1, 2, 3, 4})
    owners = {d: ("a" if i % 2 else "b") for i, d in enumerate(sorted(all_four))}
    instances = {"a": all_four, "b": all_four, "c": all_four}
    warming = {"a": all_four, "b": all_four, "c": frozenset[int]()}
    assert assign(instances, owners, warming) == owners  # c follows, masters nothing yet
    # Ready for one switch only: it may take that one, nothing else.
    one = min(all_four)
    partly = assign(instances, owners, {**warming, "c": frozenset({one})})
    assert {d for d, o in partly.items() if o == "c"} <= {one}
    # Ready for all: its share moves to it (and only its share).
    ready = assign(instances, owners, {**warming, "c": all_four})
    assert counts(ready).get("c") == 1 and counts(ready) == counts(assign(instances, owners))
    # A switch without a live owner goes to a ready instance, else to anyone at all.
    assert assign({"a": all_four, "c": all_four}, {}, {"a": frozenset(), "c": all_four})[one] == "c"
    alone = assign({"c": all_four}, {}, {"c": frozenset()})
    assert alone == dict.fromkeys(all_four, "c")


def test_decide_leaves_a_switch_with_its_live_owner_while_the_newcomer_warms_up() -> None:
    both = frozenset({1, 2})
    reading = Reading(
        {"a": both, "b": both},
        owners={1: Owner("a", 3), 2: Owner("a", 4)},
        ready={"a": both, "b": frozenset()},
    )
    assert decide("a", reading).release == frozenset()
    ready = Reading(reading.instances, reading.owners, ready={"a": both, "b": both})
    assert len(decide("a", ready).release) == 1
