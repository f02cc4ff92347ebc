"""A Redis primary, its replica and three Sentinels on free ports: real ``redis-server``
processes in a temporary directory, each stopped (or killed) by its PID.

Readiness is read from each process's own log (a replica's finished sync, a Sentinel that
knows the replica and both other Sentinels), so nothing sleeps for a guessed time.  Shared
by the failover test (``tests/support/sentinel.py`` re-exports it) and by
``bench_sentinel``; a node that never says what it should raises ``SentinelError`` with the
end of its log.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from flowlane_bench.processes import stop_process

MASTER = "flowlane"
DOWN_AFTER_MS = 1000
"""How long a silent primary is given before the Sentinels call it down."""
FAILOVER_TIMEOUT_MS = 3000
REDIS_SERVER = "/usr/bin/redis-server"
SYNCED = "MASTER <-> REPLICA sync: Finished with success"
"""A replica's log line once it holds the primary's data set."""


class SentinelError(RuntimeError):
    """A node did not start or never logged what it should have (the message says which)."""


def redis_server_path() -> str:
    path = REDIS_SERVER if Path(REDIS_SERVER).exists() else shutil.which("redis-server")
    if path is None:
        raise SentinelError(
            f"redis-server not found at {REDIS_SERVER} or on PATH"
            " (apt-get install redis-server, or run deploy/setup.sh)"
        )
    return path


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports nobody listens on right now (the kernel picks them)."""
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in ports:
            ports.append(port)
    return ports


@dataclass
class Node:
    """One ``redis-server`` (data node or Sentinel) we started."""

    name: str
    port: int
    directory: Path
    args: list[str]
    process: subprocess.Popen[str] | None = None
    log: list[str] = field(default_factory=list)
    stamps: list[float] = field(default_factory=list)
    """``time.monotonic()`` when each log line was read."""
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def start(self) -> None:
        self.log, self.stamps = [], []
        self.process = subprocess.Popen(
            [redis_server_path(), *self.args],
            cwd=self.directory,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        threading.Thread(
            target=self._drain, args=(self.process,), name=f"{self.name}-log", daemon=True
        ).start()

    def _drain(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            with self._changed:
                self.log.append(line)
                self.stamps.append(time.monotonic())
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(
        self, pattern: str, count: int = 1, timeout_s: float = 15.0, since: int = 0
    ) -> float:
        """Until ``count`` log lines from line ``since`` on match ``pattern`` (a regular
        expression); when the first of them was logged (``time.monotonic()``)."""
        wanted = re.compile(pattern)

        def matching() -> list[int]:
            return [i for i in range(since, len(self.log)) if wanted.search(self.log[i])]

        def exited() -> bool:
            return self.process is not None and self.process.poll() is not None

        with self._changed:
            if (
                not self._changed.wait_for(lambda: len(matching()) >= count or exited(), timeout_s)
                or len(matching()) < count
            ):
                raise SentinelError(
                    f"{self.name} (port {self.port}) never logged {pattern!r} x{count}:\n"
                    + "".join(self.log[-30:])
                )
            return self.stamps[matching()[0]]

    def mark(self) -> int:
        """The log's length now: ``wait_for(..., since=mark)`` looks only at what follows."""
        with self._changed:
            return len(self.log)

    def signal(self, number: signal.Signals) -> None:
        assert self.process is not None
        os.kill(self.process.pid, number)

    def kill(self) -> None:
        """SIGKILL: the host gone, nothing flushed, no goodbye to the replica."""
        process, self.process = self.process, None
        if process is not None:
            process.kill()
            process.wait(timeout=10)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)  # a paused one cannot act on SIGTERM
        stop_process(process, timeout_s=10)


def _data_args(port: int) -> list[str]:
    return [
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--daemonize",
        "no",
        "--dir",
        ".",
        # A replica's full sync starts at once, not after the default 5 s of waiting for more.
        "--repl-diskless-sync-delay",
        "0",
    ]


@dataclass
class SentinelSet:
    """A primary, a replica and three Sentinels watching them (quorum 2)."""

    directory: Path
    ports: list[int]
    """primary, replica, then the three Sentinels."""
    nodes: dict[str, Node] = field(default_factory=dict)

    @property
    def primary_port(self) -> int:
        return self.ports[0]

    def url(self, options: str = "") -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.ports[2:])
        return f"redis+sentinel://{hosts}/{MASTER}/0" + (f"?{options}" if options else "")

    def _node(self, name: str, port: int, args: list[str]) -> Node:
        directory = self.directory / name
        directory.mkdir(exist_ok=True)
        node = Node(name, port, directory, args)
        self.nodes[name] = node
        node.start()
        return node

    def start(self) -> None:
        primary, replica = self.ports[:2]
        self.start_primary()
        self.start_data("replica", replica_of=primary).wait_for(SYNCED)
        for number, port in enumerate(self.ports[2:], start=1):
            name = f"sentinel-{number}"
            config = self.directory / f"{name}.conf"
            config.write_text(
                f"port {port}\nbind 127.0.0.1\ndaemonize no\ndir {self.directory}\n"
                f"sentinel monitor {MASTER} 127.0.0.1 {primary} 2\n"
                f"sentinel down-after-milliseconds {MASTER} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {MASTER} {FAILOVER_TIMEOUT_MS}\n"
                f"sentinel parallel-syncs {MASTER} 1\n"
            )
            self._node(name, port, [str(config), "--sentinel"])
        # A Sentinel can fail over once it knows the replica and has peers for the quorum
        # and the leader election: they find each other through the primary (hello messages).
        for number in (1, 2, 3):
            sentinel = self.nodes[f"sentinel-{number}"]
            sentinel.wait_for(rf"\+slave slave 127\.0\.0\.1:{replica}")
            sentinel.wait_for(r"\+sentinel sentinel ", count=2)

    def start_data(self, name: str, replica_of: int | None = None) -> Node:
        """Data node ``name`` (``primary`` on the first port, ``replica`` on the second),
        started empty, as a replica of the node on port ``replica_of`` when given."""
        port = self.ports[0] if name == "primary" else self.ports[1]
        follow = [] if replica_of is None else ["--replicaof", "127.0.0.1", str(replica_of)]
        return self._node(name, port, [*_data_args(port), *follow])

    def start_primary(self, replica_of: int | None = None) -> Node:
        """The primary, or the old primary back on its port as a replica of ``replica_of``
        (as an operator brings a failed primary back: started empty as a primary, it would
        answer reads with nothing until the Sentinels demote it)."""
        node = self.start_data("primary", replica_of)
        node.wait_for("Ready to accept connections")
        return node

    def stop(self) -> None:
        for node in reversed(list(self.nodes.values())):
            node.stop()
