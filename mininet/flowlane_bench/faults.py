"""Faults with live traffic: a probe stream per class and a bulk flow, and what they saw.

The fault tests (``tests/mininet/test_faults.py``) run one switch with a
sender of the three probe streams (one per class, each at ``PROBE_RATE``
datagrams per second), a bulk UDP flow that no rule names (so the detector
demotes it) and a server that receives them all.  Each test breaks one part
of the stack while the probes run and reads from the receivers how many
datagrams never arrived.

A private, persistent ``redis-server`` (append-only file) is here too: the
tests stop it and start it again on the same port and data directory, as an
operator's restart would.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import redis

from flowlane_bench import harness, probe
from flowlane_bench.nodes import Node

PROBE_RATE = 500.0
"""Datagrams per second of each class's probe stream (the issue asks for at least 500)."""
RECEIVER_QUIET_S = 1.0
"""A receiver stops this long after its stream's last datagram: a gap of 500 datagrams inside
a stream is loss the tests fail on anyway (the switch forwards or drops; it holds nothing
back that long)."""
PROBE_PORTS = {"inference": 7001, "training": 7002, "best-effort": 7003}
BULK_PORT = 6001
BULK_RATE = 2000.0
BULK_SIZE = 1200
"""About 19 Mbit/s: well above the detection rate, far below the port rate."""
# Detection polls every 500 ms: OVS refreshes the counters of learned entries when it
# revalidates (every 500 ms unless other_config:max-revalidator says otherwise), so a
# shorter interval would only see the same refreshes more often.

POLICY = """\
classes:
  inference:   {priority: 0, dscp: 46, min_rate: 20%}
  training:    {priority: 1, dscp: 26, min_rate: 60%}
  best-effort: {priority: 2, dscp: 0,  min_rate: 10%}
default_class: inference
rules:
  - {name: probe-inference,   match: {ip_proto: udp, udp_dst: 7001}, class: inference}
  - {name: probe-training,    match: {ip_proto: udp, udp_dst: 7002}, class: training}
  - {name: probe-best-effort, match: {ip_proto: udp, udp_dst: 7003}, class: best-effort}
ports: {rate: 200Mbit}
detection:
  interval: 500ms
  elephant: {rate: 5Mbit, for: 1s, class: training}
  release_after: 30s
"""


def write_policy(path: Path, extra_rules: str = "") -> Path:
    """The fault policy; ``extra_rules`` are YAML list items put before the probe rules."""
    text = POLICY
    if extra_rules:
        text = text.replace("rules:\n", "rules:\n" + extra_rules)
    path.write_text(text)
    return path


@dataclass
class Streams:
    """Receivers and senders of one run of the probes and the bulk flow."""

    receivers: dict[str, subprocess.Popen[str]] = field(default_factory=dict)
    senders: dict[str, subprocess.Popen[str]] = field(default_factory=dict)

    def stop(self) -> None:
        for process in [*self.senders.values(), *self.receivers.values()]:
            harness.stop_process(process)

    def stop_sending(self) -> None:
        """End the streams now (SIGINT: each sender reports what it sent until then), so a
        test that has seen what it broke come back does not wait out the streams' length.
        Only for streams that have run a while: a sender still starting up dies of it."""
        for process in self.senders.values():
            if process.poll() is None:
                process.send_signal(signal.SIGINT)

    def lost(self, timeout_s: float) -> dict[str, int]:
        """Datagrams each probe class sent that never arrived (waits for the senders)."""
        sent = {
            name: int(probe.report(f"{name} probe sender", process, timeout_s)["sent"])
            for name, process in self.senders.items()
            if name in PROBE_PORTS
        }
        lost = {}
        for name, count in sent.items():
            arrived = probe.report(f"{name} probe receiver", self.receivers[name], timeout_s)
            numbers = {seq for seq, _ in arrived["arrivals"]}
            lost[name] = sum(1 for seq in range(count) if seq not in numbers)
        return lost


@contextlib.contextmanager
def streams(sender: Node, server: Node, seconds: float, *, bulk: bool = True) -> Iterator[Streams]:
    """Probe streams (and the bulk flow) from ``sender`` to ``server`` for at most ``seconds``
    (``Streams.stop_sending`` ends them sooner)."""
    running = Streams()
    try:
        ports = dict(PROBE_PORTS)
        if bulk:
            ports["bulk"] = BULK_PORT
        for name, port in ports.items():
            # A receiver ends once its stream has been quiet for a while: any gap that long
            # is loss the tests fail on anyway, so nobody waits out the spare 5 s.
            running.receivers[name] = probe.start_receiver(
                server, port, seconds + 5, quiet_s=RECEIVER_QUIET_S
            )
        for name, port in ports.items():
            rate, size = (BULK_RATE, BULK_SIZE) if name == "bulk" else (PROBE_RATE, 64)
            running.senders[name] = probe.start_sender(
                sender, server.IP(), port, rate, size, seconds=seconds
            )
        yield running
    finally:
        running.stop()


def detector_cookies(bridge: str) -> set[int]:
    """Cookies of the detector's overrides on ``bridge``."""
    from controller.pipeline.flows import Owner, cookie_owner

    return {c for c in harness.ofctl_cookies(bridge) if cookie_owner(c) is Owner.DETECTOR}


def flow_durations(bridge: str, cookies: set[int]) -> dict[int, float]:
    """Seconds each entry with one of ``cookies`` has been in the table (0 when re-added)."""
    durations = {}
    for line in harness.ofctl("dump-flows", bridge).splitlines():
        parts = dict(
            item.split("=", 1) for item in line.strip().rstrip(",").split(", ") if "=" in item
        )
        if "cookie" not in parts or "duration" not in parts:
            continue
        cookie = int(parts["cookie"], 16)
        if cookie in cookies:
            durations[cookie] = float(parts["duration"].rstrip("s"))
    return durations


def log_time(line: str) -> float:
    """The time of a controller log line (``2026-12-03 09:30:00,123 INFO ...``)."""
    stamp = " ".join(line.split(" ", 2)[:2])
    return time.mktime(time.strptime(stamp.split(",")[0], "%Y-%m-%d %H:%M:%S")) + (
        int(stamp.split(",")[1]) / 1000
    )


def first_line(log: str, text: str) -> str | None:
    return next((line for line in log.splitlines() if text in line), None)


def metric(port: int, name: str, **labels: str) -> float:
    """One sample of the controller's Prometheus output (0 when absent)."""
    import httpx

    total = 0.0
    for line in httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{key}="{value}"' in line for key, value in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


class PersistentRedis:
    """A ``redis-server`` with an append-only file, restartable on the same port and data."""

    def __init__(self, port: int, workdir: Path) -> None:
        self.port = port
        self.workdir = workdir
        self.url = f"redis://127.0.0.1:{port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise harness.PrerequisiteError("redis-server is not installed (run `make setup`)")
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--dir", str(self.workdir), "--appendonly", "yes", "--appendfsync", "always"]
        args += ["--save", ""]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL)
        harness.wait_for("redis-server to answer", self.answers, 15, 0.05)

    def answers(self) -> bool:
        try:
            return bool(redis.Redis(port=self.port, socket_connect_timeout=0.2).ping())
        except redis.RedisError:
            return False

    def stop(self) -> None:
        if self.process is not None:
            harness.stop_process(self.process)
        self.process = None


@contextlib.contextmanager
def persistent_redis(workdir: Path) -> Iterator[PersistentRedis]:
    server = PersistentRedis(harness.free_port(), workdir)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@dataclass(frozen=True)
class Api:
    url: str
    headers: dict[str, str]
    """An admin's ``Authorization``: the token the API bootstrapped on its empty store."""


@contextlib.contextmanager
def api(redis_url: str, log_path: Path, extra_args: Sequence[str] = ()) -> Iterator[Api]:
    """A ``flowlane api`` process on a free port (on a store without tokens: it writes its
    bootstrap admin token), with ``extra_args`` added to its command line; yields its URL
    and that token, stops it by PID after."""
    import httpx

    port = harness.free_port()
    token_file = log_path.with_name(f"{log_path.stem}-token")
    log = log_path.open("wb")
    process = subprocess.Popen(
        [
            harness.PYTHON,
            "-m",
            "controller",
            "api",
            "--port",
            str(port),
            "--redis-url",
            redis_url,
            "--token-file",
            str(token_file),
            *extra_args,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=harness.REPO,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"flowlane api exited with {process.returncode}")
        try:
            return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        harness.wait_for("the API to answer", answers, 30)
        harness.wait_for_token(token_file, process, lambda: log_path.read_text(errors="replace"))
        yield Api(url, harness.bearer_header(token_file))
    finally:
        harness.stop_process(process)
        log.close()


def restart_vswitchd() -> float:
    """Stop ovs-vswitchd (ovsdb-server keeps the bridges) and start it; returns when it answers.

    The userspace datapath lives inside ovs-vswitchd, so every flow and
    tc qdisc goes with it, as after a crash or an upgrade.
    """
    ctl = "/usr/share/openvswitch/scripts/ovs-ctl"
    subprocess.run([ctl, "--no-ovsdb-server", "stop"], check=True, capture_output=True)
    subprocess.run(
        [ctl, "--no-ovsdb-server", "--system-id=random", "start"], check=True, capture_output=True
    )

    def answers() -> bool:
        done = subprocess.run(
            ["ovs-appctl", "-t", "ovs-vswitchd", "version"], capture_output=True, check=False
        )
        return done.returncode == 0

    harness.wait_for("ovs-vswitchd to answer", answers, 30, 0.05)
    return time.monotonic()
