"""iperf3's ``-t`` for a phase: the omitted ramp (``-O``) comes on top of it, not out of it."""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest
from flowlane_bench.workloads import iperf_seconds

from tests.conftest import free_port


def test_the_measured_part_is_what_is_left_after_the_ramp() -> None:
    assert iperf_seconds(9.0, 4.5) == 4.5
    assert iperf_seconds(3.5, 0.0) == 3.5


@pytest.mark.parametrize(("seconds", "omit_s"), [(2.0, 2.0), (2.0, 3.0), (2.0, -1.0)])
def test_a_ramp_as_long_as_the_run_is_refused(seconds: float, omit_s: float) -> None:
    with pytest.raises(ValueError, match="omit"):
        iperf_seconds(seconds, omit_s)


def test_iperf3_runs_the_ramp_and_the_measured_part_for_the_seconds_asked() -> None:
    """What ``iperf_seconds`` relies on, checked against the iperf3 on this machine."""
    if shutil.which("iperf3") is None:
        pytest.fail("missing iperf3 (Debian's iperf3 package: run `make setup`)")
    port = free_port()
    server = subprocess.Popen(
        ["iperf3", "-s", "-1", "-p", str(port), "-B", "127.0.0.1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        seconds, omit_s = 2.0, 1.0
        command = ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-J", "-b", "1M"]
        command += ["-t", f"{iperf_seconds(seconds, omit_s):.1f}", "-O", f"{omit_s:.1f}"]
        command += ["--connect-timeout", "3000"]
        for _ in range(50):  # the server listens a moment after it starts
            started = time.monotonic()
            done = subprocess.run(command, capture_output=True, text=True, timeout=30)
            if "unable to connect" not in done.stdout + done.stderr:
                break
            time.sleep(0.1)
        took = time.monotonic() - started
    finally:
        server.kill()
        server.wait(5)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    omitted = [i for i in report["intervals"] if i["sum"]["omitted"]]
    measured = [i for i in report["intervals"] if not i["sum"]["omitted"]]
    assert sum(i["sum"]["seconds"] for i in omitted) == pytest.approx(omit_s, abs=0.2)
    assert sum(i["sum"]["seconds"] for i in measured) == pytest.approx(seconds - omit_s, abs=0.2)
    assert seconds - 0.1 < took < seconds + 0.8, f"iperf3 ran {took:.2f} s for a {seconds} s run"
