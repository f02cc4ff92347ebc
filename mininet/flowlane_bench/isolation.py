"""The isolation scenario: training saturates a 50 Mbit port that inference also needs.

Two training senders run iperf3 to one server while an inference client
sends open-loop requests to the same server; all of it crosses the server's
switch port, which the policy limits to 50 Mbit.  Each mode (a policy file)
runs in the same network, one after the other: the controller is restarted
with the mode's policy and the switch reconciles to it.  For each mode the
scenario measures inference latency idle and under training load, and
training goodput.

The tests of detection, jobs and live policy build on its helpers; the
benchmark figures come from the scenario suite (``python -m flowlane_bench.scenario``).
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from controller.pipeline import tables
from controller.policy.load import load_policy_file
from flowlane_bench import harness
from flowlane_bench.nodes import Net, Node
from flowlane_bench.topologies import SWITCH, SingleSwitchTopo, server_port

POLICIES = harness.REPO / "policies" / "examples"
MODES = {"flowlane": POLICIES / "isolation.yaml", "fifo": POLICIES / "fifo.yaml"}
INFERENCE_PORT = 8000
TRAINING_PORT = 5201


@dataclass(frozen=True)
class ScenarioConfig:
    idle_s: float = 5.0
    loaded_s: float = 10.0
    ramp_s: float = 2.0
    """Training runs this long before inference is measured, so queues are full."""
    inference_rate: float = 200.0
    request_bytes: int = 256
    response_bytes: int = 1024
    connections: int = 4
    training_senders: int = 2


@dataclass
class ModeResult:
    mode: str
    policy: str
    port_bps: int
    idle: dict[str, Any]
    loaded: dict[str, Any]
    goodput_bps: float
    class_bytes: dict[str, int] = field(default_factory=dict)
    """Bytes each class's HTB class sent on the bottleneck during the loaded phase."""
    marked_packets: dict[str, int] = field(default_factory=dict)
    """Packets through each class's marking flows (table 1) during the loaded phase."""

    def loaded_ms(self, percentile: str) -> float:
        """A loaded-phase latency percentile; infinite when no request got through (a FIFO
        queue that cubic keeps full can starve every request)."""
        value = self.loaded["latency_ms"][percentile]
        return math.inf if value is None else float(value)

    @property
    def p99_ratio(self) -> float:
        return self.loaded_ms("p99") / float(self.idle["latency_ms"]["p99"])

    @property
    def goodput_ratio(self) -> float:
        return self.goodput_bps / self.port_bps

    def summary(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "p99_loaded_over_idle": round(self.p99_ratio, 3),
            "goodput_over_port": round(self.goodput_ratio, 4),
        }


class ScenarioError(RuntimeError):
    """A run failed; the message carries the switch and controller state."""


def _tc_class_bytes(device: str) -> dict[str, int]:
    out = subprocess.run(
        ["tc", "-s", "class", "show", "dev", device], capture_output=True, text=True
    ).stdout
    return {
        classid: int(sent)
        for classid, sent in re.findall(r"class htb (\S+) .*?\n\s*Sent (\d+) bytes", out, re.S)
    }


def _marking_packets(bridge: str) -> dict[int, int]:
    """Packets per class metadata through the IP marking flows of table 1."""
    out = harness.ofctl("dump-flows", bridge, f"table={tables.MARK}")
    counts: dict[int, int] = {}
    for packets, metadata in re.findall(r"n_packets=(\d+),.*?metadata=(0x[0-9a-f]+)/0xff", out):
        counts[int(metadata, 16)] = counts.get(int(metadata, 16), 0) + int(packets)
    return counts


def run_client(
    host: Node,
    server_ip: str,
    config: ScenarioConfig,
    duration_s: float,
    *,
    may_starve: bool = False,
) -> dict[str, Any]:
    """The load generator's report; no response at all is an error unless ``may_starve``
    (a phase that puts inference behind a full training queue: with cubic filling it,
    every connection attempt can time out)."""
    process = harness.host_popen(
        host,
        [
            *harness.module_command("loadgen"),
            "client",
            "--host",
            server_ip,
            "--port",
            str(INFERENCE_PORT),
            "--rate",
            str(config.inference_rate),
            "--duration",
            str(duration_s),
            "--request-bytes",
            str(config.request_bytes),
            "--response-bytes",
            str(config.response_bytes),
            "--connections",
            str(config.connections),
            "--warmup",
            "0.5",
            "--timeout",
            "5",
        ],
    )
    try:
        out, err = process.communicate(timeout=duration_s + 30)
    finally:
        harness.stop_process(process)
    if not out.strip():
        raise ScenarioError(f"load generator printed nothing (exit {process.returncode}): {err}")
    result: dict[str, Any] = json.loads(out)
    if result["samples"] == 0 and not may_starve:
        raise ScenarioError(f"load generator got no responses: {result}")
    return result


def start_training(
    net: Net, config: ScenarioConfig, seconds: float, omit_s: float = 0
) -> list[subprocess.Popen[str]]:
    """One iperf3 bulk flow from each training sender to the server, for ``seconds`` in all
    (the first ``omit_s`` of them not counted: iperf3 runs ``-O`` on top of ``-t``)."""
    server = net.get("server")
    return [
        harness.host_popen(
            net.get(f"train{index + 1}"),
            [
                "iperf3",
                "-c",
                server.IP(),
                "-p",
                str(TRAINING_PORT + index),
                "-J",
                "-t",
                str(int(seconds - omit_s)),
                "-O",
                str(int(omit_s)),
            ],
        )
        for index in range(config.training_senders)
    ]


def collect_goodput(iperfs: list[subprocess.Popen[str]], timeout_s: float) -> float:
    """Sum of the receivers' goodput (bit/s) once every iperf3 client has finished."""
    goodput = 0.0
    for process in iperfs:
        out, _ = process.communicate(timeout=timeout_s)
        report = json.loads(out)
        if "error" in report:
            raise ScenarioError(f"iperf3 failed: {report['error']}")
        goodput += float(report["end"]["sum_received"]["bits_per_second"])
    return goodput


@contextmanager
def servers(net: Net, config: ScenarioConfig) -> Iterator[None]:
    """The inference server and one iperf3 server per training sender, on the server host."""
    server = net.get("server")
    processes = [
        harness.host_popen(
            server, harness.module_command("loadgen", "server", "--port", str(INFERENCE_PORT))
        )
    ]
    processes += [
        harness.host_popen(server, ["iperf3", "-s", "-p", str(TRAINING_PORT + i)])
        for i in range(config.training_senders)
    ]
    try:
        assert processes[0].stdout is not None
        if "listening" not in processes[0].stdout.readline():
            raise ScenarioError("inference server did not start")
        yield
    finally:
        for process in processes:
            harness.stop_process(process)


def _measure(
    net: Net, mode: str, policy_file: Path, config: ScenarioConfig, port_bps: int
) -> ModeResult:
    client, server = net.get("infer1"), net.get("server")
    bottleneck = server_port(config.training_senders)
    idle = run_client(client, server.IP(), config, config.idle_s)

    bytes_before, marks_before = _tc_class_bytes(bottleneck), _marking_packets(SWITCH)
    iperfs = start_training(net, config, config.ramp_s + config.loaded_s + 2, omit_s=config.ramp_s)
    try:
        time.sleep(config.ramp_s)
        loaded = run_client(client, server.IP(), config, config.loaded_s, may_starve=True)
        goodput = collect_goodput(iperfs, config.ramp_s + config.loaded_s + 30)
    finally:
        for process in iperfs:
            harness.stop_process(process)
    bytes_after, marks_after = _tc_class_bytes(bottleneck), _marking_packets(SWITCH)
    policy = load_policy_file(policy_file)
    class_bytes, marked = {}, {}
    for name in policy.class_names:
        queue_id = policy.queue_id(name)
        classid = f"1:{queue_id + 1:x}"
        class_bytes[name] = bytes_after.get(classid, 0) - bytes_before.get(classid, 0)
        metadata = tables.class_metadata(queue_id)
        marked[name] = marks_after.get(metadata, 0) - marks_before.get(metadata, 0)
    return ModeResult(
        mode,
        str(policy_file.relative_to(harness.REPO)),
        port_bps,
        idle,
        loaded,
        goodput,
        class_bytes,
        marked,
    )


def run(modes: dict[str, Path], config: ScenarioConfig, workdir: Path) -> list[ModeResult]:
    """Run every mode in one network; raise ``ScenarioError`` with diagnostics on failure."""
    harness.check_prerequisites()
    ofp_port = harness.free_port()
    topo = SingleSwitchTopo(training_senders=config.training_senders, inference_clients=1)
    results: list[ModeResult] = []
    with harness.network(topo, ofp_port) as net:
        ports = [intf.name for intf in net.get(SWITCH).intfList() if intf.name != "lo"]
        with servers(net, config):
            for mode, policy_file in modes.items():
                log_path = workdir / f"controller-{mode}.log"
                with harness.controller(policy_file, log_path, ofp_port) as ctl:
                    try:
                        harness.wait_in_sync(SWITCH, ctl.policy, ports)
                        bottleneck = server_port(config.training_senders)
                        port_bps = ctl.policy.ports.configured_rate(bottleneck).bps
                        results.append(_measure(net, mode, policy_file, config, port_bps))
                        problems = ctl.problems()
                        if problems:
                            raise ScenarioError("controller logged errors:\n" + "\n".join(problems))
                    except Exception as exc:
                        raise ScenarioError(
                            f"mode {mode}: {exc}\n{harness.diagnostics(SWITCH, ports, ctl.log())}"
                        ) from exc
    return results
