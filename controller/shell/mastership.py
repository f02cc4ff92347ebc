"""The mastership actor: each served switch's actor is told its role, once per change.

The lease keeper (``controller.mastership.keeper``) publishes the roles of this
instance's switches every renewal; the registry says when the set of served
connections changed; switch actors say when their switch refused them as master.
This actor alone remembers what each switch actor was told, so a role reaches
the actor serving the switch now (a reconnection gets it again) and a renewal
that changes nothing tells nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from controller.mastership.decide import Role
from controller.switch.events import RoleChanged


class ServedSwitch(Protocol):
    """What this actor needs of the registry's ``Served`` record."""

    @property
    def ref(self) -> Any: ...


@dataclass(frozen=True)
class Assigned:
    """The roles of one renewal (from the keeper, on the heartbeat thread)."""

    roles: Mapping[int, Role]


@dataclass(frozen=True)
class ServedChanged:
    """The registry replaced its ``served`` mapping."""


@dataclass(frozen=True)
class Refused:
    """A switch refused this instance as master (a switch actor's ``SteppedDown``)."""

    dpid: int


MastershipEvent = Assigned | ServedChanged | Refused


class Mastership:
    """Runs as one actor."""

    def __init__(
        self,
        served: Callable[[], Mapping[int, ServedSwitch]],
        wake: Callable[[], None],
        refused: Callable[[int], None],
    ) -> None:
        self._served = served
        self._wake = wake
        self._refused = refused
        self._roles: dict[int, Role] = {}
        self._told: dict[int, tuple[object, Role]] = {}
        self.masters: frozenset[int] = frozenset()
        """Switches this instance was assigned as master (read by other threads: the
        fabric's packet-outs go only through them; replaced whole, never mutated)."""

    def receive(self, event: MastershipEvent) -> None:
        if isinstance(event, Assigned):
            self._roles = dict(event.roles)
            self.masters = frozenset(d for d, r in self._roles.items() if r.name == "master")
        elif isinstance(event, Refused):
            self._told.pop(event.dpid, None)  # its next role is told even if unchanged
            self._refused(event.dpid)
            return
        served = self._served()
        unknown = False
        for dpid, record in served.items():
            role = self._roles.get(dpid)
            if role is None:
                unknown = True  # a new switch: renew now rather than at the next beat
                continue
            ref = record.ref
            told = self._told.get(dpid)
            if told is None or told[0] is not ref or told[1] != role:
                ref.tell(RoleChanged(role.name, role.generation))
                self._told[dpid] = (ref, role)
        for dpid in [d for d in self._told if d not in served]:
            del self._told[dpid]
        if unknown and isinstance(event, ServedChanged):
            self._wake()
