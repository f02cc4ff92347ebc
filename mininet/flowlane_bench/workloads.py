"""Start a scenario's workloads in Mininet hosts and collect what they report.

Training: iperf3 bulk streams (``bulk``) and the ring all-reduce generator
(``allreduce``).  Inference: the open-loop load generator (``loadgen``).
Every process is started with ``host.popen`` and stopped by PID; the
functions here only start, wait and parse, and what the outputs mean is
decided in ``flowlane_bench.suite.results``.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from flowlane_bench import harness
from flowlane_bench.nodes import Net
from flowlane_bench.suite.results import IperfRun, WorkloadOutputError
from flowlane_bench.suite.spec import AllReduceWorkload, BulkWorkload, InferenceWorkload, Scenario

TIMELINE_INTERVAL_S = 0.5
INFERENCE_WARMUP_S = 0.5


def _ip(net: Net, host: str) -> str:
    return str(net.get(host).IP())


def bulk_ports(workload: BulkWorkload) -> list[tuple[str, int]]:
    """(server host, port) of each flow: the workload's first port plus the flow's index."""
    return [(flow.dst, workload.first_port + i) for i, flow in enumerate(workload.flows)]


@contextmanager
def servers(net: Net, scenario: Scenario) -> Iterator[None]:
    """Inference servers and iperf3 servers for the whole run (every phase uses them)."""
    processes: list[subprocess.Popen[str]] = []
    try:
        for host, port in sorted({(s, w.port) for w in scenario.inference for s in w.servers}):
            server = harness.host_popen(
                net.get(host), harness.module_command("loadgen", "server", "--port", str(port))
            )
            processes.append(server)
            assert server.stdout is not None
            if "listening" not in server.stdout.readline():
                raise RuntimeError(f"inference server on {host}:{port} did not start")
        for workload in scenario.training:
            if isinstance(workload, BulkWorkload):
                for host, port in bulk_ports(workload):
                    processes.append(
                        harness.host_popen(net.get(host), ["iperf3", "-s", "-p", str(port)])
                    )
        yield
    finally:
        for process in processes:
            harness.stop_process(process)


@dataclass
class Running:
    """Processes of one phase, each with what it is, so collection can name a failing one."""

    inference: list[tuple[str, subprocess.Popen[str]]] = field(default_factory=list)
    bulk: list[tuple[BulkWorkload, str, float, subprocess.Popen[str]]] = field(default_factory=list)
    allreduce: list[tuple[AllReduceWorkload, subprocess.Popen[str]]] = field(default_factory=list)

    def all(self) -> list[subprocess.Popen[str]]:
        return (
            [p for _, p in self.inference]
            + [p for *_, p in self.bulk]
            + [p for _, p in self.allreduce]
        )


def iperf_seconds(seconds: float, omit_s: float) -> float:
    """iperf3's ``-t`` for a run of ``seconds`` in all whose first ``omit_s`` are omitted.

    ``-O`` comes on top of ``-t`` (``-t 9 -O 4`` runs 13 s), so the measured part is the rest.
    """
    if not 0 <= omit_s < seconds:
        raise ValueError(f"need 0 <= omit ({omit_s:g} s) < the run ({seconds:g} s)")
    return seconds - omit_s


def start_bulk(
    net: Net,
    workload: BulkWorkload,
    seconds: float,
    omit_s: float,
    running: Running,
    interval_s: float = TIMELINE_INTERVAL_S,
) -> None:
    """iperf3 clients for ``seconds`` in all, the first ``omit_s`` of them not counted.

    iperf3 runs its omitted ramp (``-O``) before the ``-t`` it measures, so ``-t`` is what is
    left after the ramp: the measured window is then the phase's own, not a stretch of
    training alone after inference has stopped. ``interval_s`` is the report interval
    (failover recovery needs 0.2 s).
    """
    measured = iperf_seconds(seconds, omit_s)
    for (host, port), flow in zip(bulk_ports(workload), workload.flows, strict=True):
        args = ["iperf3", "-c", _ip(net, host), "-p", str(port), "-J"]
        args += ["-t", f"{measured:.1f}", "-O", f"{omit_s:.1f}", "-i", str(interval_s)]
        if workload.protocol == "udp":
            args += ["-u", "-b", str(workload.udp_rate)]
        started = time.time()
        running.bulk.append(
            (
                workload,
                f"{flow.src}->{flow.dst}",
                started,
                harness.host_popen(net.get(flow.src), args),
            )
        )


def start_allreduce(
    net: Net, workload: AllReduceWorkload, seconds: float, running: Running
) -> None:
    peers = ",".join(f"{_ip(net, host)}:{workload.port}" for host in workload.workers)
    start = workload.start or 0.0  # a later job still ends with the phase
    for rank, host in enumerate(workload.workers):
        args = harness.module_command("allreduce", "--rank", str(rank), "--peers", peers)
        args += ["--size", str(workload.size), "--duration", f"{seconds - start:.2f}"]
        if start:
            args += ["--start-delay", f"{start:.2f}"]
        if workload.compute:
            args += ["--compute-ms", f"{workload.compute * 1000:.1f}"]
        running.allreduce.append((workload, harness.host_popen(net.get(host), args)))


def start_inference(
    net: Net, workload: InferenceWorkload, seconds: float, seed: int, running: Running
) -> None:
    for index, client in enumerate(workload.clients):
        server = workload.servers[index % len(workload.servers)]
        args = harness.module_command("loadgen", "client", "--host", _ip(net, server))
        args += ["--port", str(workload.port), "--rate", str(workload.rate)]
        args += ["--duration", f"{seconds:.2f}", "--warmup", str(INFERENCE_WARMUP_S)]
        args += ["--request-bytes", str(workload.request_size)]
        args += ["--response-bytes", str(workload.response_size)]
        args += ["--connections", str(workload.connections), "--timeout", str(workload.timeout)]
        args += ["--arrivals", workload.arrivals, "--seed", str(seed + index)]
        args += ["--timeline-interval", str(TIMELINE_INTERVAL_S), "--raw-latencies"]
        if workload.burst is not None:
            args += ["--burst-on", str(workload.burst.active)]
            args += ["--burst-off", str(workload.burst.quiet)]
        running.inference.append((workload.name, harness.host_popen(net.get(client), args)))


def _json(what: str, process: subprocess.Popen[str], timeout_s: float) -> dict[str, Any]:
    out, err = process.communicate(timeout=timeout_s)
    try:
        result: dict[str, Any] = json.loads(out)
    except json.JSONDecodeError:
        raise WorkloadOutputError(
            f"{what} printed no report (exit {process.returncode}): {err.strip()[-2000:]}"
        ) from None
    return result


@dataclass
class Collected:
    inference: list[dict[str, Any]]
    bulk: list[IperfRun]
    allreduce: dict[str, list[dict[str, Any]]]


def collect(running: Running, timeout_s: float) -> Collected:
    """Wait for every process of the phase and parse its report; stop them all in any case."""
    deadline = time.monotonic() + timeout_s
    with ExitStack() as stack:
        for process in running.all():
            stack.callback(harness.stop_process, process)
        inference = [
            _json(f"inference {name}", p, max(1.0, deadline - time.monotonic()))
            for name, p in running.inference
        ]
        bulk = [
            IperfRun(
                w.name,
                label,
                started,
                _json(f"bulk {w.name} {label}", p, max(1.0, deadline - time.monotonic())),
                w.protocol,
            )
            for w, label, started, p in running.bulk
        ]
        allreduce: dict[str, list[dict[str, Any]]] = {}
        for workload, process in running.allreduce:
            report = _json(
                f"allreduce {workload.name}", process, max(1.0, deadline - time.monotonic())
            )
            if process.returncode:
                raise WorkloadOutputError(f"allreduce {workload.name} exited {process.returncode}")
            allreduce.setdefault(workload.name, []).append(report)
        return Collected(inference, bulk, allreduce)
