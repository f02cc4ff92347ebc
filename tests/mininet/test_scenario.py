"""End to end on real OVS: every shipped scenario, short, and the runner's cleanup.

Each scenario runs for a few seconds per phase under fifo, static and
flowlane in one network.  The tests assert the report's structure and the
direction of the result (flowlane's inference p99 below FIFO's, measured in
the same run), not the figures: those belong to ``docs/benchmarks.md``.
Cleanup is checked after a run, after an interrupt (SIGINT) and after a
failure (the controller killed mid-run): no bridge, port, QoS row, Mininet
host or workload process may be left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import struct
import subprocess
from pathlib import Path

import harness
import pytest
import scenario
from topologies import PlannedTopo  # noqa: F401  (the runner's topology must import)

from controller.scenario.plots import ALLREDUCE, LATENCY_CDF, THROUGHPUT
from controller.scenario.report import ALONE, IDLE, Report
from controller.scenario.spec import load_scenario, scenario_files

pytestmark = pytest.mark.mininet

SHORT_S = 5.0
"""Seconds measured per phase: enough samples (about a thousand) for a p99 that holds."""
RUNNER = Path(scenario.__file__).resolve()
SHIPPED = sorted(scenario_files(scenario.SCENARIOS))


def leftovers(name: str, out: Path) -> list[str]:
    """Everything a run of scenario ``name`` could leave behind; empty when clean."""
    plan = load_scenario(scenario.SCENARIOS / f"{name}.yaml", harness.REPO).scenario.plan()
    found = []
    bridges = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True).stdout
    found += [f"bridge {b}" for b in bridges.split() if b in {s.name for s in plan.switches}]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    names = {line.split(": ")[1].split("@")[0] for line in links.splitlines() if ": " in line}
    found += [f"link {n}" for n in sorted(names & set(plan.switch_ports()))]
    qos = subprocess.run(
        ["ovs-vsctl", "--columns=_uuid", "--format=csv", "--no-headings", "list", "qos"],
        capture_output=True,
        text=True,
    ).stdout.split()
    found += [f"qos row {row}" for row in qos]
    for pattern in ("mininet:", "loadgen.py", "allreduce.py", "iperf3", str(out)):
        pids = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout
        found += [f"process {pid} ({pattern})" for pid in pids.split() if int(pid) != os.getpid()]
    return found


def assert_clean(name: str, out: Path) -> None:
    """Nothing left once Mininet's host shells, which are killed without a wait, are gone."""
    with contextlib.suppress(TimeoutError):
        harness.wait_for("the run's processes to exit", lambda: not leftovers(name, out), 10, 0.2)
    assert leftovers(name, out) == []


def is_png(path: Path) -> bool:
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return False
    width, height = struct.unpack(">II", data[16:24])
    return width > 300 and height > 200


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_scenario_runs_and_flowlane_beats_fifo(name: str, tmp_path: Path) -> None:
    harness.check_prerequisites()
    out = tmp_path / name
    _, path = scenario.run(name, duration_s=SHORT_S, out=out)

    report = Report.model_validate_json(path.read_text())
    loaded = load_scenario(scenario.SCENARIOS / f"{name}.yaml", harness.REPO)
    assert report.scenario == name and report.modes == ["fifo", "static", "flowlane"]
    assert set(report.phases) == {IDLE, ALONE, "fifo", "static", "flowlane"}
    assert report.capacity_bps == loaded.policy.ports.configured_rate(report.bottleneck).bps
    assert {"git_commit", "cpus", "ovs", "python", "flowlane"} <= set(report.environment)
    assert report.phases[IDLE].inference is not None and not report.phases[IDLE].training_flows
    assert report.phases[ALONE].inference is None and report.phases[ALONE].training_flows
    for mode in report.modes:
        phase = report.phases[mode]
        assert phase.inference is not None and phase.inference.samples > 100
        assert phase.training_goodput_bps and phase.training_goodput_bps > 0
        assert set(phase.timeline) == {"training", "inference"}
        assert phase.inference.cdf[-1][1] == 1.0
    assert [row.mode for row in report.headline] == report.modes

    wanted = [LATENCY_CDF, THROUGHPUT] + ([ALLREDUCE] if report.phases[ALONE].allreduce else [])
    assert report.plots == wanted
    assert all(is_png(out / plot) for plot in wanted)
    assert {f"policy-{mode}.yaml" for mode in report.modes} <= {p.name for p in out.iterdir()}

    fifo, flowlane = report.phases["fifo"].inference, report.phases["flowlane"].inference
    assert fifo is not None and flowlane is not None
    assert flowlane.latency_ms.p99 < fifo.latency_ms.p99, (
        f"{name}: flowlane p99 {flowlane.latency_ms.p99} ms, fifo {fifo.latency_ms.p99} ms"
    )
    assert_clean(name, out)


def start_runner(out: Path, duration_s: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *(harness.PYTHON, str(RUNNER), "run", "isolation"),
            *("--duration", str(duration_s), "--out", str(out)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def test_interrupted_run_leaves_nothing_behind(tmp_path: Path) -> None:
    harness.check_prerequisites()
    out = tmp_path / "interrupted"
    runner = start_runner(out, 30)
    try:
        # Interrupt while training and inference run: the idle reference is done.
        harness.wait_for(
            "the idle phase to finish", lambda: (out / "raw" / "idle.json").exists(), 90
        )
        assert pgrep("iperf3"), "training should be running when the run is interrupted"
        runner.send_signal(signal.SIGINT)
        output, _ = runner.communicate(timeout=60)
    finally:
        harness.stop_process(runner)
    assert runner.returncode == 128 + signal.SIGINT, output
    assert "interrupted by SIGINT" in output
    assert not (out / "report.json").exists()
    assert_clean("isolation", out)


def test_failed_run_leaves_nothing_behind(tmp_path: Path) -> None:
    """The controller dies mid-run: the run fails, says why, and still removes everything."""
    harness.check_prerequisites()
    out = tmp_path / "failed"
    runner = start_runner(out, 6)
    try:
        policy, log = out / "policy-fifo.yaml", out / "controller-fifo.log"
        harness.wait_for(
            "the fifo mode's controller to hold the switch",
            lambda: log.exists() and "in sync" in log.read_text(errors="replace"),
            120,
        )
        for pid in pgrep(str(policy)):
            os.kill(pid, signal.SIGKILL)
        output, _ = runner.communicate(timeout=120)
    finally:
        harness.stop_process(runner)
    assert runner.returncode == 1, output
    assert "scenario failed" in output and "controller exited" in output
    assert (out / "diagnostics.txt").exists()
    assert_clean("isolation", out)


def pgrep(pattern: str) -> list[int]:
    done = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return [int(pid) for pid in done.stdout.split() if int(pid) != os.getpid()]
