"""Run a scenario: its topology in Mininet, its workloads, under every mode, and write the report.

    sudo .venv/bin/flowlane scenario run isolation [--modes fifo,flowlane] [--duration 10]
    sudo .venv/bin/python mininet/scenario.py run isolation      # the same, directly

One network serves the whole invocation.  Phases run one after the other:
``idle`` (inference alone) and ``alone`` (training alone) under the full
policy, then each mode with training and inference together, the controller
restarted with the mode's policy and the switches reconciled to it before
traffic starts.  The report (``report.json``), the plots and the controller
logs go to ``--out``.

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import harness
import httpx
import workloads
import yaml
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from topologies import PlannedTopo

from controller.pipeline.flows import Owner, cookie_owner
from controller.policy.errors import FieldError
from controller.policy.load import load_policy_file
from controller.policy.model import Policy
from controller.scenario import results
from controller.scenario.jobs import workload_jobs
from controller.scenario.modes import mode_document
from controller.scenario.report import ALONE, IDLE, PhaseResult, Report, headline
from controller.scenario.spec import (
    BulkWorkload,
    LoadedScenario,
    Mode,
    ScenarioError,
    load_scenario,
    scenario_files,
)

SCENARIOS = harness.REPO / "mininet" / "scenarios"
SETTLE_S = 1.0
"""Pause after the switches are in sync, so the previous phase's queues have drained."""


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


@dataclass(frozen=True)
class Phase:
    name: str
    mode: Mode
    training: bool
    inference: bool


def phases(modes: list[Mode]) -> list[Phase]:
    """References first, under the full policy, then every mode with both loads."""
    return [
        Phase(IDLE, Mode.FLOWLANE, training=False, inference=True),
        Phase(ALONE, Mode.FLOWLANE, training=True, inference=False),
        *(Phase(str(mode), mode, training=True, inference=True) for mode in modes),
    ]


def phase_length(phase: Phase, options: Options) -> float:
    """Seconds of traffic in a phase: training's ramp, then the measured window."""
    ramp = options.ramp_s if phase.training and phase.inference else 0.0
    warmup = workloads.INFERENCE_WARMUP_S if phase.inference else options.ramp_s
    return ramp + warmup + options.duration_s


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
        self.plan = loaded.scenario.plan()
        self.options = options
        self.progress = progress
        self.capacity_bps = loaded.policy.ports.configured_rate(self.scenario.bottleneck).bps

    def run(self) -> Report:
        started = datetime.datetime.now(datetime.UTC)
        harness.check_prerequisites()
        self.options.out.mkdir(parents=True, exist_ok=True)
        self._check_free()
        ofp_port = harness.free_port()
        rstp_root = self.plan.switches[-1].name if self.plan.loops else None
        plan_phases = phases(self.options.modes)
        tasks = {
            p.name: self.progress.add_task(p.name, total=phase_length(p, self.options), start=False)
            for p in plan_phases
        }
        done: dict[str, PhaseResult] = {}
        topo = PlannedTopo(plan=self.plan)
        with (
            harness.network(topo, ofp_port, rstp_root) as net,
            workloads.servers(net, self.scenario),
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
            duration_s=self.options.duration_s,
            ramp_s=self.options.ramp_s,
            modes=modes,
            environment=environment(),
            started_at=started.isoformat(timespec="seconds"),
            finished_at=finished.isoformat(timespec="seconds"),
            phases=done,
            headline=headline(done, modes, self.capacity_bps),
        )

    def _run_group(
        self,
        net: Any,
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
        with _session(policy_file, log, ofp_port, with_api=bool(jobs)) as session:
            try:
                self._wait_ready(net, session.policy, first=not done)
                if jobs:
                    self._register(session, jobs)
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
            response = httpx.post(f"{session.api}/v1/jobs", json=job, timeout=10)
            if response.status_code >= 300:
                raise RunError(f"job {job['name']}: {response.status_code} {response.text}")

        def installed() -> bool:
            return all(
                sum(cookie_owner(c) is Owner.JOB for c in harness.ofctl_cookies(s.name))
                >= len(jobs)
                for s in self.plan.switches
            )

        harness.wait_for("every switch to hold the jobs' flows", installed, 30, 0.2)

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
            if groups and groups[-1][0] is phase.mode and phase.name in (IDLE, ALONE):
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

    def _wait_ready(self, net: Any, policy: Any, first: bool) -> None:
        """Every switch holds the mode's pipeline and queues; first time, every host answers."""
        for switch in self.plan.switches:
            harness.wait_in_sync(switch.name, policy, self.plan.ports_of(switch.name), timeout_s=60)
        if first:  # a spanning tree takes a few seconds to open its ports
            harness.wait_for(
                "every host to reach every other", lambda: net.pingAll(timeout=1) == 0, 60, 1
            )
        time.sleep(SETTLE_S)

    def _run_phase(
        self, net: Any, phase: Phase, task: Any, jobs: list[dict[str, Any]]
    ) -> PhaseResult:
        options, scenario = self.options, self.scenario
        length = phase_length(phase, options)
        running = workloads.Running()
        self.progress.start_task(task)
        ticker = _Ticker(self.progress, task, length)
        try:
            origin = time.time()
            if phase.training:
                for workload in scenario.training:
                    if isinstance(workload, BulkWorkload):
                        omit = length - options.duration_s
                        workloads.start_bulk(net, workload, length + 0.5, omit, running)
                    else:
                        workloads.start_allreduce(net, workload, length + 0.5, running)
            if phase.inference:
                if phase.training:
                    _sleep_until(origin + options.ramp_s)
                window_start = time.time() + workloads.INFERENCE_WARMUP_S
                for index, workload in enumerate(scenario.inference):
                    workloads.start_inference(
                        net, workload, options.duration_s, options.seed + 100 * index, running
                    )
            else:
                window_start = origin + options.ramp_s
            collected = workloads.collect(running, length + 60)
            raw = self.options.out / "raw"
            raw.mkdir(exist_ok=True)
            (raw / f"{phase.name}.json").write_text(json.dumps(dataclasses.asdict(collected)))
        finally:
            ticker.stop()
            for process in running.all():
                harness.stop_process(process)
        window = (window_start, window_start + options.duration_s)
        inference = results.inference_result(collected.inference) if phase.inference else None
        bulk = [results.iperf_flow(run) for run in collected.bulk]
        allreduce = [
            results.allreduce_result(name, workers, window)
            for name, workers in collected.allreduce.items()
        ]
        return results.phase_result(
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
            interval_s=workloads.TIMELINE_INTERVAL_S,
        )


@dataclass
class _Session:
    """A controller run: alone, or inside ``flowlane up`` when the mode registers jobs."""

    policy: Policy
    log: Callable[[], str]
    exited: Callable[[], int | None]
    api: str | None = None


@contextmanager
def _session(policy_file: Path, log: Path, ofp_port: int, with_api: bool) -> Iterator[_Session]:
    if with_api:
        with harness.stack(policy_file, log, ofp_port) as stack:
            yield _Session(load_policy_file(policy_file), stack.log, stack.process.poll, stack.api)
    else:
        with harness.controller(policy_file, log, ofp_port) as ctl:
            yield _Session(ctl.policy, ctl.log, ctl.process.poll)


def _sleep_until(moment: float) -> None:
    delay = moment - time.time()
    if delay > 0:
        time.sleep(delay)


class _Ticker:
    """Moves a phase's progress bar with the clock while the main thread waits on processes."""

    def __init__(self, progress: Progress, task: Any, length: float) -> None:
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
) -> tuple[Report, Path]:
    """Run one scenario end to end and write its report; the CLI and the tests call this."""
    from controller.scenario.plots import write_plots
    from controller.scenario.summary import summary_table

    console = console or Console(stderr=True)
    loaded = load_scenario(resolve(name_or_path), harness.REPO)
    scenario = loaded.scenario
    options = Options(
        modes=modes or list(scenario.modes),
        duration_s=duration_s or scenario.duration,
        ramp_s=scenario.ramp,
        out=out or default_out(scenario.name),
    )
    columns = (TextColumn("{task.description:>9}"), BarColumn(), TimeRemainingColumn())
    with signals_unwind(), Progress(*columns, console=console) as progress:
        console.print(
            f"scenario [bold]{scenario.name}[/]: modes {', '.join(map(str, options.modes))},"
            f" {options.duration_s:g} s measured per phase; output in {options.out}"
        )
        report = Runner(loaded, options, progress).run()
    report.plots = write_plots(report, options.out)
    path = options.out / "report.json"
    path.write_text(report.model_dump_json(indent=2))
    console.print(summary_table(report))
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
    run_parser.add_argument("--modes", help="comma-separated: fifo, static, flowlane")
    run_parser.add_argument("--duration", type=float, help="seconds measured per phase")
    run_parser.add_argument("--out", type=Path, help="report directory (default reports/NAME-TIME)")
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    if args.command == "list":
        from controller.scenario.summary import scenario_list

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
        console.print(f"[red]invalid scenario[/]: {exc}", markup=True, highlight=False)
        return 2
    except Exception as exc:  # the network and processes are gone by now: say why, briefly
        console.print(f"[red]scenario failed[/]: {exc}", highlight=False)
        return 1
    except Interrupted as exc:
        console.print(f"interrupted by {exc}: stopped every process and removed the network")
        return 128 + exc.signum
    return 0


if __name__ == "__main__":
    sys.exit(main())
