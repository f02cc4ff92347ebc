"""Tests for flowlane_bench.allreduce: pure helpers, then real rings of workers on loopback.

Workers run as ``python -m flowlane_bench.allreduce``, as inside Mininet hosts. Every process a
test starts is stopped by its PID in a ``finally``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from flowlane_bench import allreduce

WORKER = [sys.executable, "-m", "flowlane_bench.allreduce"]
KEYS = {
    "rank",
    "workers",
    "size_bytes",
    "chunk_bytes",
    "iterations",
    "warmup_iterations",
    "iteration_ms",
    "iteration_ms_mean",
    "iteration_ms_p99",
    "bytes_sent",
    "elapsed_s",
    "goodput_bps",
    "window_start_unix",
    "timeline",
}


# --------------------------------------------------------------------------------------------
# Pure helpers
# --------------------------------------------------------------------------------------------


def test_ring_neighbours() -> None:
    assert [allreduce.ring_neighbours(r, 4) for r in range(4)] == [(3, 1), (0, 2), (1, 3), (2, 0)]
    assert allreduce.ring_neighbours(0, 2) == (1, 1)
    assert allreduce.ring_neighbours(1, 2) == (0, 0)
    for bad in ((0, 1), (4, 4), (-1, 4)):
        with pytest.raises(ValueError):
            allreduce.ring_neighbours(*bad)


def test_chunk_and_bytes_per_iteration() -> None:
    assert allreduce.chunk_bytes(256 * 1024, 4) == 64 * 1024
    assert allreduce.chunk_bytes(10, 4) == 3  # ceil
    assert allreduce.chunk_bytes(1, 8) == 1
    assert allreduce.steps_per_iteration(4) == 6
    assert allreduce.steps_per_iteration(2) == 2
    # 2 * size * (N - 1) / N when N divides size
    assert allreduce.bytes_per_iteration(64 * 1024, 4) == 2 * 256 * 1024 * 3 // 4
    assert allreduce.bytes_per_iteration(3, 4) == 18
    with pytest.raises(ValueError):
        allreduce.chunk_bytes(0, 4)
    with pytest.raises(ValueError):
        allreduce.chunk_bytes(10, 1)


def test_should_stop() -> None:
    def stop(done: int, elapsed: float, mean: float | None, max_it: int | None = None) -> bool:
        return allreduce.should_stop(
            measured_done=done,
            elapsed_s=elapsed,
            mean_iteration_s=mean,
            duration_s=1.0,
            max_iterations=max_it,
        )

    assert not stop(0, 0.0, None)  # no estimate yet: run at least one measured iteration
    assert stop(0, 0.0, None, max_it=1)
    assert not stop(5, 0.5, 0.1)
    assert stop(9, 0.9, 0.1)  # 0.9 + 0.1 >= 1.0: this one ends the run
    assert stop(3, 0.95, 0.3)
    assert not stop(2, 0.2, 0.1, max_it=4)
    assert stop(3, 0.3, 0.1, max_it=4)  # the 4th measured iteration is the last
    assert stop(0, 0.0, None, max_it=1)


def test_check_data_header_positions_and_lengths() -> None:
    check = allreduce.check_data_header
    ok = allreduce.Header(7, 2, 0, 100)
    args: dict[str, Any] = {"chunk": 100, "left": 3, "is_rank0": False, "stop": False}
    assert check(ok, iteration=7, step=2, **args) is False
    with pytest.raises(allreduce.ProtocolError, match="expected iteration 7 step 3"):
        check(ok, iteration=7, step=3, **args)
    with pytest.raises(allreduce.ProtocolError, match="expected iteration 8 step 2"):
        check(ok, iteration=8, step=2, **args)
    with pytest.raises(allreduce.ProtocolError, match="payload length 99"):
        check(allreduce.Header(7, 2, 0, 99), iteration=7, step=2, **args)
    with pytest.raises(allreduce.ProtocolError, match="unexpected flags"):
        check(allreduce.Header(7, 2, allreduce.FLAG_START, 100), iteration=7, step=2, **args)


def test_check_data_header_stop_rule() -> None:
    def check(step: int, flags: int, *, left: int, rank0: bool, stop: bool) -> bool:
        return allreduce.check_data_header(
            allreduce.Header(1, step, flags, 8),
            iteration=1,
            step=step,
            chunk=8,
            left=left,
            is_rank0=rank0,
            stop=stop,
        )

    stop_flag = allreduce.FLAG_STOP
    # Rank 2 (left = 1): the flag is news at step 1, must persist later, cannot come earlier.
    assert check(0, 0, left=1, rank0=False, stop=False) is False
    with pytest.raises(allreduce.ProtocolError, match="STOP flag set"):
        check(0, stop_flag, left=1, rank0=False, stop=False)
    assert check(1, stop_flag, left=1, rank0=False, stop=False) is True
    assert check(1, 0, left=1, rank0=False, stop=False) is False
    assert check(2, stop_flag, left=1, rank0=False, stop=True) is True
    with pytest.raises(allreduce.ProtocolError, match="STOP flag missing"):
        check(2, 0, left=1, rank0=False, stop=True)
    with pytest.raises(allreduce.ProtocolError, match="STOP flag set"):
        check(2, stop_flag, left=1, rank0=False, stop=False)
    # Rank 0 of 4 (left = 3) decided to stop: clear before step 3, set from step 3 on.
    assert check(2, 0, left=3, rank0=True, stop=True) is True
    assert check(3, stop_flag, left=3, rank0=True, stop=True) is True
    with pytest.raises(allreduce.ProtocolError, match="STOP flag missing"):
        check(3, 0, left=3, rank0=True, stop=True)
    with pytest.raises(allreduce.ProtocolError, match="STOP flag set"):
        check(4, stop_flag, left=3, rank0=True, stop=False)


def test_stop_reaches_every_worker_within_the_iteration() -> None:
    """Simulate the flag along the ring: each worker learns it before its last step."""
    for workers in range(2, 9):
        steps = allreduce.steps_per_iteration(workers)
        knows = [rank == 0 for rank in range(workers)]  # rank 0 decided to stop
        for step in range(steps):
            sent = [knows[rank] for rank in range(workers)]  # flags of this step's messages
            for rank in range(workers):
                left, _ = allreduce.ring_neighbours(rank, workers)
                knows[rank] = allreduce.check_data_header(
                    allreduce.Header(0, step, allreduce.FLAG_STOP if sent[left] else 0, 1),
                    iteration=0,
                    step=step,
                    chunk=1,
                    left=left,
                    is_rank0=rank == 0,
                    stop=knows[rank],
                )
        assert all(knows), workers


def test_parse_peers() -> None:
    peers = allreduce.parse_peers("10.0.0.1:5000, 10.0.0.2:5001,[::1]:5002")
    assert peers == (("10.0.0.1", 5000), ("10.0.0.2", 5001), ("::1", 5002))
    for bad in (
        "10.0.0.1:5000",
        "10.0.0.1,10.0.0.2:1",
        "a:0,b:1",
        "a:1,a:1",
        "a:x,b:1",
        "::1:5,a:1",
    ):
        with pytest.raises(ValueError):
            allreduce.parse_peers(bad)


def test_check_hello() -> None:
    expected = allreduce.Hello(rank=3, workers=4, warmup_iterations=1, size_bytes=1024)
    allreduce.check_hello(allreduce.Hello.unpack(expected.pack()), expected)
    with pytest.raises(allreduce.ProtocolError, match="rank is 2, expected 3"):
        allreduce.check_hello(expected._replace(rank=2), expected)
    with pytest.raises(allreduce.ProtocolError, match="size_bytes"):
        allreduce.check_hello(expected._replace(size_bytes=1), expected)


def test_percentile_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert allreduce.percentile(values, 99.0) == 99.0
    assert allreduce.percentile(values, 100.0) == 100.0
    assert allreduce.percentile(values, 0.0) == 1.0
    assert allreduce.percentile([10.0, 20.0, 30.0, 40.0], 50.0) == 20.0
    assert allreduce.percentile([10.0, 20.0, 30.0, 40.0], 99.0) == 40.0
    assert allreduce.percentile([7.0], 99.0) == 7.0
    with pytest.raises(ValueError):
        allreduce.percentile([], 50.0)
    with pytest.raises(ValueError):
        allreduce.percentile([1.0], 101.0)


def test_build_summary() -> None:
    summary = allreduce.build_summary(
        rank=1,
        workers=4,
        size_bytes=1000,
        warmup_iterations=2,
        iteration_ends_s=[0.01, 0.03, 0.06, 0.10],
        window_start_unix=1700000000.5,
    )
    assert set(summary) == KEYS
    assert summary["chunk_bytes"] == 250
    assert summary["iterations"] == 4
    assert summary["warmup_iterations"] == 2
    assert summary["iteration_ms"] == pytest.approx([10.0, 20.0, 30.0, 40.0])
    assert summary["iteration_ms_mean"] == pytest.approx(25.0)
    assert summary["iteration_ms_p99"] == pytest.approx(40.0)
    assert summary["bytes_sent"] == 4 * 6 * 250
    assert summary["elapsed_s"] == pytest.approx(0.1)
    assert summary["goodput_bps"] == pytest.approx(4 * 6 * 250 * 8 / 0.1)
    assert summary["window_start_unix"] == 1700000000.5
    assert summary["timeline"] == [[0.01, 1500], [0.03, 1500], [0.06, 1500], [0.1, 1500]]
    json.dumps(summary)

    empty = allreduce.build_summary(
        rank=0,
        workers=2,
        size_bytes=1,
        warmup_iterations=0,
        iteration_ends_s=[],
        window_start_unix=0.0,
    )
    assert empty["iterations"] == 0
    assert empty["iteration_ms_mean"] is None
    assert empty["iteration_ms_p99"] is None
    assert empty["goodput_bps"] == 0.0


def test_cli_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--peers", "127.0.0.1:1,127.0.0.1:2", "--size", "10", "--duration", "1"]
    for argv in (
        ["--rank", "2", *base],
        ["--rank", "0", "--peers", "127.0.0.1:1", "--size", "10", "--duration", "1"],
        ["--rank", "0", *base, "--compute-ms", "-1"],
    ):
        with pytest.raises(SystemExit) as exc:
            allreduce.main(argv)
        assert exc.value.code == 2
    capsys.readouterr()


# --------------------------------------------------------------------------------------------
# Worker processes on loopback
# --------------------------------------------------------------------------------------------


def _free_ports(count: int) -> list[int]:
    """Distinct ports nobody listens on right now (all held open together while picking)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("0.0.0.0", 0))
            ports.append(sock.getsockname()[1])
        return ports


def _peers_arg(ports: Sequence[int]) -> str:
    return ",".join(f"127.0.0.1:{port}" for port in ports)


def _start(rank: int, peers: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*WORKER, "--rank", str(rank), "--peers", peers, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop(proc: subprocess.Popen[str]) -> None:
    """Stop one process we started, by its PID: SIGTERM, then SIGKILL if it lingers."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


@contextlib.contextmanager
def _processes() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    try:
        yield procs
    finally:
        for proc in procs:
            _stop(proc)


def _collect(procs: Sequence[subprocess.Popen[str]], deadline: float) -> list[tuple[int, str, str]]:
    """Wait for every process until ``deadline`` (monotonic); returns (status, stdout, stderr)."""
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
        results.append((proc.returncode, out, err))
    return results


def _wait_for_line(proc: subprocess.Popen[str], needle: str) -> str:
    """Read stderr lines until one contains ``needle`` (the test's timeout bounds the wait)."""
    assert proc.stderr is not None
    while True:
        line = proc.stderr.readline()
        assert line, f"process exited (status {proc.poll()}) before printing {needle!r}"
        if needle in line:
            return line


def _run_ring(
    workers: int, *extra: str, wall_limit: float, output: Path | None = None
) -> tuple[list[tuple[int, str, str]], float]:
    peers = _peers_arg(_free_ports(workers))
    started = time.monotonic()
    with _processes() as procs:
        for rank in range(workers):
            out_args = ("--output", str(output)) if output is not None and rank == 0 else ()
            procs.append(_start(rank, peers, *extra, *out_args))
        results = _collect(procs, started + wall_limit)
    return results, time.monotonic() - started


@pytest.mark.timeout(60)
def test_ring_of_four_on_loopback(tmp_path: Path) -> None:
    workers, size, duration = 4, 256 * 1024, 1.5
    output = tmp_path / "rank0.json"
    results, wall = _run_ring(
        workers,
        *("--size", str(size), "--duration", str(duration), "--connect-timeout", "20"),
        wall_limit=40.0,
        output=output,
    )
    for rank, (status, _, err) in enumerate(results):
        assert status == 0, (rank, err)
        assert "Traceback" not in err
    reports = [json.loads(out) for _, out, _ in results]
    assert json.loads(output.read_text(encoding="utf-8")) == reports[0]

    chunk = math.ceil(size / workers)
    iterations = reports[0]["iterations"]
    assert iterations > 1
    for rank, report in enumerate(reports):
        assert set(report) == KEYS
        assert report["rank"] == rank
        assert report["workers"] == workers
        assert report["size_bytes"] == size
        assert report["chunk_bytes"] == chunk
        assert report["warmup_iterations"] == 1
        assert report["iterations"] == iterations  # all stopped after the same iteration
        assert report["bytes_sent"] == iterations * 2 * (workers - 1) * chunk
        assert len(report["iteration_ms"]) == iterations
        assert len(report["timeline"]) == iterations
        assert all(entry[1] == 2 * (workers - 1) * chunk for entry in report["timeline"])
        ends = [entry[0] for entry in report["timeline"]]
        assert ends == sorted(ends)
        assert ends[-1] == pytest.approx(report["elapsed_s"], abs=1e-5)
        assert sum(report["iteration_ms"]) / 1000.0 == pytest.approx(report["elapsed_s"], abs=1e-3)
        assert 0 < report["iteration_ms_mean"] <= report["iteration_ms_p99"]
        assert report["iteration_ms_p99"] <= max(report["iteration_ms"])
        assert report["goodput_bps"] == pytest.approx(
            report["bytes_sent"] * 8 / report["elapsed_s"], rel=1e-3
        )
        assert report["elapsed_s"] < duration + 10.0
        assert abs(report["window_start_unix"] - time.time()) < 120
    # Rank 0 stops once elapsed + mean >= duration, so its window is at least half the duration.
    assert reports[0]["elapsed_s"] >= duration / 2
    assert wall < duration + 30.0


@pytest.mark.timeout(60)
def test_compute_time_is_part_of_every_iteration() -> None:
    compute_ms = 30.0
    results, _ = _run_ring(
        3,
        *("--size", "4096", "--duration", "1", "--compute-ms", str(compute_ms)),
        *("--warmup-iterations", "2", "--connect-timeout", "20"),
        wall_limit=40.0,
    )
    for status, _, err in results:
        assert status == 0, err
    reports = [json.loads(out) for _, out, _ in results]
    assert {report["iterations"] for report in reports} == {reports[0]["iterations"]}
    for report in reports:
        assert report["warmup_iterations"] == 2
        assert report["iterations"] >= 1
        assert report["iteration_ms_mean"] >= compute_ms
        assert min(report["iteration_ms"]) >= compute_ms


@pytest.mark.timeout(60)
def test_max_iterations_bounds_the_run() -> None:
    results, _ = _run_ring(
        2,
        *("--size", "1000", "--duration", "60", "--max-iterations", "5"),
        *("--warmup-iterations", "0", "--connect-timeout", "20"),
        wall_limit=40.0,
    )
    for status, _, err in results:
        assert status == 0, err
    for report in (json.loads(out) for _, out, _ in results):
        assert report["iterations"] == 5
        assert report["warmup_iterations"] == 0
        assert report["chunk_bytes"] == 500
        assert report["bytes_sent"] == 5 * 2 * 500


@pytest.mark.timeout(30)
def test_missing_right_neighbour_fails_after_connect_timeout() -> None:
    peers = _peers_arg(_free_ports(2))  # nobody will ever listen on the second port
    timeout = 1.0
    with _processes() as procs:
        started = time.monotonic()
        procs.append(
            _start(0, peers, "--size", "1024", "--duration", "1", "--connect-timeout", str(timeout))
        )
        ((status, out, err),) = _collect(procs, started + 20.0)
        took = time.monotonic() - started
    assert status == 1, err
    assert out == ""
    assert "Traceback" not in err
    assert "cannot connect to right neighbour rank 1" in err
    assert "--connect-timeout 1 s" in err
    assert took >= timeout
    assert took < timeout + 15.0


@pytest.mark.timeout(30)
def test_missing_left_neighbour_fails_after_connect_timeout() -> None:
    ports = _free_ports(3)
    peers = _peers_arg(ports)
    # Rank 1's right neighbour (rank 2) is only a listening socket, so the connect succeeds;
    # its left neighbour (rank 0) never shows up.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as fake_right, _processes() as procs:
        fake_right.bind(("127.0.0.1", ports[2]))
        fake_right.listen(1)
        started = time.monotonic()
        procs.append(
            _start(1, peers, "--size", "1024", "--duration", "1", "--connect-timeout", "1")
        )
        ((status, out, err),) = _collect(procs, started + 20.0)
        took = time.monotonic() - started
    assert status == 1, err
    assert out == ""
    assert "Traceback" not in err
    assert "left neighbour rank 0" in err
    assert "did not connect within --connect-timeout 1 s" in err
    assert 1.0 <= took < 16.0


@pytest.mark.timeout(30)
def test_protocol_error_from_left_neighbour() -> None:
    """A fake rank 1 completes the set-up, then sends a data message for the wrong step."""
    ports = _free_ports(2)
    size = 1024
    chunk = allreduce.chunk_bytes(size, 2)
    with contextlib.ExitStack() as stack:
        listener = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
        listener.bind(("127.0.0.1", ports[1]))
        listener.listen(1)
        listener.settimeout(15)
        procs = stack.enter_context(_processes())
        procs.append(_start(0, _peers_arg(ports), "--size", str(size), "--duration", "5"))
        inbound, _ = listener.accept()  # rank 0 connects to its right neighbour: us
        stack.enter_context(inbound)
        inbound.settimeout(15)
        outbound = stack.enter_context(socket.create_connection(("127.0.0.1", ports[0]), 15))
        hello = allreduce.Hello(rank=1, workers=2, warmup_iterations=1, size_bytes=size)
        outbound.sendall(
            allreduce.Header(0, 0, allreduce.FLAG_HELLO, allreduce.HELLO.size).pack() + hello.pack()
        )
        received = b""
        token = allreduce.Header(0, 0, allreduce.FLAG_START, 0).pack()
        while not received.endswith(token):  # rank 0's HELLO, then its START token
            data = inbound.recv(4096)
            assert data, "rank 0 closed before sending START"
            received += data
        outbound.sendall(token)  # the token returns: rank 0 starts iteration 0, step 0
        outbound.sendall(allreduce.Header(0, 1, 0, chunk).pack() + bytes(chunk))
        ((status, out, err),) = _collect(procs, time.monotonic() + 15.0)
    assert status == 1, err
    assert out == ""
    assert "Traceback" not in err
    assert "protocol error from left neighbour rank 1" in err
    assert "expected iteration 0 step 0, got iteration 0 step 1" in err


@pytest.mark.timeout(60)
def test_sigterm_stops_a_running_ring_promptly() -> None:
    peers = _peers_arg(_free_ports(2))
    with _processes() as procs:
        for rank in range(2):
            procs.append(
                _start(
                    rank, peers, "--size", "65536", "--duration", "300", "--connect-timeout", "20"
                )
            )
        for proc in procs:
            _wait_for_line(proc, "ring up")
        time.sleep(0.3)
        os.kill(procs[1].pid, signal.SIGTERM)
        results = _collect(procs, time.monotonic() + 10.0)
    (status0, out0, err0), (status1, out1, err1) = results
    assert status1 == 128 + signal.SIGTERM, err1
    assert "stopped by SIGTERM" in err1
    # Its neighbour notices the closed connections and fails instead of hanging.
    assert status0 == 1, err0
    assert "rank 1" in err0
    assert out0 == out1 == ""
    assert "Traceback" not in err0 + err1


@pytest.mark.timeout(30)
def test_sigint_during_setup_exits_130() -> None:
    peers = _peers_arg(_free_ports(2))
    with _processes() as procs:
        procs.append(_start(0, peers, "--size", "1024", "--duration", "1"))
        _wait_for_line(procs[0], "listening on")  # handlers are installed before binding
        os.kill(procs[0].pid, signal.SIGINT)
        ((status, out, err),) = _collect(procs, time.monotonic() + 10.0)
    assert status == 130, err
    assert out == ""
    assert "stopped by SIGINT" in err
    assert "Traceback" not in err
