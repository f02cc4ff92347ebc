"""One ``redis-server`` process a test started: on a free or given port, stopped by its PID.

Used through the ``redis_url`` and ``start_redis`` fixtures of ``tests/conftest.py``,
and directly by tests that stop and restart a server on the same port.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

REDIS_SERVER = "/usr/bin/redis-server"
READY_LINE = "Ready to accept connections"
START_TIMEOUT_S = 15.0


def redis_server_path() -> str:
    path = REDIS_SERVER if Path(REDIS_SERVER).exists() else shutil.which("redis-server")
    if path is None:
        pytest.fail(
            f"redis-server not found at {REDIS_SERVER} or on PATH: the store, API and CLI tests"
            " need a real Redis (apt-get install redis-server, or run deploy/setup.sh)",
            pytrace=False,
        )
    return path


@dataclass
class RedisServer:
    """One ``redis-server`` process we started, and stop by its PID."""

    port: int
    directory: Path
    process: subprocess.Popen[str] | None = None
    log: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        ready = threading.Event()
        self.log = []
        self.process = subprocess.Popen(
            [
                redis_server_path(),
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
                "--daemonize",
                "no",
                "--loglevel",
                "notice",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        threading.Thread(
            target=self._drain, args=(self.process, ready), name=f"redis-{self.port}", daemon=True
        ).start()
        # ``ready`` is also set when the output ends, that is when the server died.
        if not ready.wait(START_TIMEOUT_S) or self.process.poll() is not None:
            self.stop()
            pytest.fail(
                f"redis-server on port {self.port} did not start:\n" + "".join(self.log[-20:]),
                pytrace=False,
            )
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)
        try:
            assert client.ping()
        finally:
            client.close()

    def _drain(self, process: subprocess.Popen[str], ready: threading.Event) -> None:
        """Read the server's log (a full pipe would block it), noticing when it is ready."""
        assert process.stdout is not None
        for line in process.stdout:
            self.log.append(line)
            if READY_LINE in line:
                ready.set()
        ready.set()

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


StartRedis = Callable[[int | None], RedisServer]
"""The ``start_redis`` fixture: a server on the given port, or a free one."""
