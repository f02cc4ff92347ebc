"""Which switch the audit re-reads next.

The audit re-reads every switch's tables once per interval and repairs what
drifted.  Re-reading all of them at the same instant (ten switches, hundreds
of entries each, decoded by os-ken) takes the controller's CPU for a few
hundred milliseconds, and a policy change that lands then waits for it: it
was the whole tail of the propagation benchmark.  So the audit takes the
switches one at a time, in dpid order, spread evenly over the interval; each
is still re-read once per interval, and a switch that connects or leaves
simply joins or leaves the turn.
"""

from __future__ import annotations

from collections.abc import Iterable


def next_in_turn(dpids: Iterable[int], last: int | None) -> int | None:
    """The connected switch after ``last`` in dpid order (wrapping), None when none is."""
    ordered = sorted(set(dpids))
    if not ordered:
        return None
    if last is not None:
        for dpid in ordered:
            if dpid > last:
                return dpid
    return ordered[0]


def audit_step_s(interval_s: float, switches: int) -> float:
    """The wait between two switches' audits: each switch once per ``interval_s``."""
    return interval_s / max(1, switches)
