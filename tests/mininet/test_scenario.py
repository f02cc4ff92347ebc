"""End to end on real OVS: every shipped scenario, short, and the runner's cleanup.

Each classification scenario runs for a few seconds per phase under its
modes (fifo, static and flowlane; leafspine also stp and ecmp) in one
network.  The tests assert the report's structure and the direction of the
result (flowlane's inference p99 below FIFO's, measured in the same run),
not the figures: those belong to ``docs/benchmarks.md``.  The fabric
scenarios (``collide``, ``failover``) run ecmp and flowlane only, a few
seconds each, and print their figures against the targets without
asserting them.  Cleanup is checked after a run, after an interrupt
(SIGINT) and after a failure (the controller killed mid-run): no bridge,
port, QoS row, Mininet host or workload process may be left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import struct
import subprocess
from pathlib import Path

import pytest
import yaml
from flowlane_bench import harness, scenario
from flowlane_bench.suite.control import control_plan
from flowlane_bench.suite.plots import ALLREDUCE, LATENCY_CDF, THROUGHPUT
from flowlane_bench.suite.report import ALONE, CONTROL, IDLE, Report
from flowlane_bench.suite.spec import Mode, load_scenario, scenario_files
from flowlane_bench.topologies import PlannedTopo  # noqa: F401  (the runner's topology must import)

pytestmark = pytest.mark.mininet

SHORT_S = 5.0
SHARED_MODES = ("fifo", "static", "flowlane")
"""Seconds measured per phase: enough samples (about a thousand) for a p99 that holds."""
RUNNER = "flowlane_bench.scenario"
FABRIC = ("collide", "failover")
"""Scenarios that compare forwarding (stp, ecmp, flowlane); they have tests of their own."""
SHIPPED = [name for name in sorted(scenario_files(scenario.SCENARIOS)) if name not in FABRIC]
FABRIC_MODES = [Mode.ECMP, Mode.FLOWLANE]


def leftovers(name: str, out: Path) -> list[str]:
    """Everything a run of scenario ``name`` could leave behind; empty when clean."""
    spec = load_scenario(scenario.SCENARIOS / f"{name}.yaml", harness.REPO).scenario
    plan = control_plan(spec, spec.plan())  # the control phase's sinks too
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
    workers = ("flowlane_bench.loadgen", "flowlane_bench.allreduce", "flowlane_bench.probe")
    for pattern in ("mininet:", *workers, "iperf3", str(out)):
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
    return bool(width > 300 and height > 200)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_scenario_runs_and_flowlane_beats_fifo(name: str, tmp_path: Path) -> None:
    harness.check_prerequisites()
    out = tmp_path / name
    loaded = load_scenario(scenario.SCENARIOS / f"{name}.yaml", harness.REPO)
    # The leaf-spine's stp and ecmp modes are covered by the fabric tests; here the three
    # modes every scenario shares keep the suite short.
    modes = [str(mode) for mode in loaded.scenario.modes if str(mode) in SHARED_MODES]
    _, path = scenario.run(name, modes=[Mode(m) for m in modes], duration_s=SHORT_S, out=out)

    report = Report.model_validate_json(path.read_text())
    assert report.scenario == name and report.modes == modes
    assert {"fifo", "static", "flowlane"} <= set(modes)
    assert set(report.phases) == {IDLE, ALONE, CONTROL, *modes}
    assert report.capacity_bps == loaded.policy.ports.configured_rate(report.bottleneck).bps
    assert {"git_commit", "cpus", "ovs", "python", "flowlane"} <= set(report.environment)
    assert report.phases[IDLE].inference is not None and not report.phases[IDLE].training_flows
    assert report.phases[ALONE].inference is None and report.phases[ALONE].training_flows
    assert_control(report)
    for mode in report.modes:
        phase = report.phases[mode]
        assert phase.inference is not None and phase.inference.samples > 100
        assert phase.training_goodput_bps and phase.training_goodput_bps > 0
        assert set(phase.timeline) == {"training", "inference"}
        assert phase.inference.cdf[-1][1] == 1.0
    assert [row.mode for row in report.headline] == report.modes
    assert all(row.p99_over_control is not None for row in report.headline)

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


def assert_control(report: Report) -> None:
    """Control ran inference and every training sender, each to a sink, at its alone rate."""
    control, alone = report.phases[CONTROL], report.phases[ALONE]
    assert control.inference is not None and control.inference.samples > 20
    assert len(control.training_flows) == len(alone.training_flows)
    assert all("@sink" in flow.label for flow in control.training_flows)
    assert all(flow.goodput_bps > 0 for flow in control.training_flows)
    sent = sum(flow.goodput_bps for flow in control.training_flows)
    reached = sum(flow.goodput_bps for flow in alone.training_flows)
    # Paced at the alone rates: never far above them (iperf3 paces to within a few %).
    assert 0 < sent < 1.1 * reached
    idle = report.phases[IDLE].inference
    assert idle is not None
    print(
        f"{report.scenario}: inference p99 idle {idle.latency_ms.p99} ms,"
        f" control {control.inference.latency_ms.p99} ms; training in control"
        f" {sent / 1e6:.1f} Mbit/s, alone {reached / 1e6:.1f} Mbit/s"
    )


def start_runner(out: Path, duration_s: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *(harness.PYTHON, "-m", RUNNER, "run", "isolation"),
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
    said = " ".join(output.split())  # a terminal may wrap the message anywhere
    assert "scenario failed" in said and "controller exited" in said, output
    assert (out / "diagnostics.txt").exists()
    assert_clean("isolation", out)


def pgrep(pattern: str) -> list[int]:
    done = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return [int(pid) for pid in done.stdout.split() if int(pid) != os.getpid()]


def fabric_report(name: str, path: Path) -> Report:
    """The report of a fabric scenario run, with its figures printed against the targets."""
    report = Report.model_validate_json(path.read_text())
    assert report.scenario == name and report.modes == [str(m) for m in FABRIC_MODES]
    # The short fabric runs keep only the idle reference: the control phase is covered by
    # every shipped scenario's run, and these two are the longest of the suite.
    assert set(report.phases) == {IDLE, *report.modes}
    assert report.optimum_bps and report.optimum_bps > 0
    for row in report.headline:
        phase = report.phases[row.mode]
        assert phase.inference is not None and phase.inference.samples > 20
        assert phase.training_goodput_bps and phase.training_goodput_bps > 0
        assert row.goodput_over_optimum is not None
        print(
            f"{name} {row.mode}: goodput/optimum {row.goodput_over_optimum} (target >= 0.95),"
            f" Jain {row.jain} (target >= 0.95), inference p99 {row.inference_p99_ms} ms,"
            f" p99/control {row.p99_over_control} (target <= 1.25)"
        )
    return report


def test_collide_runs_under_ecmp_and_flowlane(tmp_path: Path) -> None:
    harness.check_prerequisites()
    document = yaml.safe_load((scenario.SCENARIOS / "collide.yaml").read_text())
    short = tmp_path / "collide.yaml"
    short.write_text(yaml.safe_dump(document | {"references": ["idle"]}, sort_keys=False))
    out = tmp_path / "collide"
    _, path = scenario.run(str(short), modes=list(FABRIC_MODES), duration_s=4.0, out=out)
    report = fabric_report("collide", path)
    assert report.optimum_bps == pytest.approx(80e6, rel=1e-6)
    for mode in report.modes:
        flows = report.phases[mode].training_flows
        assert len(flows) == 8 and all(flow.goodput_bps > 0 for flow in flows)
        assert sum(not flow.congestion_controlled for flow in flows) == 2  # the UDP pair
    assert report.plots == [LATENCY_CDF, THROUGHPUT]
    assert_clean("collide", out)


def test_failover_runs_a_local_failure_under_ecmp_and_flowlane(tmp_path: Path) -> None:
    """A shortened failover: leaf1's uplink to spine2 fails at 3 s and is back at 6 s."""
    harness.check_prerequisites()
    document = yaml.safe_load((scenario.SCENARIOS / "failover.yaml").read_text())
    document |= {
        "duration": "6s",
        "ramp": "2s",
        "references": ["idle"],
        "events": [
            {"at": "3s", "link": ["leaf1", "spine2"], "state": "down"},
            {"at": "6s", "link": ["leaf1", "spine2"], "state": "up"},
        ],
    }
    short = tmp_path / "failover.yaml"
    short.write_text(yaml.safe_dump(document, sort_keys=False))
    out = tmp_path / "failover"
    _, path = scenario.run(str(short), modes=list(FABRIC_MODES), out=out)
    report = fabric_report("failover", path)
    assert report.optimum_bps == pytest.approx(40e6, rel=1e-6)
    for mode in report.modes:
        phase = report.phases[mode]
        assert phase.probe is not None and phase.probe.sent > 5000
        assert phase.probe.path, "the probe's traced path is empty"
        down, up = phase.events
        assert (down.link, down.state, up.state) == (("leaf1", "spine2"), "down", "up")
        assert 2.9 < down.executed_s < 3.5 and 5.9 < up.executed_s < 6.5
        assert down.optimum_bps is not None and down.optimum_bps < 20e6 < up.optimum_bps  # type: ignore[operator]
        assert down.probe_crossed == phase.probe.crosses_first_event
        print(
            f"failover {mode}: probe {phase.probe.label} via {phase.probe.path}"
            f" crossed={down.probe_crossed}: lost {down.probe_lost} ({down.probe_loss_ms} ms),"
            f" longest gap {down.probe_longest_gap_ms} ms; training back to 0.9 of the new"
            f" optimum after {down.recovery_s} s"
        )
    assert_clean("failover", out)
