"""What the app tells the rest of the controller about switches (Redis, for one).

The app depends on this protocol, not on Redis, so it runs the same with or
without a store and its tests need none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from controller.classify.flows import FlowId
from controller.pipeline.flows import FlowEntry
from controller.qos.plan import PortQos


@dataclass(frozen=True)
class PortState:
    number: int
    name: str
    link_bps: int | None


@dataclass(frozen=True)
class SyncReport:
    """A switch confirmed (barrier) that it holds ``flows``, planned from ``policy_version``."""

    dpid: int
    policy_version: int | None
    connected_at: float
    ports: tuple[PortState, ...]
    flows: tuple[FlowEntry, ...]
    queues: tuple[PortQos, ...]
    datapath_type: str | None


@dataclass(frozen=True)
class Reclassification:
    """A detected elephant moved to ``to_class``, or released back to ``to_class``."""

    dpid: int
    flow: FlowId
    from_class: str
    to_class: str
    reason: str
    bytes: int
    latency_s: float | None
    """For a demotion: from the flow's first packet to the decision."""


@dataclass(frozen=True)
class ObservedFlow:
    """One counted flow with its class and why it has it (``rule:<name>``, ``job:<name>``,
    ``detected`` or ``default``); times are wall-clock (for people)."""

    flow: FlowId
    traffic_class: str
    why: str
    bytes: int
    rate_bps: float
    first_seen: float
    last_seen: float


class SwitchObserver(Protocol):
    def switch_synced(self, report: SyncReport) -> None: ...

    def switch_gone(self, dpid: int) -> None: ...

    def flows_reclassified(self, changes: list[Reclassification]) -> None: ...

    def flows_observed(self, dpid: int, flows: list[ObservedFlow]) -> None:
        """The counted flows of one switch, for the live flow view."""
        ...
