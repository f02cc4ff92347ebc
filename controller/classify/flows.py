"""What the counting table reports: one learned entry per TCP/UDP flow direction.

OVS learns each flow that no rule claims into a counting table, with no
controller round trip; the controller reads that table's statistics every
interval and hands them here as ``CounterSample`` values.

``CounterSample`` is a named tuple, like ``FlowId`` (``controller.flowid``), for
speed: the detector handles every sampled flow on every poll, and
tuple hashing and equality run in C.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from controller.flowid import FlowId


class CounterSample(NamedTuple):
    """One learned entry's statistics at a poll.

    ``age_s`` is the entry's ``duration``: the time since it was learned, that
    is since the flow's first packet, so ``now - age_s`` dates the flow even
    when the controller first sees it late.
    """

    flow: FlowId
    bytes: int
    packets: int
    age_s: float


class FlowState(StrEnum):
    TRACKED = "tracked"
    """Counted, in the default class."""

    ELEPHANT = "elephant"
    """Moved to the elephant class by an exact-match override."""


@dataclass(frozen=True, slots=True)
class FlowView:
    """What the detector knows of one flow it tracks: its state, on the detector's clock.

    Not the published record: ``observed_flows`` derives the ``ObservedFlow``
    (class, why, wall-clock times) from it, and ``FlowRecord.observed`` the
    record Redis, the API and the CLI share.
    """

    flow: FlowId
    bytes: int
    """Bytes the counting entry has seen (the current entry, if it was re-learned)."""

    rate_bps: float
    """Bit/s over the last polling interval."""

    first_seen: float
    """When the flow's first packet was counted (the counting entry was learned)."""

    last_seen: float
    """The last poll at which its byte counter had grown."""

    state: FlowState
