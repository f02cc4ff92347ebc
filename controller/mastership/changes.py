"""Mastership changes as others see them: stream events and the ``flowlane_switch_master`` gauge.

The lease keeper says what it did each renewal (took a switch, released it, was
refused by it) and which role each connected switch has now; this module turns
that into ``mastership`` events (written through the Redis link's outbox, so
they are held while Redis is down and keep their order with the other events)
and into one gauge series per connected switch, which the
``FlowlaneSwitchWithoutMaster`` alert reads across every instance.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from controller.mastership.decide import Role

EVENT_KIND = "mastership"

ChangeOp = Literal["took", "released", "stepped-down"]


@dataclass(frozen=True)
class Change:
    """One thing an instance did with one switch's mastership."""

    op: ChangeOp
    dpid: int
    instance: str
    generation: int
    other: str | None = None
    """took: the instance whose owner record it replaced (a dead one, or None when the
    switch had no owner); released: the instance the switch is assigned to now."""
    reason: str = ""

    def data(self) -> dict[str, Any]:
        """The event's data (kind ``mastership``)."""
        data: dict[str, Any] = {
            "op": self.op,
            "switch": f"{self.dpid:016x}",
            "instance": self.instance,
            "generation": self.generation,
        }
        if self.op == "took":
            data["from"] = self.other
        elif self.op == "released":
            data["to"] = self.other
        if self.reason:
            data["reason"] = self.reason
        return data


class MasterGauge(Protocol):
    """What ``MastershipReport`` needs of ``ControllerMetrics.switch_master``."""

    def labels(self, *values: str) -> Any: ...

    def remove(self, *values: str) -> None: ...


class MastershipReport:
    """The keeper's observer; called on the heartbeat thread only."""

    def __init__(
        self,
        record: Callable[[Sequence[Change]], None] | None = None,
        gauge: MasterGauge | None = None,
    ) -> None:
        self._record = record
        self._gauge = gauge
        self._shown: set[str] = set()

    def changed(self, changes: Sequence[Change]) -> None:
        if changes and self._record is not None:
            self._record(changes)

    def published(self, roles: Mapping[int, Role]) -> None:
        """One series per connected switch: 1 while this instance masters it, else 0; the
        series of a switch no longer connected goes, so only connected switches count."""
        if self._gauge is None:
            return
        shown = {f"{dpid:016x}": role for dpid, role in roles.items()}
        for tag in self._shown - shown.keys():
            self._gauge.remove(tag)
        for tag, role in shown.items():
            self._gauge.labels(tag).set(1 if role.name == "master" else 0)
        self._shown = set(shown)
