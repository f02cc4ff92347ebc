"""What one poll of the counting table decided: overrides to add, overrides to drop, counts."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from controller.flowid import FlowId


class DemotionReason(StrEnum):
    BYTES = "bytes"
    """The flow has sent ``bytes`` while keeping up ``rate``, before ``for`` was over."""

    RATE = "rate"
    """The flow has kept up ``rate`` for ``for`` without a break."""


class ReleaseReason(StrEnum):
    IDLE = "idle"
    """Its byte counter has not grown for ``release_after``."""

    VANISHED = "vanished"
    """Its counting entry left the table (OVS idle timeout) ``release_after`` ago."""

    CALM = "calm"
    """Still sending, but below ``release_ratio`` of the rate for ``release_after``."""


@dataclass(frozen=True, slots=True)
class Demotion:
    """Install an exact-match override moving ``flow`` to the elephant class."""

    flow: FlowId
    reason: DemotionReason
    bytes: int
    """Bytes sent at or above the rate in the run of windows that made it an elephant."""

    rate_bps: float
    """Bit/s over the last polling interval."""

    latency_s: float
    """From the flow's first packet (or its restart after a release) to this decision."""


@dataclass(frozen=True, slots=True)
class Release:
    """Remove the override of ``flow``: it goes back to the default class."""

    flow: FlowId
    reason: ReleaseReason
    idle_s: float
    """Time since its byte counter last grew."""

    held_s: float
    """How long the override was in place."""


@dataclass(frozen=True, slots=True)
class Decisions:
    """The outcome of one poll; counts are after the poll."""

    demote: tuple[Demotion, ...]
    release: tuple[Release, ...]
    samples: int
    """Entries in this poll of the counting table."""

    tracked: int
    """Flows the detector keeps state for, overrides included (at most ``max_tracked``)."""

    overrides: int
    """Overrides that should be installed now."""

    dropped: int
    """Flows of this poll left untracked because of ``max_tracked`` (0 unless over the limit)."""
