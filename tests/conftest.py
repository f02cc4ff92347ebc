"""A real Redis for the store, API and CLI tests: Debian's ``redis-server`` on a free port.

The server is started once per session, on 127.0.0.1 only, with persistence
off and its files in a temporary directory; ``redis_client`` empties it
before each test.  Readiness is read from the server's own log line, then
confirmed with a PING, so there is no sleep to tune.  A missing
``redis-server`` fails the tests that need it: the API tests are never
skipped.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

from controller.store.client import connect

REDIS_SERVER = "/usr/bin/redis-server"
READY_LINE = "Ready to accept connections"
START_TIMEOUT_S = 15.0


# Starlette 1.x nudges TestClient users from httpx to its fork httpx2; flowlane depends on httpx
# (the CLI uses it) and the TestClient works with it. The warning fires once, when the first
# test conftest imports the TestClient, before any pytest hook could add an ini filter.
warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient` is deprecated")


def free_port() -> int:
    """A TCP port nobody listens on right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


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


@pytest.fixture
def unused_port() -> int:
    """A free local TCP port: for a server a test starts, or a client that must fail to connect."""
    return free_port()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``redis://127.0.0.1:PORT/0`` of a Redis that lives for the whole session."""
    server = RedisServer(free_port(), tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    """A client of the session Redis, emptied before the test."""
    client = connect(redis_url)
    client.flushdb()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def start_redis(tmp_path: Path) -> Iterator[StartRedis]:
    """Start extra servers (``start_redis(port)``, on a given or a free port); all are stopped."""
    servers: list[RedisServer] = []

    def start(port: int | None = None) -> RedisServer:
        directory = tmp_path / f"redis-{len(servers)}"
        directory.mkdir()
        server = RedisServer(port if port is not None else free_port(), directory)
        servers.append(server)
        server.start()
        return server

    try:
        yield start
    finally:
        for server in servers:
            server.stop()
