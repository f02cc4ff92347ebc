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
from flowlane_bench.processes import stop_process

from controller.auth.certs import issue, new_authority

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
    password: str | None = None
    """``requirepass``: clients must authenticate."""
    tls: bool = False
    """TLS only (no plain port), with a certificate of a CA made for it (``ca_file``)."""

    @property
    def ca_file(self) -> Path:
        return self.directory / "redis-tls" / "ca.pem"

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        if self.tls:
            return f"rediss://{auth}127.0.0.1:{self.port}/0?ssl_ca_certs={self.ca_file}"
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def _security_args(self) -> list[str]:
        args = ["--requirepass", self.password] if self.password else []
        if not self.tls:
            return [*args, "--port", str(self.port)]
        tls_dir = self.ca_file.parent
        tls_dir.mkdir(exist_ok=True)
        authority = new_authority("redis test CA")
        server = issue(authority, "redis", server=True, client=False, hosts=["127.0.0.1"])
        self.ca_file.write_bytes(authority.issued.cert_pem)
        (tls_dir / "redis.pem").write_bytes(server.cert_pem)
        (tls_dir / "redis.key").write_bytes(server.key_pem)
        return [
            *args,
            "--port",
            "0",
            "--tls-port",
            str(self.port),
            "--tls-cert-file",
            str(tls_dir / "redis.pem"),
            "--tls-key-file",
            str(tls_dir / "redis.key"),
            "--tls-ca-cert-file",
            str(self.ca_file),
            "--tls-auth-clients",
            "no",
        ]

    def start(self) -> None:
        ready = threading.Event()
        self.log = []
        self.process = subprocess.Popen(
            [
                redis_server_path(),
                *self._security_args(),
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
        client = redis.Redis.from_url(self.url, socket_timeout=5)
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
        if process is not None:
            stop_process(process, timeout_s=10)


StartRedis = Callable[[int | None], RedisServer]
"""The ``start_redis`` fixture: a server on the given port, or a free one."""
