"""What classification tells the rest of the controller: reclassifications and the flow view.

One record type per concept, shared by the detector's bookkeeping, the
switch worker, the Redis link and the tests.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.classify.flows import FlowId


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
    packets: int = 0
    """Packets counted (0: not known); bytes per packet tells an ACK stream from data."""
