"""What a probe stream lost: packets, milliseconds of traffic, the longest silence.

The sender (``mininet/flowlane_bench/probe.py send``) numbers its datagrams and sends them on
a fixed schedule, so datagram ``i`` was due at ``start + i / rate``; the
receiver logs each arrival.  A failure shows as missing numbers (lost
packets, and ``lost / rate`` is the outage in milliseconds of traffic) and
as a gap between arrivals.  Windows (one per link event) split the stream on
the sender's clock, so each failure is charged only its own losses.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class ProbeOutputError(ValueError):
    """A probe's output cannot be used; the message says which side and why."""


@dataclass(frozen=True, slots=True)
class ProbeRun:
    """Both ends of one stream: the schedule it was sent on and what arrived, when."""

    rate: int
    start_unix: float
    sent: int
    arrivals: tuple[tuple[int, float], ...]
    """(sequence number, unix arrival time), in arrival order."""


@dataclass(frozen=True, slots=True)
class Loss:
    sent: int
    received: int
    lost: int
    loss_ms: float
    longest_gap_ms: float


def probe_run(sender: Mapping[str, Any], receiver: Mapping[str, Any]) -> ProbeRun:
    """Pair a sender's report with its receiver's; refuse reports that cannot be read."""
    try:
        rate, start, sent = int(sender["rate"]), float(sender["start_unix"]), int(sender["sent"])
        arrivals = tuple((int(seq), float(at)) for seq, at in receiver["arrivals"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ProbeOutputError(f"probe report lacks or garbles {exc}") from None
    if rate <= 0:
        raise ProbeOutputError(f"probe rate must be positive, got {rate}")
    if sent < 0 or any(seq < 0 or seq >= sent for seq, _ in arrivals):
        raise ProbeOutputError(f"the receiver logged numbers the sender never sent ({sent} sent)")
    return ProbeRun(rate, start, sent, arrivals)


def due(run: ProbeRun, seq: int) -> float:
    """When datagram ``seq`` was scheduled (unix time)."""
    return run.start_unix + seq / run.rate


def loss(run: ProbeRun, start: float | None = None, end: float | None = None) -> Loss:
    """Losses among datagrams due in ``[start, end)`` (the whole stream without bounds).

    The longest gap counts the silences that *end* in the window: a failure's
    silence starts about when it happens and ends when the stream is back, so
    it is charged to the failure's window.  Duplicates count once.
    """
    low = 0 if start is None else max(0, math.ceil((start - run.start_unix) * run.rate - 1e-9))
    high = (
        run.sent
        if end is None
        else min(run.sent, max(0, math.ceil((end - run.start_unix) * run.rate - 1e-9)))
    )
    expected = max(0, high - low)
    received = len({seq for seq, _ in run.arrivals if low <= seq < high})
    times = sorted(at for _, at in run.arrivals)
    window_start = run.start_unix if start is None else start
    window_end = math.inf if end is None else end
    gaps = [
        later - earlier
        for earlier, later in itertools.pairwise(times)
        if window_start < later <= window_end
    ]
    lost = expected - received
    return Loss(
        sent=expected,
        received=received,
        lost=lost,
        loss_ms=round(lost / run.rate * 1000, 3),
        longest_gap_ms=round(max(gaps, default=0.0) * 1000, 3),
    )


def windows(run: ProbeRun, bounds: Sequence[float]) -> list[Loss]:
    """``loss`` between consecutive ``bounds`` (unix times); the last window runs to the end."""
    edges = [*bounds, math.inf]
    return [
        loss(run, start, None if end == math.inf else end)
        for start, end in itertools.pairwise(edges)
    ]
