"""Several ``flowlane controller`` processes sharing one Redis, and what Open vSwitch says of them.

Issue 22 runs three controllers on one fabric: every bridge lists all three
(``ovs-vsctl set-controller BR tcp:A tcp:B tcp:C``) and the controllers split
the switches through their leases in Redis.  This module starts, kills
(SIGKILL), pauses (SIGSTOP), resumes and restarts such instances, each by its
own PID and with one log file per run, and reads the roles each bridge gives
each controller from OVSDB (``Controller.role``: ``master``, ``slave`` or
``other``), which is the switch's own word on who may write.

The Redis URL goes to the controllers through the environment, never their
command line (``ps`` shows arguments to every user).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowlane_bench import harness

LISTENING = "listening for OpenFlow"
"""What a controller logs once its OpenFlow port accepts switches."""


@dataclass
class Instance:
    """One controller instance: a name (``--instance-id``), its ports, and its current run."""

    name: str
    ofp_port: int
    metrics_port: int
    workdir: Path
    process: subprocess.Popen[bytes] | None = None
    runs: int = 0
    """How many times it was started; run ``n`` logs to ``<name>-<n>.log``."""
    paused: bool = False

    @property
    def target(self) -> str:
        """Its OpenFlow address as a bridge's controller target names it."""
        return f"tcp:127.0.0.1:{self.ofp_port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / f"{self.name}-{self.runs}.log"

    def log(self) -> str:
        """The log of its current (or last) run."""
        path = self.log_path
        return path.read_text(errors="replace") if path.exists() else ""

    def problems(self) -> list[str]:
        return harness.log_problems(self.log())

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def spawn(self, args: Sequence[str], env: Mapping[str, str]) -> None:
        """A new run, not waited for (``wait_listening``): several start side by side."""
        if self.running:
            raise RuntimeError(f"controller {self.name} is running already")
        self.runs += 1
        self.paused = False
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    harness.PYTHON,
                    "-m",
                    "controller",
                    "controller",
                    *args,
                    "--instance-id",
                    self.name,
                    "--ofp-port",
                    str(self.ofp_port),
                    "--metrics-port",
                    str(self.metrics_port),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=harness.REPO,
                env={**os.environ, **env},
                start_new_session=True,
            )

    def wait_listening(self, timeout_s: float = 30) -> None:
        process = self.process
        assert process is not None
        harness.wait_for(
            f"controller {self.name} to listen",
            lambda: process.poll() is not None or LISTENING in self.log(),
            timeout_s,
        )
        if process.poll() is not None:
            raise RuntimeError(
                f"controller {self.name} exited with {process.returncode}:\n{self.log()[-5000:]}"
            )

    def kill(self) -> None:
        """SIGKILL: no goodbye, its lease left to expire (a crash, a host gone)."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
        process.wait(10)
        self.paused = False

    def pause(self) -> None:
        """SIGSTOP: alive to the kernel (its sockets stay open), silent to everyone else."""
        assert self.process is not None and self.process.poll() is None
        self.process.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
        self.paused = False

    def stop(self) -> int | None:
        """SIGTERM (a clean stop: it resigns its lease), SIGKILL if it hangs; the exit code."""
        process = self.process
        if process is None:
            return None
        self.resume()  # a paused process cannot act on SIGTERM
        return harness.stop_process(process, timeout_s=10)

    def metric(self, name: str, **labels: str) -> float:
        """The sum of one metric's samples matching ``labels`` (0 when absent)."""
        import httpx

        total = 0.0
        text = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text
        for line in text.splitlines():
            if not (line.startswith(name + "{") or line.startswith(name + " ")):
                continue
            if all(f'{key}="{value}"' in line for key, value in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
        return total


@dataclass
class ControllerSet:
    """Instances named ``names`` sharing the Redis at ``redis_url``, all with ``args``."""

    workdir: Path
    redis_url: str
    args: Sequence[str]
    """Options every instance gets (the policy, the lease TTL...), besides its own id and ports."""
    names: Sequence[str] = ("a", "b", "c")
    instances: dict[str, Instance] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ports: set[int] = set()

        def fresh() -> int:
            while (port := harness.free_port()) in ports:
                pass
            ports.add(port)
            return port

        for name in self.names:
            self.instances[name] = Instance(name, fresh(), fresh(), self.workdir)

    def __getitem__(self, name: str) -> Instance:
        return self.instances[name]

    def __iter__(self) -> Iterator[Instance]:
        return iter(self.instances.values())

    @property
    def targets(self) -> list[str]:
        return [instance.target for instance in self]

    def by_target(self, target: str) -> Instance:
        return next(instance for instance in self if instance.target == target)

    def start(self, *names: str) -> None:
        """Start ``names`` side by side; returns once each listens."""
        for name in names:
            self.instances[name].spawn(self.args, {"FLOWLANE_REDIS_URL": self.redis_url})
        for name in names:
            self.instances[name].wait_listening()

    def start_all(self) -> None:
        self.start(*self.instances)

    def stop_all(self) -> dict[str, int | None]:
        """Every instance stopped by its PID; their exit codes."""
        return {instance.name: instance.stop() for instance in self}

    def problems(self) -> dict[str, list[str]]:
        """Error lines in each instance's current log (none: an empty mapping)."""
        return {i.name: p for i in self if (p := i.problems())}


@contextlib.contextmanager
def controller_set(
    workdir: Path, redis_url: str, args: Sequence[str], names: Sequence[str] = ("a", "b", "c")
) -> Iterator[ControllerSet]:
    """Every instance started (each listening) for the block, stopped by PID after."""
    controllers = ControllerSet(workdir, redis_url, args, names)
    try:
        controllers.start_all()
        yield controllers
    finally:
        controllers.stop_all()


# --------------------------------------------------------------------------------------------
# what Open vSwitch says
# --------------------------------------------------------------------------------------------


def _vsctl(*args: str) -> str:
    return subprocess.run(
        ["ovs-vsctl", "--timeout=10", *args], capture_output=True, text=True, check=True
    ).stdout


def set_controllers(bridges: Sequence[str], targets: Sequence[str]) -> None:
    """Every bridge connects to every target; a lost connection is retried within a second
    (``max_backoff``), as docs/operations.md tells operators to set."""
    for bridge in bridges:
        _vsctl("set-controller", bridge, *targets)
    for row in _rows("bridge", "name,controller"):
        if row["name"] in bridges:
            for uuid in _uuids(row["controller"]):
                _vsctl("set", "controller", uuid, "max_backoff=1000")


def _uuids(value: Any) -> list[str]:
    """The UUIDs of an OVSDB JSON value: ``["uuid", U]`` or ``["set", [["uuid", U], ...]]``."""
    if isinstance(value, list) and value and value[0] == "uuid":
        return [str(value[1])]
    if isinstance(value, list) and value and value[0] == "set":
        return [str(item[1]) for item in value[1]]
    return []


@dataclass(frozen=True)
class Connection:
    """One bridge's record of one controller target."""

    role: str
    """``master``, ``slave`` or ``other`` (EQUAL): what the switch lets it do."""
    connected: bool


def _rows(table: str, columns: str) -> list[dict[str, Any]]:
    answer = json.loads(_vsctl("-f", "json", f"--columns={columns}", "list", table))
    headings: list[str] = answer["headings"]
    return [dict(zip(headings, row, strict=True)) for row in answer["data"]]


def roles(bridges: Sequence[str]) -> dict[str, dict[str, Connection]]:
    """bridge -> controller target -> its role and connection, as OVSDB shows them now."""
    records = {
        row["_uuid"][1]: row for row in _rows("controller", "_uuid,target,role,is_connected")
    }
    found: dict[str, dict[str, Connection]] = {}
    for row in _rows("bridge", "name,controller"):
        if row["name"] not in bridges:
            continue
        links = {}
        for uuid in _uuids(row["controller"]):
            record = records.get(uuid)
            if record is None:
                continue
            role = record["role"]
            links[str(record["target"])] = Connection(
                role if isinstance(role, str) else "other", record["is_connected"] is True
            )
        found[row["name"]] = links
    return found


def masters(bridges: Sequence[str]) -> dict[str, list[str]]:
    """bridge -> the targets it holds as master (one, once mastership has settled)."""
    return {
        bridge: sorted(t for t, c in links.items() if c.role == "master" and c.connected)
        for bridge, links in roles(bridges).items()
    }


def _map(value: Any) -> list[tuple[Any, Any]]:
    """The pairs of an OVSDB JSON map: ``["map", [[key, value], ...]]``."""
    if isinstance(value, list) and value and value[0] == "map":
        return [(pair[0], pair[1]) for pair in value[1]]
    return []


def queue_min_rates(ports: Sequence[str]) -> dict[str, set[int]]:
    """port -> the ``min-rate`` of every queue of its QoS, as OVSDB holds them now.

    OVSDB has no OpenFlow roles: a controller that still believes itself master could
    write queues the switch would never let it write as flows, so tests watch these too.
    """
    wanted = set(ports)
    queues = {
        row["_uuid"][1]: dict(_map(row["other_config"]))
        for row in _rows("queue", "_uuid,other_config")
    }
    qos = {row["_uuid"][1]: _map(row["queues"]) for row in _rows("qos", "_uuid,queues")}
    found: dict[str, set[int]] = {}
    for row in _rows("port", "name,qos"):
        if row["name"] not in wanted:
            continue
        rates = set()
        for uuid in _uuids(row["qos"]):
            for _, queue in qos.get(uuid, []):
                rate = queues.get(queue[1], {}).get("min-rate")
                if rate is not None:
                    rates.add(int(rate))
        found[row["name"]] = rates
    return found
