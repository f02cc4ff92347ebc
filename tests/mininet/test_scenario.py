"""End to end on real OVS: every shipped scenario, short, and the runner's cleanup.

Each classification scenario runs for a few seconds per phase (1.5-2 s measured
after a 0.5-2 s ramp; its references 1 s where that gives enough samples) under
fifo and flowlane (isolation also under static rules; leafspine's stp and ecmp
belong to the fabric tests) in one network.  The tests assert the report's
structure and the direction of the result (flowlane's inference p99 below
FIFO's, measured in the same run), not the figures: those belong to
``docs/benchmarks.md``.  The fabric scenarios (``collide``, ``failover``) run
ecmp and flowlane only, a few seconds each, print their figures against the
targets and assert them with margins, flowlane against ecmp measured in the
same run.  Cleanup is checked after a run, after an interrupt (SIGINT) and after a failure (the
controller killed mid-run): no bridge, port or QoS row of the run's
network, and no process the test started (they carry its mark in their
environment), may be left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import struct
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml
from flowlane_bench import harness, scenario
from flowlane_bench.suite.control import control_plan
from flowlane_bench.suite.plots import ALLREDUCE, LATENCY_CDF, THROUGHPUT
from flowlane_bench.suite.report import ALONE, CONTROL, IDLE, Report
from flowlane_bench.suite.spec import Mode, load_scenario, scenario_files
from flowlane_bench.topologies import PlannedTopo  # noqa: F401  (the runner's topology must import)

from tests.support.ovs_bridge import owned_qos_ports
from tests.support.processes import MARK, carrying

pytestmark = pytest.mark.mininet

SHORT_S = 2.0
"""Seconds measured per phase: at 200 requests/s, 400 samples (incast's bursts, 160), and a p99
that separates the modes by far more than its noise (FIFO's queue under cubic costs tens of ms
to seconds; docs/benchmarks.md)."""
TEST_RAMP = "1s"
"""Training's ramp before inference is measured, in place of the scenario's 2-3 s: FIFO's
queue is full within it (its p99 is hundreds of ms to seconds against flowlane's few ms, in
2 s phases). Leafspine's is longer (``RAMPS``)."""
MEASURED_S = {"isolation": 1.5, "allreduce": 1.5}
"""Shorter mode phases where FIFO's p99 is far above flowlane's (2 s phases: isolation 954
against 8 ms, 116x; all-reduce 671 against 29 ms, 23x; 1.5 s phases: 268x and 21x): 300
samples at 200 requests/s."""
RAMPS = {"leafspine": "2s", "isolation": "0.5s"}
"""Other ramps. Isolation's two cubic flows fill the 50 Mbit port's FIFO (1000 frames, 0.24 s)
within a few hundred ms, and inference's 0.5 s warm-up comes on top. Leafspine's policy
detects elephants by rate (5 Mbit for 1 s, polled every 500 ms), so its flows leave the
latency class 1.0-2.0 s after their first packet (measured: 1.0, 1.5 and 2.0 s), and its FIFO
baseline (RSTP, one 50 Mbit uplink) is only about 40 ms at p99: measured from 1.5 s,
flowlane's p99 caught the last demotion's queue (60 ms)."""
CLEANUP_S = 1.0
"""Seconds per phase of the runs that are interrupted or fail: their phases are not measured,
only what they leave behind."""
REFERENCE_S = 1.0
"""Seconds measured per reference phase (idle, alone, control) of a shipped scenario: the modes'
p99 is read against them, not asserted on (200 idle samples at 200 requests/s; control needs
20). Two scenarios keep SHORT_S: all-reduce, whose alone phase times ring iterations of about
a second each, and incast, whose bursts are 0.5 s active in every 1.5 s."""
FULL_REFERENCES = ("allreduce", "incast")
SHARED_MODES = ("fifo", "static", "flowlane")
STATIC_IN = "isolation"
"""The one shipped scenario that also runs its static-rules mode in the suite."""
RUNNER = "flowlane_bench.scenario"
FABRIC = ("collide", "failover")
"""Scenarios that compare forwarding (stp, ecmp, flowlane); they have tests of their own."""
JOBS = ("jobs-share", "jobs-weights", "jobs-fabric")
"""Scenarios that compare job shares and placement (perflow, flowlane; ecmp on the fabric):
what they measure is asserted in one run of each by tests/mininet/test_job_shares.py (Jain,
the 2:1 ratio against perflow) and test_fabric.py / test_jobs.py (a job's paths, its first
packet classified); their full-length figures are ``make scenarios``' (docs/benchmarks.md)."""
SHIPPED = [name for name in sorted(scenario_files(scenario.SCENARIOS)) if name not in FABRIC + JOBS]
FABRIC_MODES = [Mode.ECMP, Mode.FLOWLANE]
COLLIDE_MIN_GOODPUT = 0.6
"""flowlane's training goodput over the optimum in ``collide`` (0.81 measured over 20 s)."""
COLLIDE_VS_ECMP = 0.95
"""flowlane's goodput against ecmp's in the same run: at least as good, less the noise."""
COLLIDE_MIN_JAIN = 0.85
"""Jain's index of flowlane's TCP flows (target 0.95; 0.98 measured over 20 s, 0.92-0.98 in
4 s runs here, one beside the parallel fast tier; ecmp 0.48-0.53)."""
COLLIDE_MIN_FLOW_BPS = 2e6
"""Every placed flow gets a fair part of its 10 Mbit/s link (ecmp starved one to 0.4)."""
FAILOVER_MAX_LOSS_MS = 100.0
"""Probe loss to the local failure under flowlane: the target (0 ms measured)."""
FAILOVER_MAX_RECOVERY_S = 2.0
"""Back to 0.9 of the new optimum after the local failure: the target (0.4 s measured)."""
FAILOVER_VS_ECMP = 0.9
FAILOVER_MIN_JAIN = 0.9
"""Jain's index of flowlane's two TCP flows (0.999 measured)."""


@pytest.fixture(autouse=True)
def run_mark(monkeypatch: pytest.MonkeyPatch) -> str:
    """This test's mark in the environment: what it starts (the runner, Mininet's hosts, the
    workloads) carries it, so the leftover check looks at this test's processes only."""
    value = uuid.uuid4().hex
    monkeypatch.setenv(MARK, value)
    return value


def leftovers(name: str, mark: str) -> list[str]:
    """Everything a run of scenario ``name`` could leave behind; empty when clean.

    Only what the run made: its bridges and their ports (by the plan's names), QoS rows
    that name one of those ports, and processes that carry the test's mark.
    """
    spec = load_scenario(scenario.SCENARIOS / f"{name}.yaml", harness.REPO).scenario
    plan = control_plan(spec, spec.plan())  # the control phase's sinks too
    ports = set(plan.switch_ports())
    found = []
    bridges = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True).stdout
    found += [f"bridge {b}" for b in bridges.split() if b in {s.name for s in plan.switches}]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    names = {line.split(": ")[1].split("@")[0] for line in links.splitlines() if ": " in line}
    found += [f"link {n}" for n in sorted(names & ports)]
    found += [f"qos row of {port}" for port in sorted(owned_qos_ports() & ports)]
    found += [f"process {p.pid} ({p.command})" for p in carrying(mark)]
    return found


def assert_clean(name: str, mark: str) -> None:
    """Nothing left once Mininet's host shells, which are killed without a wait, are gone."""
    with contextlib.suppress(TimeoutError):
        harness.wait_for("the run's processes to exit", lambda: not leftovers(name, mark), 10, 0.2)
    assert leftovers(name, mark) == []


def is_png(path: Path) -> bool:
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return False
    width, height = struct.unpack(">II", data[16:24])
    return bool(width > 300 and height > 200)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_scenario_runs_and_flowlane_beats_fifo(
    name: str, tmp_path: Path, run_mark: str
) -> None:
    harness.check_prerequisites()
    out = tmp_path / name
    loaded = load_scenario(scenario.SCENARIOS / f"{name}.yaml", harness.REPO)
    # The leaf-spine's stp and ecmp modes are covered by the fabric tests. Static rules run
    # in one scenario only (their report rows are the same code as fifo's): each mode costs
    # a controller start and its phases, about 12 s, and only fifo and flowlane are compared.
    shared = SHARED_MODES if name == STATIC_IN else tuple(m for m in SHARED_MODES if m != "static")
    modes = [str(mode) for mode in loaded.scenario.modes if str(mode) in shared]
    document = yaml.safe_load((scenario.SCENARIOS / f"{name}.yaml").read_text())
    short = tmp_path / f"{name}.yaml"
    ramp = RAMPS.get(name, TEST_RAMP)
    short.write_text(yaml.safe_dump(document | {"ramp": ramp}, sort_keys=False))
    references = SHORT_S if name in FULL_REFERENCES else REFERENCE_S
    _, path = scenario.run(
        str(short),
        modes=[Mode(m) for m in modes],
        duration_s=MEASURED_S.get(name, SHORT_S),
        out=out,
        reference_s=references,
    )

    report = Report.model_validate_json(path.read_text())
    assert report.scenario == name and report.modes == modes
    assert set(shared) <= set(modes)
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
    print(
        f"{name}: inference p99 fifo {fifo.latency_ms.p99} ms, flowlane {flowlane.latency_ms.p99}"
        f" ms: {fifo.latency_ms.p99 / max(flowlane.latency_ms.p99, 1e-3):.1f}x"
    )
    assert flowlane.latency_ms.p99 < fifo.latency_ms.p99, (
        f"{name}: flowlane p99 {flowlane.latency_ms.p99} ms, fifo {fifo.latency_ms.p99} ms"
    )
    assert_clean(name, run_mark)


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


def test_interrupted_run_leaves_nothing_behind(tmp_path: Path, run_mark: str) -> None:
    harness.check_prerequisites()
    out = tmp_path / "interrupted"
    # Short phases: the run still has its alone, control and three modes' phases ahead
    # (over 15 s) when it is interrupted, right after the idle one.
    runner = start_runner(out, CLEANUP_S)
    try:
        # Interrupt while training and inference run: the idle reference is done.
        harness.wait_for(
            "the idle phase to finish", lambda: (out / "raw" / "idle.json").exists(), 90
        )
        assert ours(run_mark, "iperf3"), "training should be running when the run is interrupted"
        runner.send_signal(signal.SIGINT)
        output, _ = runner.communicate(timeout=60)
    finally:
        harness.stop_process(runner)
    assert runner.returncode == 128 + signal.SIGINT, output
    assert "interrupted by SIGINT" in output
    assert not (out / "report.json").exists()
    assert_clean("isolation", run_mark)


def test_failed_run_leaves_nothing_behind(tmp_path: Path, run_mark: str) -> None:
    """The controller dies mid-run: the run fails, says why, and still removes everything."""
    harness.check_prerequisites()
    out = tmp_path / "failed"
    runner = start_runner(out, CLEANUP_S)
    try:
        # The first controller (the references', under the flowlane policy) dies while the
        # idle phase runs: the run still has every other phase ahead of it.
        policy, log = out / "policy-flowlane.yaml", out / "controller-idle.log"
        harness.wait_for(
            "the first controller to hold the switch",
            lambda: log.exists() and "in sync" in log.read_text(errors="replace"),
            120,
        )
        for pid in ours(run_mark, str(policy)):
            os.kill(pid, signal.SIGKILL)
        output, _ = runner.communicate(timeout=120)
    finally:
        harness.stop_process(runner)
    assert runner.returncode == 1, output
    said = " ".join(output.split())  # a terminal may wrap the message anywhere
    assert "scenario failed" in said and "controller exited" in said, output
    assert (out / "diagnostics.txt").exists()
    assert_clean("isolation", run_mark)


def ours(mark: str, text: str) -> list[int]:
    """PIDs of this test's processes whose command line holds ``text``."""
    return [process.pid for process in carrying(mark) if text in process.command]


def fabric_report(name: str, path: Path) -> Report:
    """The report of a fabric scenario run, with its figures printed against the targets."""
    report = Report.model_validate_json(path.read_text())
    assert report.scenario == name and report.modes == [str(m) for m in FABRIC_MODES]
    # The short fabric runs keep only the idle reference, measured for REFERENCE_S (the
    # modes' p99 is read against it, not asserted on; at 50 requests/s, 50 samples): the
    # control phase is covered by every shipped scenario's run, and these two are the
    # longest of the suite.
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


def test_collide_runs_under_ecmp_and_flowlane(tmp_path: Path, run_mark: str) -> None:
    harness.check_prerequisites()
    document = yaml.safe_load((scenario.SCENARIOS / "collide.yaml").read_text())
    short = tmp_path / "collide.yaml"
    short.write_text(yaml.safe_dump(document | {"references": ["idle"]}, sort_keys=False))
    out = tmp_path / "collide"
    # 6 s: placement takes a detection poll and a round (about 1-2 s) to separate the
    # flows, which in a 4 s window left a starved flow's share to chance on a busy machine.
    _, path = scenario.run(
        str(short), modes=list(FABRIC_MODES), duration_s=6.0, out=out, reference_s=REFERENCE_S
    )
    report = fabric_report("collide", path)
    assert report.optimum_bps == pytest.approx(80e6, rel=1e-6)
    for mode in report.modes:
        flows = report.phases[mode].training_flows
        assert len(flows) == 8 and all(flow.goodput_bps > 0 for flow in flows)
        assert sum(not flow.congestion_controlled for flow in flows) == 2  # the UDP pair
    assert report.plots == [LATENCY_CDF, THROUGHPUT]
    # The targets, compared between the modes of this run (docs/benchmarks.md, 20 s phases:
    # flowlane 0.81 of the optimum and Jain 0.98, ecmp 0.60 and 0.81; the alone phase's
    # ceiling is 0.88 on this CPU, so 0.95 of the optimum is out of reach here). Hashing may
    # happen to spread the flows well, so flowlane must match ecmp, not beat it by a margin.
    rows = {row.mode: row for row in report.headline}
    flowlane, ecmp = rows[Mode.FLOWLANE], rows[Mode.ECMP]
    assert flowlane.goodput_over_optimum is not None and ecmp.goodput_over_optimum is not None
    assert flowlane.goodput_over_optimum >= COLLIDE_MIN_GOODPUT, flowlane
    assert flowlane.goodput_over_optimum >= COLLIDE_VS_ECMP * ecmp.goodput_over_optimum, rows
    assert flowlane.jain is not None and flowlane.jain >= COLLIDE_MIN_JAIN, flowlane
    # Placement gives every flow a link of its own: none starves behind another.
    placed = [f.goodput_bps for f in report.phases[Mode.FLOWLANE].training_flows]
    hashed = [f.goodput_bps for f in report.phases[Mode.ECMP].training_flows]
    print(
        f"collide: slowest flow flowlane {min(placed) / 1e6:.2f} Mbit/s (>= 2),"
        f" ecmp {min(hashed) / 1e6:.2f}"
    )
    assert min(placed) >= COLLIDE_MIN_FLOW_BPS, placed
    assert_clean("collide", run_mark)


def test_failover_runs_a_local_failure_under_ecmp_and_flowlane(
    tmp_path: Path, run_mark: str
) -> None:
    """A shortened failover: leaf1's uplink to spine2 fails at 3 s and is back at 6 s.

    The training figures are read over the measured window, 7 s from the end of the 2 s ramp
    and inference's 0.5 s warm-up (2.5 s after training started) to the phase's end (9.5 s):
    0.5 s before the failure, the 3 s it lasts and 3.5 s of both links up again, the same
    failure for both modes of the run. (9 s before: 2 s more of both links up in each mode
    told nothing more, and cost 4 s.)
    """
    harness.check_prerequisites()
    document = yaml.safe_load((scenario.SCENARIOS / "failover.yaml").read_text())
    document |= {
        "duration": "7s",
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
    _, path = scenario.run(str(short), modes=list(FABRIC_MODES), out=out, reference_s=REFERENCE_S)
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
    # The targets (docs/benchmarks.md, 27 s phases: flowlane lost 0 ms of the probe to the
    # local failure and was back to 0.9 of the new optimum in 0.4 s; ecmp lost 2 ms).
    flowlane = report.phases[Mode.FLOWLANE]
    down = flowlane.events[0]
    assert down.probe_crossed, "the probe did not cross the failing link: nothing was tested"
    assert down.probe_loss_ms is not None and down.probe_loss_ms <= FAILOVER_MAX_LOSS_MS, down
    assert down.recovery_s is not None and down.recovery_s <= FAILOVER_MAX_RECOVERY_S, down
    # Both modes see the same failure in the same run: placement never does worse than
    # hashing (docs: 0.75 of the optimum against 0.46 when ecmp hashed both onto one spine).
    rows = {row.mode: row for row in report.headline}
    assert rows[Mode.FLOWLANE].goodput_over_optimum is not None
    assert rows[Mode.ECMP].goodput_over_optimum is not None
    assert (
        rows[Mode.FLOWLANE].goodput_over_optimum
        >= FAILOVER_VS_ECMP * rows[Mode.ECMP].goodput_over_optimum
    ), rows
    assert rows[Mode.FLOWLANE].jain is not None and rows[Mode.FLOWLANE].jain >= FAILOVER_MIN_JAIN
    assert_clean("failover", run_mark)
