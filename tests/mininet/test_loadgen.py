"""Tests for flowlane_bench.loadgen: pure statistics helpers plus a real loopback client/server run.

The load generator runs as ``python -m flowlane_bench.loadgen``, as inside Mininet hosts.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flowlane_bench import loadgen

LOADGEN = [sys.executable, "-m", "flowlane_bench.loadgen"]


# --------------------------------------------------------------------------------------------
# Pure helpers
# --------------------------------------------------------------------------------------------


def test_percentile_nearest_rank_known_values() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert loadgen.percentile(values, 50.0) == 50.0
    assert loadgen.percentile(values, 90.0) == 90.0
    assert loadgen.percentile(values, 99.0) == 99.0
    assert loadgen.percentile(values, 99.9) == 100.0
    assert loadgen.percentile(values, 100.0) == 100.0
    assert loadgen.percentile(values, 0.0) == 1.0


def test_percentile_nearest_rank_small_sets() -> None:
    assert loadgen.percentile([7.0], 50.0) == 7.0
    assert loadgen.percentile([7.0], 99.9) == 7.0
    # n = 4: rank(50) = ceil(2) = 2, rank(90) = ceil(3.6) = 4, rank(25) = 1
    values = [10.0, 20.0, 30.0, 40.0]
    assert loadgen.percentile(values, 50.0) == 20.0
    assert loadgen.percentile(values, 90.0) == 40.0
    assert loadgen.percentile(values, 25.0) == 10.0
    # n = 10: rank(50) = 5 exactly (no float drift pushing it to 6)
    ten = [float(v) for v in range(1, 11)]
    assert loadgen.percentile(ten, 50.0) == 5.0
    assert loadgen.percentile(ten, 90.0) == 9.0


def test_percentile_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        loadgen.percentile([], 50.0)
    with pytest.raises(ValueError):
        loadgen.percentile([1.0], 101.0)


def test_summarize_latencies_known_values() -> None:
    samples = [float(v) for v in range(1000, 0, -1)]  # unsorted on purpose: 1000..1
    summary = loadgen.summarize_latencies(samples)
    assert summary == {
        "p50": 500.0,
        "p90": 900.0,
        "p99": 990.0,
        "p999": 999.0,
        "max": 1000.0,
        "mean": 500.5,
        "min": 1.0,
    }


def test_summarize_latencies_empty_is_all_none() -> None:
    summary = loadgen.summarize_latencies([])
    assert set(summary) == {"p50", "p90", "p99", "p999", "max", "mean", "min"}
    assert all(value is None for value in summary.values())


def test_build_summary_converts_seconds_to_ms_and_counts_errors() -> None:
    summary = loadgen.build_summary(
        latencies_s=[0.001, 0.002, 0.003, 0.004],
        error_kinds={"timeout": 2, "reset": 1, "unused": 0},
        requests_scheduled=7,
        rate_target=3.5,
        duration_s=2.0,
    )
    assert summary["requests_scheduled"] == 7
    assert summary["requests_completed"] == 4
    assert summary["samples"] == 4
    assert summary["errors"] == 3
    assert summary["error_kinds"] == {"reset": 1, "timeout": 2}
    assert summary["rate_target"] == 3.5
    assert summary["rate_achieved"] == 2.0
    assert summary["duration_s"] == 2.0
    latency = summary["latency_ms"]
    assert latency["p50"] == pytest.approx(2.0)
    assert latency["p90"] == pytest.approx(4.0)
    assert latency["min"] == pytest.approx(1.0)
    assert latency["max"] == pytest.approx(4.0)
    assert latency["mean"] == pytest.approx(2.5)
    json.dumps(summary)  # must be serialisable as is


def test_build_summary_without_samples() -> None:
    summary = loadgen.build_summary(
        latencies_s=[],
        error_kinds={"connect_refused": 5},
        requests_scheduled=5,
        rate_target=5.0,
        duration_s=1.0,
    )
    assert summary["samples"] == 0
    assert summary["rate_achieved"] == 0.0
    assert summary["errors"] == 5
    assert all(value is None for value in summary["latency_ms"].values())


def test_plan_schedule_counts() -> None:
    schedule = loadgen.plan_schedule(100.0, 2.0, 0.25)
    assert (schedule.warmup_requests, schedule.measured_requests, schedule.total) == (25, 200, 225)
    # 0.29 * 100 is 28.999999999999996 in floats: must still count 29 requests.
    assert loadgen.plan_schedule(100.0, 0.29, 0.0).measured_requests == 29
    assert loadgen.plan_schedule(10.0, 0.1 * 3, 0.0).measured_requests == 3
    assert loadgen.plan_schedule(10.0, 0.3, 0.0).measured_requests == 3
    assert loadgen.plan_schedule(10.0, 1.0, 0.3).warmup_requests == 3
    assert loadgen.plan_schedule(10.0, 1.0, 0.31).warmup_requests == 4
    assert loadgen.plan_schedule(5.0, 0.5, 0.0).measured_requests == 2  # floor(2.5)
    with pytest.raises(ValueError):
        loadgen.plan_schedule(0.0, 1.0, 0.0)


def test_schedule_offsets_and_round_robin() -> None:
    assert [loadgen.scheduled_offset(i, 200.0) for i in range(3)] == [0.0, 0.005, 0.01]
    # No accumulated drift: offset of request 1e6 at 1000 req/s is exactly 1000 s.
    assert loadgen.scheduled_offset(1_000_000, 1000.0) == 1000.0
    assert list(loadgen.connection_requests(1, 3, 10)) == [1, 4, 7]
    shares = [set(loadgen.connection_requests(c, 3, 10)) for c in range(3)]
    assert set().union(*shares) == set(range(10))
    assert sum(len(s) for s in shares) == 10


def test_measurement_span() -> None:
    assert loadgen.measurement_span(2.0, 10.0, None) == 2.0
    assert loadgen.measurement_span(2.0, 10.0, 11.9) == 2.0
    assert loadgen.measurement_span(2.0, 10.0, 13.0) == pytest.approx(3.0)


# --------------------------------------------------------------------------------------------
# Arrival schedules
# --------------------------------------------------------------------------------------------

_TOL = 1e-9


def _in_off_period(offset: float, on: float, off: float) -> bool:
    """Strictly inside an off-period (borders, up to float noise, count as on)."""
    period = on + off
    phase = offset - math.floor(offset / period) * period
    return on + _TOL < phase < period - _TOL


@pytest.mark.parametrize(
    ("rate", "duration", "warmup"),
    [(100.0, 2.0, 0.25), (100.0, 0.29, 0.0), (10.0, 1.0, 0.31), (5.0, 0.5, 0.0), (7.0, 3.0, 1.0)],
)
def test_plan_arrivals_uniform_without_bursts_is_unchanged(
    rate: float, duration: float, warmup: float
) -> None:
    counts = loadgen.plan_schedule(rate, duration, warmup)
    plan = loadgen.plan_arrivals(rate, duration, warmup)
    assert plan.warmup_requests == counts.warmup_requests
    assert plan.measured_requests == counts.measured_requests
    assert plan.total == counts.total
    assert plan.offsets == tuple(loadgen.scheduled_offset(i, rate) for i in range(counts.total))
    # The measured window still starts at the first measured request (as before).
    assert plan.window_offset == loadgen.scheduled_offset(counts.warmup_requests, rate)
    # The seed only matters for poisson arrivals.
    assert loadgen.plan_arrivals(rate, duration, warmup, seed=99) == plan


@pytest.mark.parametrize(("on", "off"), [(0.0, 0.0), (0.3, 0.2)])
def test_plan_arrivals_poisson_count_close_to_rate(on: float, off: float) -> None:
    rate, duration = 1000.0, 10.0
    # Expected arrivals: rate * on-time in the window (10 s, or 20 cycles of 0.3 s on = 6 s).
    expected = rate * (duration if on == 0 else duration / (on + off) * on)
    for seed in range(5):
        plan = loadgen.plan_arrivals(
            rate, duration, 0.0, arrivals="poisson", seed=seed, burst_on=on, burst_off=off
        )
        # Poisson count: standard deviation sqrt(expected) (~100 or ~77); allow 6 of them.
        assert abs(plan.measured_requests - expected) <= 6 * math.sqrt(expected)
        assert plan.warmup_requests == 0


def test_plan_arrivals_poisson_gaps_have_mean_one_over_rate() -> None:
    rate = 500.0
    plan = loadgen.plan_arrivals(rate, 20.0, 0.0, arrivals="poisson", seed=3)
    gaps = [b - a for a, b in zip(plan.offsets, plan.offsets[1:], strict=False)]
    mean = math.fsum(gaps) / len(gaps)
    # ~10000 exponential gaps: relative standard error of the mean ~1 %, allow 6 %.
    assert mean == pytest.approx(1.0 / rate, rel=0.06)
    # Exponential: about 1 - 1/e of the gaps are shorter than the mean.
    share_short = sum(gap < 1.0 / rate for gap in gaps) / len(gaps)
    assert share_short == pytest.approx(1.0 - math.exp(-1.0), abs=0.03)


def test_plan_arrivals_poisson_reproducible_by_seed() -> None:
    def plan(seed: int) -> Any:
        return loadgen.plan_arrivals(
            50.0, 3.0, 0.5, arrivals="poisson", seed=seed, burst_on=0.3, burst_off=0.2
        )

    assert plan(7) == plan(7)
    assert plan(7).offsets != plan(8).offsets
    assert loadgen.plan_arrivals(50.0, 3.0, 0.0, arrivals="poisson").offsets == (
        loadgen.plan_arrivals(50.0, 3.0, 0.0, arrivals="poisson", seed=1).offsets
    )


@pytest.mark.parametrize("arrivals", ["uniform", "poisson"])
@pytest.mark.parametrize(
    ("warmup", "on", "off"),
    [(0.0, 0.0, 0.0), (0.7, 0.0, 0.0), (0.0, 0.3, 0.2), (0.5, 0.3, 0.2), (0.4, 0.3, 0.2)],
)
def test_plan_arrivals_sorted_split_and_outside_off_periods(
    arrivals: str, warmup: float, on: float, off: float
) -> None:
    rate, duration = 200.0, 3.0
    plan = loadgen.plan_arrivals(
        rate, duration, warmup, arrivals=arrivals, seed=5, burst_on=on, burst_off=off
    )
    offsets = plan.offsets
    assert list(offsets) == sorted(offsets)
    assert plan.total == len(offsets)
    assert plan.measured_requests == plan.total - plan.warmup_requests > 0
    # Warm-up requests precede the window, measured ones lie inside it.
    window = plan.window_offset
    assert warmup - _TOL <= window < warmup + 1.0 / rate
    assert all(t < window for t in offsets[: plan.warmup_requests])
    assert all(window - _TOL <= t < window + duration for t in offsets[plan.warmup_requests :])
    if warmup > 0:
        assert plan.warmup_requests > 0
    if on > 0:
        assert window == warmup
        assert not [t for t in offsets if _in_off_period(t, on, off)]
        # Every on-period of the window gets arrivals (no on-period is skipped).
        cycles = {math.floor(t / (on + off)) for t in offsets}
        assert cycles == set(range(math.ceil((warmup + duration) / (on + off))))


def test_plan_arrivals_uniform_bursts_exact() -> None:
    # 100 req/s during 0.3 s on-periods, every 0.5 s: 30 requests per cycle.
    plan = loadgen.plan_arrivals(100.0, 2.0, 0.5, burst_on=0.3, burst_off=0.2)
    assert plan.warmup_requests == 30  # the first cycle
    assert plan.measured_requests == 120  # four cycles
    assert plan.window_offset == 0.5
    assert plan.offsets[:2] == (0.0, 0.01)
    assert plan.offsets[29:31] == pytest.approx((0.29, 0.5))
    assert plan.offsets[-1] == pytest.approx(2.29)
    # A window that starts in an off-period: nothing before the next on-period starts.
    late = loadgen.plan_arrivals(100.0, 1.0, 0.4, burst_on=0.3, burst_off=0.2)
    assert late.warmup_requests == 30
    assert late.measured_requests == 60  # on-periods [0.5, 0.8) and [1.0, 1.3)
    assert late.offsets[30] == pytest.approx(0.5)


def test_plan_arrivals_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        loadgen.plan_arrivals(0.0, 1.0, 0.0)
    with pytest.raises(ValueError):
        loadgen.plan_arrivals(10.0, -1.0, 0.0)
    with pytest.raises(ValueError):
        loadgen.plan_arrivals(10.0, 1.0, 0.0, arrivals="bursty")
    with pytest.raises(ValueError):
        loadgen.plan_arrivals(10.0, 1.0, 0.0, burst_on=0.3)
    with pytest.raises(ValueError):
        loadgen.plan_arrivals(10.0, 1.0, 0.0, burst_off=0.3)


def test_target_rate() -> None:
    assert loadgen.target_rate(100.0, 0.0, 0.0) == 100.0
    assert loadgen.target_rate(200.0, 0.3, 0.2) == pytest.approx(120.0)
    assert loadgen.target_rate(10.0, 1.0, 3.0) == pytest.approx(2.5)


def test_build_timeline() -> None:
    events = [(0.0, 10), (0.49, 10), (0.5, 7), (-0.001, 1), (2.2, 3)]
    assert loadgen.build_timeline(events, 0.5, 2.0) == [
        (0.0, 3, 21),
        (0.5, 1, 7),
        (1.0, 0, 0),
        (1.5, 0, 0),
        (2.0, 1, 3),  # beyond the span: the timeline grows to the last completion
    ]
    assert loadgen.build_timeline([], 0.5, 1.2) == [(0.0, 0, 0), (0.5, 0, 0), (1.0, 0, 0)]
    with pytest.raises(ValueError):
        loadgen.build_timeline([], 0.0, 1.0)


def test_build_summary_new_keys() -> None:
    timeline = [(0.0, 2, 100), (0.5, 0, 0)]
    summary = loadgen.build_summary(
        latencies_s=[0.0012344, 0.0005],
        error_kinds={},
        requests_scheduled=2,
        rate_target=4.0,
        duration_s=1.0,
        window_start_unix=1700000000.1234567,
        timeline=timeline,
        raw_latencies=True,
    )
    assert summary["window_start_unix"] == pytest.approx(1700000000.123457)
    assert summary["timeline"] == timeline
    assert summary["latencies_ms"] == [1.234, 0.5]  # completion order, microsecond resolution
    json.dumps(summary)
    plain = loadgen.build_summary(
        latencies_s=[0.001], error_kinds={}, requests_scheduled=1, rate_target=1.0, duration_s=1.0
    )
    assert "latencies_ms" not in plain
    assert plain["timeline"] == []


# --------------------------------------------------------------------------------------------
# CLI validation
# --------------------------------------------------------------------------------------------

_CLIENT_ARGS = (
    *("client", "--host", "127.0.0.1", "--port", "1", "--rate", "10", "--duration", "1"),
    *("--request-bytes", "1", "--response-bytes", "1", "--connections", "1"),
)


def test_parse_args_defaults() -> None:
    args = loadgen.parse_args(list(_CLIENT_ARGS))
    assert args.arrivals == "uniform"
    assert args.seed == 1
    assert (args.burst_on, args.burst_off) == (0.0, 0.0)
    assert args.timeline_interval == 0.5
    assert args.raw_latencies is False
    args = loadgen.parse_args(
        [
            *_CLIENT_ARGS,
            *("--arrivals", "poisson", "--seed", "9", "--raw-latencies"),
            *("--burst-on", "0.3", "--burst-off", "0.2", "--timeline-interval", "0.1"),
        ]
    )
    assert (args.arrivals, args.seed, args.raw_latencies) == ("poisson", 9, True)
    assert (args.burst_on, args.burst_off, args.timeline_interval) == (0.3, 0.2, 0.1)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--burst-on", "0.3"], "--burst-on and --burst-off go together"),
        (["--burst-off", "0.2"], "--burst-on and --burst-off go together"),
        (["--burst-on", "0.3", "--burst-off", "0"], "--burst-on and --burst-off go together"),
        (["--burst-on", "-1", "--burst-off", "0.2"], "must be >= 0"),
        (["--arrivals", "bursty"], "invalid choice"),
        (["--seed", "x"], "--seed"),
        (["--timeline-interval", "0"], "must be a positive number"),
    ],
)
def test_parse_args_errors(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as excinfo:
        loadgen.main([*_CLIENT_ARGS, *extra])  # fails in parsing, before any connection
    assert excinfo.value.code == 2
    assert message in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# Subprocess runs on loopback
# --------------------------------------------------------------------------------------------


def _stop(proc: subprocess.Popen[str]) -> int | None:
    """Stop one process we started, by its PID: SIGTERM, then SIGKILL if it lingers."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
    return proc.returncode


@pytest.fixture
def server() -> Iterator[tuple[subprocess.Popen[str], int]]:
    """A loadgen server on 127.0.0.1, on a port picked by the kernel (``--port 0``)."""
    proc = subprocess.Popen(
        [*LOADGEN, "server", "--host", "127.0.0.1", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()  # blocks until the server is bound (or dies)
        assert line.startswith("listening 127.0.0.1:"), (line, proc.poll())
        port = int(line.rsplit(":", 1)[1])
        assert port > 0
        yield proc, port
    finally:
        _stop(proc)
        if proc.stdout is not None:
            proc.stdout.close()
        if proc.stderr is not None:
            proc.stderr.close()


def _run_client(port: int, *extra: str, timeout: float = 15.0) -> tuple[int, dict[str, Any], str]:
    cmd = [*LOADGEN, "client", "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(
        [*cmd, *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        _stop(proc)
    return proc.returncode, json.loads(out), err


@pytest.mark.timeout(20)
def test_client_against_server(server: tuple[subprocess.Popen[str], int], tmp_path: Path) -> None:
    proc, port = server
    output = tmp_path / "result.json"
    rc, result, err = _run_client(
        port,
        *("--rate", "100", "--duration", "2", "--warmup", "0.2", "--connections", "2"),
        *("--request-bytes", "256", "--response-bytes", "1024", "--timeout", "2"),
        *("--output", str(output)),
    )
    assert rc == 0, err
    assert json.loads(output.read_text(encoding="utf-8")) == result
    assert set(result) == {
        "requests_scheduled",
        "requests_completed",
        "errors",
        "error_kinds",
        "rate_target",
        "rate_achieved",
        "duration_s",
        "latency_ms",
        "samples",
        "window_start_unix",
        "timeline",
    }
    assert result["requests_scheduled"] == 200
    assert result["errors"] == 0, result["error_kinds"]
    assert result["error_kinds"] == {}
    assert result["requests_completed"] >= 0.95 * result["requests_scheduled"]
    assert result["requests_completed"] + result["errors"] == result["requests_scheduled"]
    assert result["samples"] == result["requests_completed"]
    assert result["rate_target"] == 100.0
    assert result["rate_achieved"] == pytest.approx(100.0, rel=0.1)
    latency = result["latency_ms"]
    assert 0 < latency["min"] <= latency["p50"] <= latency["p90"] <= latency["p99"]
    assert latency["p99"] <= latency["p999"] <= latency["max"]
    assert latency["p50"] < 50.0
    assert latency["p99"] >= latency["p50"]
    assert math.isfinite(latency["mean"])

    # The server survives the client, then exits cleanly on SIGTERM sent to its PID.
    assert proc.poll() is None
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=5) == 0


@pytest.mark.timeout(20)
def test_client_against_closed_port_reports_errors() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again when the block ends: nothing listens there
    rc, result, err = _run_client(
        port,
        *("--rate", "50", "--duration", "0.5", "--connections", "2"),
        *("--request-bytes", "16", "--response-bytes", "16", "--timeout", "1"),
    )
    assert rc != 0
    assert "Traceback" not in err
    assert result["requests_scheduled"] == 25
    assert result["errors"] == 25
    assert result["requests_completed"] == 0
    assert result["samples"] == 0
    assert sum(result["error_kinds"].values()) == result["errors"]
    assert all(value is None for value in result["latency_ms"].values())


@pytest.mark.timeout(30)
def test_client_poisson_bursts_against_server(server: tuple[subprocess.Popen[str], int]) -> None:
    _, port = server
    rate, duration, warmup, on, off, interval = 200.0, 2.0, 0.5, 0.3, 0.2, 0.05
    request_bytes, response_bytes = 100, 300
    before = time.time()
    rc, result, err = _run_client(
        port,
        *("--rate", str(rate), "--duration", str(duration), "--warmup", str(warmup)),
        *("--connections", "2", "--timeout", "5"),
        *("--request-bytes", str(request_bytes), "--response-bytes", str(response_bytes)),
        *("--arrivals", "poisson", "--burst-on", str(on), "--burst-off", str(off)),
        *("--timeline-interval", str(interval), "--raw-latencies"),
        timeout=25.0,
    )
    after = time.time()
    assert rc == 0, err
    assert {"window_start_unix", "timeline", "latencies_ms"} <= set(result)

    # The schedule is a pure function of the arguments (seed 1 by default): exact count.
    plan = loadgen.plan_arrivals(
        rate, duration, warmup, arrivals="poisson", seed=1, burst_on=on, burst_off=off
    )
    assert result["requests_scheduled"] == plan.measured_requests > 0
    assert result["requests_completed"] + result["errors"] == result["requests_scheduled"]
    assert result["requests_completed"] >= 0.9 * result["requests_scheduled"], result
    assert result["rate_target"] == pytest.approx(rate * on / (on + off))
    assert before < result["window_start_unix"] < after

    latencies = result["latencies_ms"]
    timeline = result["timeline"]
    assert len(latencies) == result["samples"] == result["requests_completed"]
    assert latencies and all(value > 0 for value in latencies)
    assert max(latencies) == pytest.approx(result["latency_ms"]["max"], abs=1e-3)
    assert sum(completed for _, completed, _ in timeline) == result["requests_completed"]
    per_request = 8 + request_bytes + 4 + response_bytes  # headers included
    assert all(size == completed * per_request for _, completed, size in timeline)
    assert len(timeline) >= round(duration / interval)
    for index, (offset, _, _) in enumerate(timeline):
        assert offset == pytest.approx(index * interval)

    # Buckets entirely inside an off-period. latencies_ms is in completion order, i.e. in
    # timeline order, so each bucket's samples are a known slice. A request completing at
    # bucket start b was scheduled at or before the off-period start o (nothing is scheduled
    # while off), hence its latency is at least b - o. This holds however slow the machine is;
    # once b - o exceeds the largest latency, the bucket must be empty.
    period = on + off
    max_latency_s = max(latencies) / 1000.0
    checked = 0
    seen = 0
    for offset, completed, _ in timeline:
        absolute = warmup + offset  # the window starts exactly at --warmup with poisson arrivals
        cycle_start = math.floor((absolute + 1e-9) / period) * period
        off_start = cycle_start + on
        inside_off = (
            absolute >= off_start - 1e-9 and absolute + interval <= cycle_start + period + 1e-9
        )
        bucket = latencies[seen : seen + completed]
        seen += completed
        if not inside_off:
            continue
        checked += 1
        lag_ms = (absolute - off_start) * 1000.0
        assert all(value >= lag_ms - 0.01 for value in bucket), (offset, bucket)
        if absolute - off_start > max_latency_s + 1e-6:
            assert completed == 0, (offset, timeline)
    assert seen == len(latencies)
    assert checked >= 4 * round(off / interval)  # four off-periods in the 2 s window
