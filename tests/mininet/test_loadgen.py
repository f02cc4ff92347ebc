"""Tests for mininet/loadgen.py: pure statistics helpers plus a real loopback client/server run.

``mininet/`` is not a package (the script runs standalone inside Mininet hosts), so the module is
loaded from its file path.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
LOADGEN = REPO / "mininet" / "loadgen.py"


def _load_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("flowlane_mininet_loadgen", LOADGEN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses resolve their module through sys.modules, so register before executing.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


loadgen = _load_module()


# --------------------------------------------------------------------------------------------
# Pure helpers
# --------------------------------------------------------------------------------------------


def test_percentile_nearest_rank_known_values() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert loadgen.percentile_nearest_rank(values, 50.0) == 50.0
    assert loadgen.percentile_nearest_rank(values, 90.0) == 90.0
    assert loadgen.percentile_nearest_rank(values, 99.0) == 99.0
    assert loadgen.percentile_nearest_rank(values, 99.9) == 100.0
    assert loadgen.percentile_nearest_rank(values, 100.0) == 100.0
    assert loadgen.percentile_nearest_rank(values, 0.0) == 1.0


def test_percentile_nearest_rank_small_sets() -> None:
    assert loadgen.percentile_nearest_rank([7.0], 50.0) == 7.0
    assert loadgen.percentile_nearest_rank([7.0], 99.9) == 7.0
    # n = 4: rank(50) = ceil(2) = 2, rank(90) = ceil(3.6) = 4, rank(25) = 1
    values = [10.0, 20.0, 30.0, 40.0]
    assert loadgen.percentile_nearest_rank(values, 50.0) == 20.0
    assert loadgen.percentile_nearest_rank(values, 90.0) == 40.0
    assert loadgen.percentile_nearest_rank(values, 25.0) == 10.0
    # n = 10: rank(50) = 5 exactly (no float drift pushing it to 6)
    ten = [float(v) for v in range(1, 11)]
    assert loadgen.percentile_nearest_rank(ten, 50.0) == 5.0
    assert loadgen.percentile_nearest_rank(ten, 90.0) == 9.0


def test_percentile_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        loadgen.percentile_nearest_rank([], 50.0)
    with pytest.raises(ValueError):
        loadgen.percentile_nearest_rank([1.0], 101.0)


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
        [sys.executable, str(LOADGEN), "server", "--host", "127.0.0.1", "--port", "0"],
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
    cmd = [sys.executable, str(LOADGEN), "client", "--host", "127.0.0.1", "--port", str(port)]
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
