"""The audit's turn: one switch at a time, each once per interval."""

from __future__ import annotations

from controller.openflow.audit import audit_step_s, next_in_turn


def test_switches_take_turns_in_dpid_order_and_wrap() -> None:
    dpids = {0xA, 0x3, 0x7}
    seen = []
    last = None
    for _ in range(7):
        last = next_in_turn(dpids, last)
        seen.append(last)
    assert seen == [0x3, 0x7, 0xA, 0x3, 0x7, 0xA, 0x3]


def test_a_switch_that_leaves_or_joins_changes_the_turn_not_its_order() -> None:
    assert next_in_turn({1, 5}, 3) == 5  # 3 left: its successor is next
    assert next_in_turn({1, 2, 3, 9}, 3) == 9  # 9 joined after the last one audited
    assert next_in_turn({1, 2}, 2) == 1


def test_no_switch_no_audit() -> None:
    assert next_in_turn([], None) is None
    assert next_in_turn([], 4) is None


def test_each_switch_once_per_interval() -> None:
    assert audit_step_s(5.0, 10) == 0.5
    assert audit_step_s(5.0, 1) == 5.0
    assert audit_step_s(5.0, 0) == 5.0  # nothing to audit: look again after an interval
