"""The switch's ``replace`` gives what ``dataclasses.replace`` gives, for every kind of class."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

import pytest

from controller.switch.fastreplace import replace


@dataclass(frozen=True)
class Plain:
    a: int
    b: tuple[int, ...] = ()
    c: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Slotted:
    a: int
    b: int = 0


@dataclass(frozen=True)
class Checked:
    a: int

    def __post_init__(self) -> None:
        if self.a < 0:
            raise ValueError("negative")


@dataclass(frozen=True)
class Cached:
    a: int

    @functools.cached_property
    def double(self) -> int:
        return 2 * self.a


def test_a_plain_frozen_value_is_copied_with_its_changes() -> None:
    old = Plain(1, (2,), {"x": 3})
    new = replace(old, a=5)
    assert new == dataclasses.replace(old, a=5) == Plain(5, (2,), {"x": 3})
    assert type(new) is Plain and old.a == 1
    assert new.c is old.c  # shared, as dataclasses.replace shares it
    with pytest.raises(dataclasses.FrozenInstanceError):
        new.a = 6  # type: ignore[misc]


def test_other_classes_go_through_dataclasses_replace() -> None:
    assert replace(Slotted(1), b=2) == Slotted(1, 2)
    with pytest.raises(ValueError, match="negative"):
        replace(Checked(1), a=-1)  # __post_init__ still runs
    cached = Cached(2)
    assert cached.double == 4
    assert replace(cached, a=3).double == 6  # the cache is not copied


def test_a_field_that_does_not_exist_is_refused() -> None:
    with pytest.raises(TypeError):
        replace(Plain(1), nope=2)  # type: ignore[call-arg]
