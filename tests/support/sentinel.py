"""A Redis primary, its replica and three Sentinels on free ports: real ``redis-server``
processes in a temporary directory, each stopped (or killed) by its PID.

Readiness is read from each process's own log (a replica's finished sync, a Sentinel that
knows the replica and both other Sentinels), so nothing sleeps for a guessed time.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.redis_server import redis_server_path

MASTER = "flowlane"
DOWN_AFTER_MS = 1000
"""How long a silent primary is given before the Sentinels call it down."""
FAILOVER_TIMEOUT_MS = 3000


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

    def wait_for(self, pattern: str, count: int = 1, timeout_s: float = 15.0) -> float:
        """Until ``count`` log lines match ``pattern`` (a regular expression); when the first
        of them was logged (``time.monotonic()``)."""
        wanted = re.compile(pattern)

        def seen() -> bool:
            return sum(1 for line in self.log if wanted.search(line)) >= count

        with self._changed:
            if (
                not self._changed.wait_for(
                    lambda: (
                        seen() or (self.process is not None and self.process.poll() is not None)
                    ),
                    timeout_s,
                )
                or not seen()
            ):
                pytest.fail(
                    f"{self.name} (port {self.port}) never logged {pattern!r} x{count}:\n"
                    + "".join(self.log[-30:]),
                    pytrace=False,
                )
            return next(
                t for t, line in zip(self.stamps, self.log, strict=True) if wanted.search(line)
            )

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
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


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
        self._node(
            "replica", replica, [*_data_args(replica), "--replicaof", "127.0.0.1", str(primary)]
        ).wait_for("MASTER <-> REPLICA sync: Finished with success")
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

    def start_primary(self, replica_of: int | None = None) -> Node:
        """The primary, or the old primary back on its port as a replica of ``replica_of``
        (as an operator brings a failed primary back: started empty as a primary, it would
        answer reads with nothing until the Sentinels demote it)."""
        port = self.primary_port
        follow = [] if replica_of is None else ["--replicaof", "127.0.0.1", str(replica_of)]
        node = self._node("primary", port, [*_data_args(port), *follow])
        node.wait_for("Ready to accept connections")
        return node

    def stop(self) -> None:
        for node in reversed(list(self.nodes.values())):
            node.stop()
