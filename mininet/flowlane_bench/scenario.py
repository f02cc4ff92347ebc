"""Run a scenario: its topology in Mininet, its workloads, under every mode, and write the report.

    sudo .venv/bin/flowlane scenario run isolation [--modes fifo,flowlane] [--duration 10]
    sudo .venv/bin/python -m flowlane_bench.scenario run isolation      # the same, directly

One network serves the whole invocation.  Phases run one after the other:
``idle`` (inference alone), ``alone`` (training alone) and ``control``
(training beside inference but sent to sink hosts on the senders' own
switches, so it loads the CPUs without sharing a queue with inference) under
the full policy, then each mode with training and inference together, the controller
restarted with the mode's policy and the switches reconciled to it before
traffic starts.  The report (``report.json``), the plots and the controller
logs go to ``--out``.

On a leaf-spine the modes also differ in forwarding: ``NORMAL`` needs RSTP
(a spanning tree) on the bridges, the controller's fabric forwarding needs
it off.  When forwarding changes between two controller runs, the bridges
are emptied (no flows, groups or meters) before RSTP is switched, so the
next controller starts from a clean slate and nothing floods meanwhile; a
mode starts once every host pair of the workloads answers a ping.  Link
events (``events``) are carried out during each mode's phase with Mininet's
``configLinkStatus``, and every link is up again before the next phase.

SIGINT, SIGTERM and SIGHUP unwind the run like an error does: every process
is stopped by PID and the network, its bridges and its QoS rows removed.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
import yaml
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from controller.cli.render import console as stderr_console  # piped: tables not cut at 80
from controller.pipeline.flows import Owner, cookie_owner
from controller.policy.errors import FieldError
from controller.policy.jobs import JobSpec
from controller.policy.load import load_policy_file
from controller.policy.model import Policy
from flowlane_bench import harness, probe, workloads
from flowlane_bench.nodes import Net
from flowlane_bench.suite import control, fabric, failover, results
from flowlane_bench.suite import probe as probe_results
from flowlane_bench.suite.jobs import workload_jobs
from flowlane_bench.suite.modes import mode_document, mode_policy, needs_rstp
from flowlane_bench.suite.report import (
    ALONE,
    CONTROL,
    IDLE,
    REFERENCES,
    EventResult,
    PhaseResult,
    ProbeResult,
    Report,
    headline,
)
from flowlane_bench.suite.spec import (
    AllReduceWorkload,
    BulkFlow,
    BulkWorkload,
    LinkEvent,
    LoadedScenario,
    Mode,
    ProbeWorkload,
    Reference,
    Scenario,
    ScenarioError,
    event_errors,
    load_scenario,
    scenario_files,
)
from flowlane_bench.topologies import PlannedTopo

SCENARIOS = harness.REPO / "mininet" / "scenarios"
FABRIC_SETTLE_S = 1.0
"""Pause after a fabric with loops answers its pings, before traffic: its forwarding still
settles for a moment (RSTP port roles; the controller's discovery and placement rounds).
Without loops, in sync and answering is ready, and only the queues are waited for."""
DRAIN_TIMEOUT_S = 10.0
"""Longest wait for the switch ports' queues to empty before a controller run's traffic starts
(a full 1000-packet FIFO drains in a quarter of a second at 50 Mbit)."""
EVENT_INTERVAL_S = 0.2
"""Timeline resolution of scenarios with link events: recovery is read from it."""
TRACE_BURST = 300
"""Datagrams of the burst that traces a probe pair's path (sent alone, before traffic)."""


class RunError(RuntimeError):
    """A run failed; the message says which phase and carries the switches' state."""


class Interrupted(BaseException):
    """A signal asked the run to stop; raised in the main thread so every ``finally`` runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def signals_unwind() -> Iterator[None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        raise Interrupted(signum)

    previous = {
        sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    }
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@dataclass(frozen=True)
class Options:
    modes: list[Mode]
    duration_s: float
    ramp_s: float
    out: Path
    seed: int = 1
    reference_s: float | None = None
    """Seconds measured in each reference phase (idle, alone, control); None: ``duration_s``.
    A short run's references need no more samples than its modes do."""


def measured_s(phase: Phase, options: Options) -> float:
    """Seconds of a phase's measured window."""
    if phase.name in REFERENCES and options.reference_s is not None:
        return options.reference_s
    return options.duration_s


@dataclass(frozen=True)
class Phase:
    name: str
    mode: Mode
    training: bool
    inference: bool


def phases(modes: list[Mode], references: tuple[Reference, ...] = tuple(Reference)) -> list[Phase]:
    """References first, under the full policy, then every mode with both loads.

    ``control`` follows ``alone``: its training senders are paced at the rates
    they reached there.
    """
    reference_phases = [
        Phase(IDLE, Mode.FLOWLANE, training=False, inference=True),
        Phase(ALONE, Mode.FLOWLANE, training=True, inference=False),
        Phase(CONTROL, Mode.FLOWLANE, training=True, inference=True),
    ]
    return [
        *(phase for phase in reference_phases if Reference(phase.name) in references),
        *(Phase(str(mode), mode, training=True, inference=True) for mode in modes),
    ]


def phase_length(phase: Phase, options: Options) -> float:
    """Seconds of traffic in a phase: training's ramp, then the measured window."""
    ramp = options.ramp_s if phase.training and phase.inference else 0.0
    warmup = workloads.INFERENCE_WARMUP_S if phase.inference else options.ramp_s
    return ramp + warmup + measured_s(phase, options)


def environment() -> dict[str, Any]:
    """What the figures depend on: versions, CPUs, the commit."""

    def first_line(command: list[str]) -> str:
        try:
            done = subprocess.run(command, capture_output=True, text=True, cwd=harness.REPO)
        except OSError:
            return "unknown"
        text = (done.stdout or done.stderr).strip()
        return text.splitlines()[0] if done.returncode == 0 and text else "unknown"

    from importlib.metadata import version

    commit = first_line(["git", "rev-parse", "HEAD"])
    dirty = first_line(["git", "status", "--porcelain", "--untracked-files=no"])
    return {
        "flowlane": version("flowlane"),
        "git_commit": commit,
        "git_dirty": dirty not in ("", "unknown"),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpus": len(os.sched_getaffinity(0)),
        "ovs": first_line(["ovs-vswitchd", "--version"]),
        "iperf3": first_line(["iperf3", "--version"]),
        "mininet": first_line([harness.PYTHON, "-c", "import mininet.net as m; print(m.VERSION)"]),
        "os_ken": version("os-ken"),
    }


class Runner:
    def __init__(self, loaded: LoadedScenario, options: Options, progress: Progress) -> None:
        self.loaded = loaded
        self.scenario = loaded.scenario
        plan = loaded.scenario.plan()
        self.control_flows: list[control.ControlFlow] = []
        if Reference.CONTROL in self.scenario.references:
            self.control_flows = control.control_flows(self.scenario, plan)
            plan = control.control_plan(self.scenario, plan)
        self.plan = plan
        """The scenario's topology, with the control phase's sinks linked last."""
        self.done: dict[str, PhaseResult] = {}
        self.options = options
        self.progress = progress
        self.capacity_bps = loaded.policy.ports.configured_rate(self.scenario.bottleneck).bps
        self.topology = fabric.fabric_topology(self.plan, loaded.policy)
        self.training = fabric.training_commodities(self.scenario, self.plan)
        self.optimum_bps = fabric.optimum_bps(loaded) if self.plan.loops and self.training else None
        self.interval_s = (
            EVENT_INTERVAL_S if self.scenario.events else workloads.TIMELINE_INTERVAL_S
        )
        self.bridges = [switch.name for switch in self.plan.switches]
        self.rstp_root = self.plan.switches[-1].name if self.plan.loops else None
        self.previous: Policy | None = None
        """The policy of the previous controller run (None before the first)."""
        self.probe_pair: BulkFlow | None = None
        self.probe_path: list[str] = []

    def run(self) -> Report:
        started = datetime.datetime.now(datetime.UTC)
        harness.check_prerequisites()
        late = event_errors(
            self.scenario.events, self.plan, self.options.ramp_s + self.options.duration_s
        )
        if late:
            raise RunError(f"--duration {self.options.duration_s:g}: {late[0]}")
        self.options.out.mkdir(parents=True, exist_ok=True)
        self._check_free()
        ofp_port = harness.free_port()
        plan_phases = phases(self.options.modes, tuple(self.scenario.references))
        tasks = {
            p.name: self.progress.add_task(p.name, total=phase_length(p, self.options), start=False)
            for p in plan_phases
        }
        done = self.done
        topo = PlannedTopo(plan=self.plan)
        with (
            harness.network(topo, ofp_port) as net,
            workloads.servers(net, self.scenario),
            _sink_servers(net, self.control_flows),
        ):
            for mode, group in self._by_controller(plan_phases):
                self._run_group(net, ofp_port, mode, group, tasks, done)
        finished = datetime.datetime.now(datetime.UTC)
        modes = [str(mode) for mode in self.options.modes]
        return Report(
            scenario=self.scenario.name,
            description=self.scenario.description,
            scenario_file=str(self.loaded.source or ""),
            spec=self.scenario.model_dump(mode="json", by_alias=True),
            policy_file=str(self.scenario.policy),
            bottleneck=self.scenario.bottleneck,
            capacity_bps=self.capacity_bps,
            optimum_bps=self.optimum_bps,
            duration_s=self.options.duration_s,
            ramp_s=self.options.ramp_s,
            modes=modes,
            environment=environment(),
            started_at=started.isoformat(timespec="seconds"),
            finished_at=finished.isoformat(timespec="seconds"),
            phases=done,
            headline=headline(done, modes, self.capacity_bps, self.optimum_bps, self.scenario.jobs),
        )

    def _run_group(
        self,
        net: Net,
        ofp_port: int,
        mode: Mode,
        group: list[Phase],
        tasks: dict[str, Any],
        done: dict[str, PhaseResult],
    ) -> None:
        """Phases under one controller run; a failure leaves the switches' state in the output."""
        jobs = (
            workload_jobs(self.scenario) if mode is Mode.FLOWLANE and group[0].name == mode else []
        )
        log = self.options.out / f"controller-{group[0].name}.log"
        policy_file = self._write_policy(mode)
        current = group[0].name
        self._prepare_switches(mode_policy(self.loaded.policy_document, mode))
        with _session(policy_file, log, ofp_port, with_api=bool(jobs)) as session:
            try:
                self._wait_ready(net, session.policy, session.exited)
                if jobs:
                    self._register(session, jobs)
                if self.scenario.probes and any(p.name not in REFERENCES for p in group):
                    self._trace_probe(net, self.scenario.probes[0])
                for phase in group:
                    current = phase.name
                    done[phase.name] = self._run_phase(net, phase, tasks[phase.name], jobs)
                    if session.exited() is not None:
                        raise RunError(f"the controller exited ({session.exited()})")
                    problems = harness.log_problems(session.log())
                    if problems:
                        raise RunError("controller logged errors:\n" + "\n".join(problems))
            except Exception as exc:
                path = self.options.out / "diagnostics.txt"
                state = [
                    harness.diagnostics(s.name, self.plan.ports_of(s.name))
                    for s in self.plan.switches
                ]
                path.write_text("\n".join(state) + "\n--- controller log ---\n" + session.log())
                raise RunError(
                    f"{self.scenario.name}, phase {current}: {exc}"
                    f" (switch state and controller log: {path})"
                ) from exc

    def _register(self, session: _Session, jobs: list[dict[str, Any]]) -> None:
        """Register the jobs through the REST API, as a scheduler would; wait for their flows."""
        assert session.api is not None
        for job in jobs:
            response = httpx.post(
                f"{session.api}/v1/jobs", json=job, timeout=10, headers=session.headers
            )
            if response.status_code >= 300:
                raise RunError(f"job {job['name']}: {response.status_code} {response.text}")

        def installed() -> bool:
            return all(
                sum(cookie_owner(c) is Owner.JOB for c in harness.ofctl_cookies(s.name))
                >= len(jobs)
                for s in self.plan.switches
            )

        harness.wait_for("every switch to hold the jobs' flows", installed, 30, 0.2)
        specs = [JobSpec.model_validate(job) for job in jobs]
        for switch in self.plan.switches:  # a per-job class's queues follow the jobs
            harness.wait_in_sync(
                switch.name, session.policy, self.plan.ports_of(switch.name), 30, jobs=specs
            )

    def _check_free(self) -> None:
        """Refuse to start on top of another run: tearing ours down would remove its bridges."""
        bridges = subprocess.run(
            ["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True, text=True
        ).stdout.split()
        links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
        names = {line.split(": ")[1].split("@")[0] for line in links.splitlines() if ": " in line}
        taken = sorted(
            {s.name for s in self.plan.switches} & set(bridges)
            | set(self.plan.switch_ports()) & names
        )
        if taken:
            raise RunError(
                f"{', '.join(taken[:5])} already exist: another scenario or test is running,"
                " or a crashed run left them behind (`mn -c` removes them)"
            )

    @staticmethod
    def _by_controller(plan_phases: list[Phase]) -> list[tuple[Mode, list[Phase]]]:
        """Consecutive phases under the same mode share one controller run."""
        groups: list[tuple[Mode, list[Phase]]] = []
        for phase in plan_phases:
            if groups and groups[-1][0] is phase.mode and phase.name in REFERENCES:
                groups[-1][1].append(phase)
            else:
                groups.append((phase.mode, [phase]))
        return groups

    def _write_policy(self, mode: Mode) -> Path:
        path = self.options.out / f"policy-{mode}.yaml"
        header = f"# {mode} mode of {self.scenario.policy}, written by the scenario runner\n"
        document = mode_document(self.loaded.policy_document, mode)
        path.write_text(header + yaml.safe_dump(document, sort_keys=False))
        return path

    def _prepare_switches(self, policy: Policy) -> None:
        """Empty the bridges and switch RSTP when forwarding changes; before the controller starts.

        Fabric modes always start from empty bridges: a fabric controller
        must discover everything itself, not inherit the last one's groups.
        """
        previous, self.previous = self.previous, policy
        rstp = needs_rstp(policy, self.plan.loops)
        if previous is None:
            if rstp:
                harness.set_rstp(self.bridges, self.rstp_root)
            return
        was_rstp = needs_rstp(previous, self.plan.loops)
        if previous.forwarding.fabric or policy.forwarding.fabric or rstp != was_rstp:
            harness.reset_switches(self.bridges)
            if rstp != was_rstp:
                harness.set_rstp(self.bridges, self.rstp_root if rstp else None)

    def _wait_ready(
        self, net: Net, policy: Policy, exited: Callable[[], int | None] | None = None
    ) -> None:
        """Every switch holds the mode's pipeline and queues, and every workload pair answers.

        A spanning tree takes seconds to open its ports, and a fabric
        controller forwards only once it has discovered the links and the
        hosts: the pings are what says the fabric is ready.
        """
        for switch in self.plan.switches:
            harness.wait_in_sync(
                switch.name, policy, self.plan.ports_of(switch.name), timeout_s=60, exited=exited
            )
        pending = set(workload_pairs(self.scenario)) | set(
            control.control_pairs(self.control_flows)
        )
        ips = {host.name: host.ip for host in self.plan.hosts}
        if policy.forwarding.fabric:
            # A fabric learns hosts from their ARP: hosts that kept their neighbours from an
            # earlier mode would send none until those entries go stale (15 to 45 s).
            for host in self.plan.hosts:
                net.get(host.name).cmd("ip neigh flush all")

        def ping(src: str, dst: str) -> subprocess.Popen[str]:
            return net.get(src).popen(
                ["ping", "-c1", "-W1", ips[dst]],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

        def answered() -> bool:
            # All pairs at once: a fabric learns a host from its first packet, so pairs
            # pinged one after the other would each wait out a timeout. Each destination
            # pings back too, so it is heard from whatever its neighbour cache holds.
            pings = {pair: ping(*pair) for pair in sorted(pending)}
            teachers = [ping(dst, src) for src, dst in sorted(pending)]
            for pair, process in pings.items():
                if process.wait(10) == 0:
                    pending.discard(pair)
            for process in teachers:
                process.wait(10)
            return not pending

        try:
            harness.wait_for("every workload host pair to answer a ping", answered, 60, 0.5)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}: no answer on {sorted(pending)}") from None
        if self.plan.loops:
            time.sleep(FABRIC_SETTLE_S)
        wait_drained(self.plan.switch_ports())

    def _trace_probe(self, net: Net, workload: ProbeWorkload) -> None:
        """Trace each candidate pair's path with a burst sent alone; keep the first that crosses.

        The first link event's link is the one the stream must cross: hashing
        picks a spine per host pair, and the mode decides the hashing.
        """
        ips = {host.name: host.ip for host in self.plan.hosts}
        paths: list[list[str]] = []
        for flow in workload.flows:
            before = {bridge: harness.ofctl_tx_packets(bridge) for bridge in self.bridges}
            sender = probe.start_sender(
                net.get(flow.src),
                ips[flow.dst],
                workload.port,
                3000,
                workload.size,
                count=TRACE_BURST,
            )
            probe.report(f"probe trace {flow.src}->{flow.dst}", sender, 30)
            time.sleep(0.2)  # the last datagrams leave the last switch
            after = {bridge: harness.ofctl_tx_packets(bridge) for bridge in self.bridges}
            paths.append(fabric.raised_ports(self.plan, before, after, TRACE_BURST))
        index = (
            fabric.first_crossing(paths, self.plan, self.scenario.events[0].link)
            if self.scenario.events
            else 0
        )
        self.probe_pair, self.probe_path = workload.flows[index], paths[index]

    def _run_phase(
        self, net: Net, phase: Phase, task: TaskID, jobs: list[dict[str, Any]]
    ) -> PhaseResult:
        options, scenario = self.options, self.scenario
        length = phase_length(phase, options)
        window_s = measured_s(phase, options)
        running = workloads.Running()
        probes: list[subprocess.Popen[str]] = []
        measured = phase.name not in REFERENCES
        events = _Events(net, scenario.events if measured else [])
        probe_workload = scenario.probes[0] if scenario.probes and phase.inference else None
        probe_flow = self.probe_pair if measured else None
        self.progress.start_task(task)
        ticker = _Ticker(self.progress, task, length)
        try:
            if probe_workload is not None and probe_flow is not None:
                receiver = probe.start_receiver(
                    net.get(probe_flow.dst), probe_workload.port, length + 3
                )
                probes.append(receiver)
            origin = time.time()
            events.start(origin)
            if phase.name == CONTROL:
                paced = control.with_rates(self.control_flows, self.done[ALONE])
                _start_control(net, paced, length + 0.5, length - window_s, running)
            elif phase.training:
                for workload in scenario.training:
                    if isinstance(workload, BulkWorkload):
                        omit = length - window_s
                        workloads.start_bulk(
                            net, workload, length + 0.5, omit, running, self.interval_s
                        )
                    else:
                        workloads.start_allreduce(net, workload, length + 0.5, running)
            if probe_workload is not None and probe_flow is not None:
                ip = str(net.get(probe_flow.dst).IP())
                probes.append(
                    probe.start_sender(
                        net.get(probe_flow.src),
                        ip,
                        probe_workload.port,
                        probe_workload.rate,
                        probe_workload.size,
                        seconds=length,
                    )
                )
            if phase.inference:
                if phase.training:
                    _sleep_until(origin + options.ramp_s)
                window_start = time.time() + workloads.INFERENCE_WARMUP_S
                for index, inference_workload in enumerate(scenario.inference):
                    workloads.start_inference(
                        net,
                        inference_workload,
                        window_s,
                        options.seed + 100 * index,
                        running,
                    )
            else:
                window_start = origin + options.ramp_s
            collected = workloads.collect(running, length + 60)
            probe_reports = [
                probe.report(f"probe {role}", process, 30)
                for role, process in zip(("receiver", "sender"), probes, strict=False)
            ]
            events.finish()
            events.check()
            raw = self.options.out / "raw"
            raw.mkdir(exist_ok=True)
            (raw / f"{phase.name}.json").write_text(
                json.dumps({**dataclasses.asdict(collected), "probe": probe_reports})
            )
        finally:
            ticker.stop()
            events.finish()
            for process in [*running.all(), *probes]:
                harness.stop_process(process)
        window = (window_start, window_start + window_s)
        inference = results.inference_result(collected.inference) if phase.inference else None
        bulk = [results.iperf_flow(run) for run in collected.bulk]
        allreduce = [
            results.allreduce_result(name, workers, window)
            for name, workers in collected.allreduce.items()
        ]
        result = results.phase_result(
            phase.name,
            f"{phase.mode} mode of {scenario.policy}"
            + (f", jobs: {', '.join(job['name'] for job in jobs)}" if jobs else ""),
            inference=inference,
            inference_spans=results.inference_spans(
                collected.inference, workloads.TIMELINE_INTERVAL_S
            ),
            bulk=bulk,
            allreduce=allreduce,
            origin=origin,
            length_s=length + 1,
            interval_s=self.interval_s,
        )
        run = None
        if probe_workload is not None and probe_flow is not None and len(probe_reports) == 2:
            run = probe_results.probe_run(probe_reports[1], probe_reports[0])
            result.probe = self._probe_result(probe_workload, probe_flow, run)
        if events.events:
            result.events = self._event_results(events, origin, length, result, run)
        return result

    def _probe_result(
        self, workload: ProbeWorkload, flow: BulkFlow, run: probe_results.ProbeRun
    ) -> ProbeResult:
        whole = probe_results.loss(run)
        first = self.scenario.events[0].link if self.scenario.events else None
        return ProbeResult(
            workload=workload.name,
            label=f"{flow.src}->{flow.dst}",
            path=self.probe_path,
            crosses_first_event=first is not None
            and failover.crosses(self.probe_path, self.plan, first),
            rate=run.rate,
            sent=whole.sent,
            received=whole.received,
            lost=whole.lost,
            loss_ms=whole.loss_ms,
            longest_gap_ms=whole.longest_gap_ms,
        )

    def _event_results(
        self,
        events: _Events,
        origin: float,
        length: float,
        result: PhaseResult,
        run: probe_results.ProbeRun | None,
    ) -> list[EventResult]:
        others = []
        if self.scenario.probes and self.probe_pair is not None:
            others.append(
                fabric.probe_commodity(self.scenario.probes[0], self.plan, self.probe_pair)
            )
        optimums = failover.after_events(
            self.topology, self.plan, events.events, self.training, others
        )
        return failover.event_results(
            events.events,
            origin=origin,
            executed=events.executed,
            phase_s=length,
            optimums=optimums,
            series=result.timeline.get(results.TRAINING, []),
            interval_s=self.interval_s,
            probe=run,
            probe_path=self.probe_path,
            plan=self.plan,
        )


@contextmanager
def _sink_servers(net: Net, flows: list[control.ControlFlow]) -> Iterator[None]:
    """An iperf3 server per control flow on its sink, for the whole run (one test each)."""
    processes: list[subprocess.Popen[str]] = []
    try:
        for flow in flows:
            args = ["iperf3", "-s", "-p", str(flow.port)]
            processes.append(harness.host_popen(net.get(flow.sink), args))
        yield
    finally:
        for process in processes:
            harness.stop_process(process)


def _start_control(
    net: Net,
    flows: list[control.ControlFlow],
    seconds: float,
    omit_s: float,
    running: workloads.Running,
) -> None:
    """Every training sender to its sink, paced (``-b``) at the rate of the flow it stands for.

    Collected like the loaded bulk flows, each under its own workload's name.
    """
    for flow in flows:
        args = ["iperf3", "-c", str(net.get(flow.sink).IP()), "-p", str(flow.port), "-J"]
        args += [
            "-t",
            f"{workloads.iperf_seconds(seconds, omit_s):.1f}",
            "-O",
            f"{omit_s:.1f}",
            "-i",
            str(workloads.TIMELINE_INTERVAL_S),
        ]
        args += ["-b", str(flow.rate)] + (["-u"] if flow.protocol == "udp" else [])
        workload = BulkWorkload(
            kind="bulk",
            name=flow.workload,
            protocol=flow.protocol,
            flows=[BulkFlow(src=flow.src, dst=flow.sink)],
            udp_rate=flow.rate if flow.protocol == "udp" else None,
        )
        started = time.time()
        running.bulk.append(
            (workload, flow.label, started, harness.host_popen(net.get(flow.src), args))
        )


def workload_pairs(scenario: Scenario) -> list[tuple[str, str]]:
    """Every (source, destination) host pair the scenario's workloads send between."""
    pairs: set[tuple[str, str]] = set()
    for workload in scenario.workloads:
        if isinstance(workload, BulkWorkload | ProbeWorkload):
            pairs |= {(flow.src, flow.dst) for flow in workload.flows}
        elif isinstance(workload, AllReduceWorkload):
            ring = workload.workers
            pairs |= set(zip(ring, [*ring[1:], ring[0]], strict=True))
        else:
            pairs |= {
                (client, workload.servers[i % len(workload.servers)])
                for i, client in enumerate(workload.clients)
            }
    return sorted(pairs)


class _Events:
    """Carries out a phase's link events on their schedule, in a thread; restores every link.

    ``executed`` records when each was done (seconds since the phase's
    origin): a ``configLinkStatus`` takes a few milliseconds, and what
    follows an event is read from when it happened.
    """

    def __init__(self, net: Net, events: list[LinkEvent]) -> None:
        self.net = net
        self.events = list(events)
        self.executed: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._down: set[tuple[str, str]] = set()
        self.error: BaseException | None = None

    def start(self, origin: float) -> None:
        if not self.events:
            return

        def run() -> None:
            try:
                for event in self.events:
                    if self._stop.wait(max(0.0, origin + event.at - time.time())):
                        return
                    a, b = event.link
                    self.net.configLinkStatus(a, b, str(event.state))
                    self.executed.append(time.time() - origin)
                    if str(event.state) == "down":
                        self._down.add((a, b))
                    else:
                        self._down.discard((a, b))
            except Exception as exc:  # reported by finish(), in the main thread
                self.error = exc

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def finish(self) -> None:
        """Stop, and bring every link the events took down up again (safe to call twice)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        for a, b in sorted(self._down):
            self.net.configLinkStatus(a, b, "up")
        self._down.clear()

    def check(self) -> None:
        """Raise what the thread hit, or that the phase ended before every event ran."""
        if self.error is not None:
            error, self.error = self.error, None
            raise RunError(f"link event failed: {error}")
        if len(self.executed) < len(self.events):
            raise RunError(
                f"only {len(self.executed)} of {len(self.events)} link events ran:"
                " the phase ended first"
            )


@dataclass
class _Session:
    """A controller run: alone, or inside ``flowlane up`` when the mode registers jobs."""

    policy: Policy
    log: Callable[[], str]
    exited: Callable[[], int | None]
    api: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    """An admin's ``Authorization`` for ``api``."""


@contextmanager
def _session(policy_file: Path, log: Path, ofp_port: int, with_api: bool) -> Iterator[_Session]:
    if with_api:
        with harness.stack(policy_file, log, ofp_port) as stack:
            yield _Session(
                load_policy_file(policy_file),
                stack.log,
                stack.process.poll,
                stack.api,
                stack.headers,
            )
    else:
        with harness.controller(policy_file, log, ofp_port) as ctl:
            yield _Session(ctl.policy, ctl.log, ctl.process.poll)


def queued_packets(ports: Iterable[str]) -> int:
    """Packets waiting in the qdiscs of ``ports`` (switch ports, in this namespace) now."""
    done = subprocess.run(
        ["tc", "-s", "-j", "qdisc", "show"], capture_output=True, text=True, check=True
    )
    wanted = set(ports)
    return sum(int(q.get("qlen", 0)) for q in json.loads(done.stdout) if q.get("dev") in wanted)


def wait_drained(ports: Iterable[str]) -> None:
    """Until no packet of an earlier phase waits in a switch port's queue: a phase starts on
    empty queues (in place of a fixed pause; by the time a controller is in sync they
    usually are)."""
    harness.wait_for(
        "the switch ports' queues to drain", lambda: queued_packets(ports) == 0, DRAIN_TIMEOUT_S
    )


def _sleep_until(moment: float) -> None:
    delay = moment - time.time()
    if delay > 0:
        time.sleep(delay)


class _Ticker:
    """Moves a phase's progress bar with the clock while the main thread waits on processes."""

    def __init__(self, progress: Progress, task: TaskID, length: float) -> None:
        self._stop = threading.Event()
        start = time.monotonic()

        def tick() -> None:
            while not self._stop.wait(0.2):
                progress.update(task, completed=min(length, time.monotonic() - start))
            progress.update(task, completed=length)

        self._thread = threading.Thread(target=tick, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(1)


def default_out(name: str) -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return harness.REPO / "reports" / f"{name}-{stamp}"


def resolve(name_or_path: str) -> Path:
    """A shipped scenario's name, or a scenario file's path."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml"):
        return path
    files = scenario_files(SCENARIOS)
    if name_or_path not in files:
        raise ScenarioError(
            [FieldError("scenario", f"no scenario '{name_or_path}' (shipped: {', '.join(files)})")],
            name_or_path,
        )
    return files[name_or_path]


def run(
    name_or_path: str,
    modes: list[Mode] | None = None,
    duration_s: float | None = None,
    out: Path | None = None,
    console: Console | None = None,
    on_report: Callable[[Report, Path], None] | None = None,
    reference_s: float | None = None,
) -> tuple[Report, Path]:
    """Run one scenario end to end and write its report; the CLI and the tests call this.

    ``reference_s`` shortens the reference phases' measured window (the tests' short runs).
    """
    from flowlane_bench.suite.plots import write_plots
    from flowlane_bench.suite.summary import events_table, summary_table

    console = console or stderr_console(stderr=True)
    loaded = load_scenario(resolve(name_or_path), harness.REPO)
    scenario = loaded.scenario
    options = Options(
        modes=modes or list(scenario.modes),
        duration_s=duration_s or scenario.duration,
        ramp_s=scenario.ramp,
        out=out or default_out(scenario.name),
        reference_s=reference_s,
    )
    columns = (TextColumn("{task.description:>9}"), BarColumn(), TimeRemainingColumn())
    with signals_unwind(), Progress(*columns, console=console) as progress:
        console.print(
            f"scenario [bold]{scenario.name}[/]: modes {', '.join(map(str, options.modes))},"
            f" {options.duration_s:g} s measured per phase"
            + (f" ({reference_s:g} s per reference)" if reference_s is not None else "")
            + f"; output in {options.out}"
        )
        report = Runner(loaded, options, progress).run()
    report.plots = write_plots(report, options.out)
    path = options.out / "report.json"
    path.write_text(report.model_dump_json(indent=2))
    console.print(summary_table(report))
    events = events_table(report)
    if events is not None:
        console.print(events)
    for mode in report.modes:
        probe_result = report.phases[mode].probe
        if probe_result is not None:
            console.print(
                f"{mode}: probe {probe_result.label} via {', '.join(probe_result.path) or '?'}:"
                f" {probe_result.lost} of {probe_result.sent} lost ({probe_result.loss_ms:g} ms),"
                f" longest gap {probe_result.longest_gap_ms:g} ms"
            )
    console.print(f"report: {path}")
    if on_report:
        on_report(report, path)
    return report, path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the shipped scenarios")
    run_parser = commands.add_parser("run", help="run one scenario")
    run_parser.add_argument("scenario", help="a shipped scenario's name or a scenario file")
    run_parser.add_argument("--modes", help="comma-separated: fifo, static, flowlane, stp, ecmp")
    run_parser.add_argument("--duration", type=float, help="seconds measured per phase")
    run_parser.add_argument("--out", type=Path, help="report directory (default reports/NAME-TIME)")
    args = parser.parse_args(argv)
    console = stderr_console(stderr=True)
    if args.command == "list":
        from flowlane_bench.suite.summary import scenario_list

        console.print(scenario_list(SCENARIOS, harness.REPO))
        return 0
    try:
        modes = [Mode(m.strip()) for m in args.modes.split(",")] if args.modes else None
    except ValueError:
        parser.error(f"--modes: each mode is one of {', '.join(m.value for m in Mode)}")
    if args.duration is not None and args.duration <= 0:
        parser.error("--duration: must be a positive number of seconds")
    try:
        run(args.scenario, modes, args.duration, args.out, console)
    except ScenarioError as exc:
        console.print(
            f"[red]invalid scenario[/]: {exc}", markup=True, highlight=False, soft_wrap=True
        )
        return 2
    except Exception as exc:  # the network and processes are gone by now: say why, briefly
        console.print(f"[red]scenario failed[/]: {exc}", highlight=False, soft_wrap=True)
        return 1
    except Interrupted as exc:
        console.print(f"interrupted by {exc}: stopped every process and removed the network")
        return 128 + exc.signum
    return 0


if __name__ == "__main__":
    sys.exit(main())
