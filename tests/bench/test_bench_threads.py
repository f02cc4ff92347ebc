"""The pure parts of flowlane_bench.bench_threads: reading /proc text, the switch-count
argument, the controller's command line. No Open vSwitch needed."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest
from flowlane_bench import bench_threads

STATUS = """Name:\tpython
Umask:\t0022
State:\tS (sleeping)
Tgid:\t4242
Pid:\t4242
PPid:\t4200
VmPeak:\t  812344 kB
VmRSS:\t  113664 kB
RssAnon:\t   80000 kB
Threads:\t51
SigQ:\t0/95956
"""


def test_parse_status_reads_threads_and_rss() -> None:
    assert bench_threads.parse_status(STATUS) == (51, 113664)


def test_parse_status_refuses_text_without_the_fields() -> None:
    with pytest.raises(ValueError):
        bench_threads.parse_status("Name:\tpython\nThreads:\t3\n")  # no VmRSS (a zombie)
    with pytest.raises(ValueError):
        bench_threads.parse_status("Threads:\t3\nVmRSS:\t12 MB\n")


def test_parse_stat_counts_fields_after_the_last_parenthesis() -> None:
    # A command name with a space and a ")" in it must not shift the fields.
    fields = ["S", "4200", *["0"] * 9, "150", "37", *["0"] * 30]
    line = "4242 (we ird) name) " + " ".join(fields)
    assert bench_threads.parse_stat(line) == (4200, 187)


def test_parse_stat_of_this_process() -> None:
    text = Path(f"/proc/{os.getpid()}/stat").read_text()
    ppid, ticks = bench_threads.parse_stat(text)
    assert ppid == os.getppid()
    assert ticks >= 0


def test_parse_stat_refuses_garbage() -> None:
    with pytest.raises(ValueError):
        bench_threads.parse_stat("not a stat line")


def test_read_sample_of_this_process() -> None:
    sample = bench_threads.read_sample(os.getpid())
    assert sample.threads >= 1
    assert sample.rss_kib > 0
    assert sample.cpu_s > 0


def test_controller_command_is_told_from_the_api_and_redis() -> None:
    python = "/work/.venv/bin/python"
    assert bench_threads.is_controller_command(
        [python, "-m", "controller", "controller", "--ofp-port", "6653"]
    )
    assert not bench_threads.is_controller_command([python, "-m", "controller", "api"])
    assert not bench_threads.is_controller_command([python, "-m", "controller", "up"])
    assert not bench_threads.is_controller_command(["redis-server", "*:0"])


def test_switch_counts() -> None:
    assert bench_threads.switch_counts("10,40,100") == [10, 40, 100]
    assert bench_threads.switch_counts(" 5 ") == [5]
    for bad in ("", "0", "10,-1", "ten", "1001"):
        with pytest.raises((argparse.ArgumentTypeError, ValueError)):
            bench_threads.switch_counts(bad)


def test_bridge_names_share_the_prefix() -> None:
    assert bench_threads.bridge_names(3) == ["bt0", "bt1", "bt2"]
    assert all(len(f"{name}p1") <= 15 for name in bench_threads.bridge_names(1000))


def test_latency_summary_uses_nearest_rank() -> None:
    summary = bench_threads.latency_summary([float(v) for v in range(100, 0, -1)])
    assert summary == {"p50": 50.0, "p95": 95.0, "p99": 99.0, "max": 100.0, "mean": 50.5}


def test_api_command_is_told_from_the_controller() -> None:
    python = "/work/.venv/bin/python"
    assert bench_threads.is_api_command([python, "-m", "controller", "api", "--port", "1"])
    assert not bench_threads.is_api_command([python, "-m", "controller", "controller"])


def test_switches_per_core_counts_rest_and_changes() -> None:
    # 2 ms/s at rest per switch: 500 switches fill a core with no change.
    assert bench_threads.switches_per_core(0.002, 0.5, 0.0) == 500
    # plus 0.5 ms per change per switch at 2 changes/s: 3 ms/s each.
    assert bench_threads.switches_per_core(0.002, 0.5, 2.0) == 333
    with pytest.raises(ValueError):
        bench_threads.switches_per_core(0.0, 0.0, 1.0)
