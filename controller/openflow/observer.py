"""What the app tells the rest of the controller about switches (Redis, for one).

The app depends on this protocol, not on Redis, so it runs the same with or
without a store and its tests need none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

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


class SwitchObserver(Protocol):
    def switch_synced(self, report: SyncReport) -> None: ...

    def switch_gone(self, dpid: int) -> None: ...
