"""What the app tells the rest of the controller about switches (Redis, for one).

The app depends on this protocol, not on Redis, so it runs the same with or
without a store and its tests need none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from controller.classify.records import ObservedFlow, Reclassification
from controller.fabric.snapshot import FabricEvent, FabricSnapshot
from controller.pipeline.flows import FlowEntry
from controller.pipeline.groups import GroupEntry, MeterEntry
from controller.pipeline.plan import PortState, SwitchInputs
from controller.qos.plan import PortQos
from controller.qos.telemetry import QueueStats

__all__ = [
    "ObservedFlow",
    "PortState",
    "Reclassification",
    "SwitchObserver",
    "SyncReport",
]


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
    groups: tuple[GroupEntry, ...] = ()
    """The groups the switch holds as of the same barrier."""
    meters: tuple[MeterEntry, ...] = ()
    """The meters the switch holds as of the same barrier."""
    inputs: SwitchInputs | None = None
    """What the plan of ``flows``, ``groups`` and ``meters`` was computed from, besides the
    policy and jobs: the API's dry run plans a candidate policy from the same inputs."""


class SwitchObserver(Protocol):
    def switch_synced(self, report: SyncReport) -> None: ...

    def switch_gone(self, dpid: int) -> None: ...

    def flows_reclassified(self, changes: list[Reclassification]) -> None: ...

    def flows_observed(self, dpid: int, flows: list[ObservedFlow]) -> None:
        """The counted flows of one switch, for the live flow view."""
        ...

    def fabric_changed(self, snapshot: FabricSnapshot) -> None:
        """Topology, link load and pinned flows (fabric forwarding only)."""
        ...

    def fabric_events(self, events: list[FabricEvent]) -> None:
        """Links and hosts coming and going, placements and reroutes."""
        ...

    def queues_observed(self, dpid: int, queues: list[QueueStats]) -> None:
        """The switch's port queues by class, read from their HTB classes (every second)."""
        ...

    def queue_drops(self, dpid: int, dropped: list[tuple[QueueStats, int]]) -> None:
        """Queues of a latency class that started dropping, with how many they dropped."""
        ...

    def switch_refused(self, dpid: int, address: str, reason: str) -> None:
        """A connection claimed the datapath id of a live switch and was closed."""
        ...
