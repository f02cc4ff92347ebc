"""Statistics: nearest-rank percentiles, thinned CDFs, Jain's index and throughput timelines."""

from __future__ import annotations

import bisect
import itertools
import math
import random
from fractions import Fraction

import pytest
from flowlane_bench.suite.stats import Span, cdf_points, jain_index, percentile, throughput_series


def nearest_rank(sorted_values: list[float], pct: float) -> float:
    """The definition: the smallest value with at least ``pct`` % of the values at or below it.

    Exact arithmetic (the percentage as the decimal it is written as), so no rounding decides.
    """
    share = Fraction(str(pct)) / 100
    n = len(sorted_values)
    for value in sorted_values:
        if Fraction(bisect.bisect_right(sorted_values, value), n) >= share:
            return value
    raise AssertionError("unreachable: 100 % is always reached")


# --------------------------------------------------------------------------------------------
# percentile
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 7, 10, 99, 101, 250])
@pytest.mark.parametrize("pct", [1, 10, 25, 50, 90, 95, 99, 99.9, 100])
def test_percentile_matches_nearest_rank_on_random_data(n: int, pct: float) -> None:
    rng = random.Random(n * 1000 + int(pct * 10))
    values = sorted(rng.uniform(0, 100) for _ in range(n))
    assert percentile(values, pct) == nearest_rank(values, pct)


@pytest.mark.parametrize(("n", "pct"), [(1000, 99.9), (4000, 99.9), (100, 7), (50, 14)])
def test_percentile_is_exact_where_the_float_product_overshoots(n: int, pct: float) -> None:
    """BUG: ``ceil(pct / 100 * n)`` in floating point overshoots exact ranks by one.

    ``99.9 / 100 * 1000`` is ``999.0000000000001``, so p99.9 of 1000 samples
    (or of 4000, which a 20 s run at 200 requests/s produces) is one rank too
    high; ``percentile`` subtracts 1e-9 before ``ceil`` for this reason.
    """
    values = [float(i) for i in range(1, n + 1)]
    assert percentile(values, pct) == nearest_rank(values, pct)


def test_percentile_known_values() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    assert percentile(values, 50) == 5.0
    assert percentile(values, 51) == 6.0
    assert percentile(values, 90) == 9.0
    assert percentile(values, 99) == 10.0
    assert percentile(values, 100) == 10.0
    assert percentile(values, 0.01) == 1.0
    assert percentile(values, 0) == 1.0  # p0 is the minimum (rank 1), as nearest rank defines it
    assert percentile([3.5], 50) == 3.5


def test_percentile_with_repeated_values() -> None:
    values = [1.0, 1.0, 1.0, 2.0]
    assert percentile(values, 75) == 1.0
    assert percentile(values, 76) == 2.0


@pytest.mark.parametrize("pct", [-1, -1e-9, 100.5])
def test_percentile_out_of_range(pct: float) -> None:
    with pytest.raises(ValueError, match="percentile must be in"):
        percentile([1.0, 2.0], pct)


def test_percentile_of_nothing() -> None:
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


# --------------------------------------------------------------------------------------------
# cdf_points
# --------------------------------------------------------------------------------------------


def test_cdf_of_few_values_keeps_them_all() -> None:
    assert cdf_points([3.0, 1.0, 2.0, 4.0]) == [(1.0, 0.25), (2.0, 0.5), (3.0, 0.75), (4.0, 1.0)]


def test_cdf_of_nothing() -> None:
    assert cdf_points([]) == []


@pytest.mark.parametrize("n", [1, 50, 399, 400, 401, 1000, 10_000, 123_457])
def test_cdf_shape(n: int) -> None:
    rng = random.Random(n)
    values = [rng.expovariate(1.0) for _ in range(n)]
    points = cdf_points(values)
    xs = [x for x, _ in points]
    ys = [y for _, y in points]
    assert xs == sorted(xs)
    assert all(a < b for a, b in itertools.pairwise(ys))
    assert points[-1] == (max(values), 1.0)
    assert points[0] == (min(values), 1 / n)
    assert len(points) <= 401  # at most max_points, plus the maximum after thinning a huge tail
    assert len(points) == n if n <= 400 else len(points) >= 200
    # distinct values: each point's fraction is the share of values at or below it
    ordered = sorted(values)
    for x, y in points[:: max(1, len(points) // 25)]:
        assert y == pytest.approx(bisect.bisect_right(ordered, x) / n)


@pytest.mark.parametrize(("n", "max_points"), [(1000, 400), (10_000, 400), (20_000, 1000)])
def test_cdf_keeps_the_whole_top_percent(n: int, max_points: int) -> None:
    values = [float(i) for i in range(n)]
    points = cdf_points(reversed(values), max_points=max_points)
    tail = n // 100
    assert points[-tail:] == [(float(rank), (rank + 1) / n) for rank in range(n - tail, n)]
    assert len(points) <= max_points


def test_cdf_max_points_thins_evenly() -> None:
    values = [float(i) for i in range(10_000)]
    points = cdf_points(values, max_points=100)
    assert len(points) <= 101
    assert points[-1] == (9999.0, 1.0)
    body = [x for x, _ in points if x < 9900]
    gaps = {b - a for a, b in itertools.pairwise(body)}
    assert len(gaps) == 1  # even in rank


def test_cdf_with_repeated_values_is_monotone() -> None:
    values = [1.0] * 500 + [2.0] * 400 + [50.0] * 100
    points = cdf_points(values, max_points=50)
    assert [x for x, _ in points] == sorted(x for x, _ in points)
    assert points[-1] == (50.0, 1.0)


# --------------------------------------------------------------------------------------------
# jain_index
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 5, 32])
def test_jain_equal_shares_is_one(n: int) -> None:
    assert jain_index([7.5e6] * n) == pytest.approx(1.0)


@pytest.mark.parametrize("n", [2, 4, 10])
def test_jain_one_takes_all_is_one_over_n(n: int) -> None:
    assert jain_index([0.0] * (n - 1) + [1e9]) == pytest.approx(1 / n)


def test_jain_known_value() -> None:
    # (1 + 3)^2 / (2 * (1 + 9)) = 16 / 20
    assert jain_index([1.0, 3.0]) == pytest.approx(0.8)


def test_jain_all_zero_is_fair() -> None:
    assert jain_index([0.0, 0.0, 0.0]) == 1.0


def test_jain_of_nothing() -> None:
    with pytest.raises(ValueError, match="no values"):
        jain_index([])


def test_jain_is_scale_free() -> None:
    shares = [3.0, 5.0, 11.0]
    assert jain_index(shares) == pytest.approx(jain_index([s * 1e6 for s in shares]))


# --------------------------------------------------------------------------------------------
# throughput_series
# --------------------------------------------------------------------------------------------


def total_bytes(series: list[tuple[float, float]], interval_s: float) -> float:
    return sum(bps * interval_s / 8 for _, bps in series)


def test_buckets_are_labelled_by_their_middle() -> None:
    series = throughput_series([], origin=100.0, length_s=2.0, interval_s=0.5)
    assert series == [(0.25, 0.0), (0.75, 0.0), (1.25, 0.0), (1.75, 0.0)]


def test_partial_last_bucket_is_kept() -> None:
    assert len(throughput_series([], 0.0, 2.1, 0.5)) == 5
    assert len(throughput_series([], 0.0, 3.0, 1.0)) == 3


def test_span_inside_one_bucket_is_bits_per_second() -> None:
    series = throughput_series([Span(10.1, 10.4, 1_000)], origin=10.0, length_s=1.0)
    assert series == [(0.25, 16_000.0), (0.75, 0.0)]


def test_span_spread_over_buckets_sums_back_to_its_bytes() -> None:
    span = Span(1000.2, 1002.7, 2_500_000)  # 1 MB/s for 2.5 s
    series = throughput_series([span], origin=1000.0, length_s=4.0, interval_s=0.5)
    assert total_bytes(series, 0.5) == pytest.approx(2_500_000)
    rates = [bps for _, bps in series]
    assert rates[0] == pytest.approx(0.6 * 8e6)  # 0.2-0.5: 0.3 s of 0.5
    assert rates[1:5] == pytest.approx([8e6] * 4)
    assert rates[5] == pytest.approx(0.4 * 8e6)  # 2.5-2.7
    assert rates[6:] == [0.0, 0.0]


def test_many_spans_add_up() -> None:
    rng = random.Random(7)
    spans = []
    for _ in range(200):
        start = rng.uniform(0, 9)
        spans.append(Span(start, start + rng.uniform(0.01, 1.0), rng.randrange(1, 10**6)))
    series = throughput_series(spans, origin=0.0, length_s=10.0, interval_s=0.25)
    assert total_bytes(series, 0.25) == pytest.approx(sum(s.bytes for s in spans))


def test_instant_span_lands_in_one_bucket() -> None:
    series = throughput_series(
        [Span(5.7, 5.7, 4_000), Span(5.9, 5.8, 1_000)], origin=5.0, length_s=1.5
    )
    assert [bps for _, bps in series] == [0.0, 5_000 * 8 / 0.5, 0.0]


def test_spans_outside_the_window_are_ignored() -> None:
    spans = [
        Span(90.0, 99.0, 10**6),  # before the origin
        Span(99.5, 99.5, 10**6),  # an instant before it
        Span(103.0, 104.0, 10**6),  # after the end
        Span(102.0, 102.0, 10**6),  # an instant at the end
    ]
    series = throughput_series(spans, origin=100.0, length_s=2.0)
    assert all(bps == 0.0 for _, bps in series)


def test_span_straddling_the_window_counts_only_its_inside() -> None:
    series = throughput_series([Span(99.0, 101.0, 2_000)], origin=100.0, length_s=2.0)
    assert total_bytes(series, 0.5) == pytest.approx(1_000)
    assert [bps for _, bps in series] == pytest.approx([8_000.0, 8_000.0, 0.0, 0.0])


@pytest.mark.parametrize(("length", "interval"), [(0, 0.5), (-1, 0.5), (5, 0), (5, -0.5)])
def test_throughput_rejects_non_positive_sizes(length: float, interval: float) -> None:
    with pytest.raises(ValueError, match="positive"):
        throughput_series([], 0.0, length, interval)


def test_bucket_count_tolerates_float_noise() -> None:
    # 0.3 / 0.1 is 2.9999999999999996 in floating point: still three buckets, not four or two
    assert len(throughput_series([], 0.0, 0.3, 0.1)) == 3
    assert math.isclose(throughput_series([], 0.0, 0.3, 0.1)[-1][0], 0.25)
