"""The mastership actor: each served switch's actor is told its role once per change."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from controller.actors.manual import ManualRuntime
from controller.mastership.decide import Role
from controller.shell.mastership import Assigned, Mastership, Refused, ServedChanged
from controller.switch.events import RoleChanged


@dataclass
class FakeRef:
    told: list[Any] = field(default_factory=list)

    def tell(self, event: Any) -> None:
        self.told.append(event)


@dataclass(frozen=True)
class Record:
    ref: FakeRef


def roles_told(ref: FakeRef) -> list[tuple[str, int]]:
    return [(e.role, e.generation_id) for e in ref.told if isinstance(e, RoleChanged)]


def test_roles_reach_the_serving_actor_once_per_change_and_new_switches_wake_the_keeper() -> None:
    runtime = ManualRuntime(raise_errors=True)
    served: dict[int, Record] = {}
    wakes: list[int] = []
    refused: list[int] = []
    actor = Mastership(lambda: served, lambda: wakes.append(1), refused.append)
    ref = runtime.spawn("mastership", actor)
    first = FakeRef()
    served[1] = Record(first)
    ref.tell(ServedChanged())
    runtime.run_until_idle()
    assert wakes == [1] and first.told == []  # no role known yet: renew now
    ref.tell(Assigned({1: Role("master", 4)}))
    ref.tell(Assigned({1: Role("master", 4)}))  # a renewal that changes nothing
    runtime.run_until_idle()
    assert roles_told(first) == [("master", 4)]
    # The switch reconnects: the new actor is told the same role.
    second = FakeRef()
    served[1] = Record(second)
    ref.tell(ServedChanged())
    runtime.run_until_idle()
    assert roles_told(second) == [("master", 4)] and wakes == [1]
    # It refused us: the keeper hears of it, and the next word is told even if the same.
    ref.tell(Refused(1))
    ref.tell(Assigned({1: Role("master", 4)}))
    runtime.run_until_idle()
    assert refused == [1] and roles_told(second) == [("master", 4), ("master", 4)]
    ref.tell(Assigned({1: Role("slave", 5)}))
    runtime.run_until_idle()
    assert roles_told(second)[-1] == ("slave", 5)
    assert roles_told(first) == [("master", 4)]
