"""How often a controller beats, and how old a beat may be before it counts as dead.

The two numbers live together because they only make sense as a pair: the
API's readiness and every "live switch" view drop a controller whose last
heartbeat is older than ``CONTROLLER_MAX_AGE_S``, so that has to be a few
beats, not one (a single late beat must not make a busy controller flap),
and few enough that ``/readyz`` turns 503 within a few seconds of the last
controller dying.  The controller beats from a thread of its own, so a long
sync or a large policy being parsed never delays a beat.

Heartbeats are unix times written by the controller's host and compared
with the API host's clock: keep the hosts' clocks in sync (NTP) to well
under a second.
"""

from __future__ import annotations

from typing import Final

HEARTBEAT_INTERVAL_S: Final = 1.0
"""How often a controller writes its heartbeat."""

MISSED_BEATS: Final = 3
"""Beats a controller may miss (Redis hiccup, GC pause, loaded host) and still count as live."""

CONTROLLER_MAX_AGE_S: Final = HEARTBEAT_INTERVAL_S * MISSED_BEATS
"""A controller whose heartbeat is older than this is gone, and so are its switches."""
