"""Statistics the report is made of: percentiles, CDFs, Jain's index and throughput timelines."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def percentile(sorted_values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of values sorted ascending: the value of rank ``ceil(pct/100 * n)``.

    The one percentile of flowlane's figures: the report, the benchmarks, and the load
    generator and all-reduce worker in Mininet hosts all call this.  It always returns an
    observed value (no interpolation): p100 is the maximum and p0 the minimum (rank 1).
    """
    if not sorted_values:
        raise ValueError("percentile of no values")
    if not 0 <= pct <= 100:
        raise ValueError(f"percentile must be in [0, 100], got {pct}")
    # 99.9 / 100 * 1000 is 999.0000000000001 in floating point: without the nudge, ceil
    # would take the next rank.
    rank = math.ceil(pct / 100 * len(sorted_values) - 1e-9)
    return sorted_values[max(rank, 1) - 1]


def cdf_points(values: Iterable[float], max_points: int = 400) -> list[tuple[float, float]]:
    """(value, fraction of values <= it), thinned to at most ``max_points`` but keeping the tail.

    The last points (the slowest requests) are what a latency CDF is read for,
    so thinning is even in rank except that the top 1 % is kept whole.
    """
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return []
    tail = max(1, n // 100)
    body_ranks = range(0, n - tail)
    step = max(1, math.ceil(len(body_ranks) / max(1, max_points - min(tail, max_points // 2))))
    ranks = list(body_ranks[::step]) + list(range(n - tail, n))
    if len(ranks) > max_points:  # a huge tail: thin it too, keep the maximum
        ranks = [*ranks[:: math.ceil(len(ranks) / max_points)], n - 1]
    return [(ordered[rank], (rank + 1) / n) for rank in sorted(set(ranks))]


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index: 1 when all are equal, 1/n when one takes everything."""
    if not values:
        raise ValueError("Jain's index of no values")
    total, squares = sum(values), sum(value * value for value in values)
    if squares == 0:
        return 1.0
    return total * total / (len(values) * squares)


@dataclass(frozen=True, slots=True)
class Span:
    """``bytes`` moved evenly between ``start`` and ``end`` (seconds, one clock for all)."""

    start: float
    end: float
    bytes: int


def throughput_series(
    spans: Iterable[Span], origin: float, length_s: float, interval_s: float = 0.5
) -> list[tuple[float, float]]:
    """Bit/s in consecutive ``interval_s`` buckets from ``origin``; (bucket middle, bit/s).

    A span's bytes are spread evenly over its time, so an all-reduce iteration
    longer than a bucket does not show up as one spike.
    """
    if interval_s <= 0 or length_s <= 0:
        raise ValueError("interval and length must be positive")
    count = math.ceil(length_s / interval_s - 1e-9)
    buckets = [0.0] * count
    for span in spans:
        start, end = span.start - origin, span.end - origin
        if end <= start:  # an instant: all of it in one bucket
            index = math.floor(start / interval_s)
            if 0 <= index < count:
                buckets[index] += span.bytes
            continue
        density = span.bytes / (end - start)
        first = max(0, math.floor(start / interval_s))
        last = min(count - 1, math.floor(end / interval_s))
        for index in range(first, last + 1):
            low, high = max(start, index * interval_s), min(end, (index + 1) * interval_s)
            if high > low:
                buckets[index] += density * (high - low)
    return [
        (round((index + 0.5) * interval_s, 3), value * 8 / interval_s)
        for index, value in enumerate(buckets)
    ]
