"""A real Redis for the store, API and CLI tests: Debian's ``redis-server`` on a free port.

The server is started once per session, on 127.0.0.1 only, with persistence
off and its files in a temporary directory; ``redis_client`` empties it
before each test.  Readiness is read from the server's own log line, then
confirmed with a PING, so there is no sleep to tune.  A missing
``redis-server`` fails the tests that need it: the API tests are never
skipped.
"""

from __future__ import annotations

import logging
import socket
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import redis

from controller.store.client import connect
from tests.support.redis_server import RedisServer, StartRedis
from tests.support.slow_first import SLOW_S, slow_first

if TYPE_CHECKING:
    from tests.support.isolation_modes import IsolationRun

# Starlette 1.x nudges TestClient users from httpx to its fork httpx2; flowlane depends on httpx
# (the CLI uses it) and the TestClient works with it. The warning fires once, when the first
# test conftest imports the TestClient, before any pytest hook could add an ini filter.
warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient` is deprecated")

# Test modules are rewritten by pytest (its assertion messages) as they are collected, and the
# rewritten code is cached beside them (__pycache__, ignored by git), unless
# $PYTHONDONTWRITEBYTECODE says not to write bytecode: then every worker rewrites all 500 test
# and support modules on every run, about 6 s of CPU each, which four workers on two cores
# pay before the first test starts.  The suite keeps its cache whatever the environment says.
sys.dont_write_bytecode = False


def free_port() -> int:
    """A TCP port nobody listens on right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


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


@pytest.fixture(scope="session")
def isolation_modes(tmp_path_factory: pytest.TempPathFactory) -> IsolationRun:
    """The isolation harness's modes, run once for the session in one Mininet network: read by
    tests/mininet/test_isolation.py and test_detection.py (``tests.support.isolation_modes``).

    Only the results outlive the run (the network is gone when it returns), so no other
    module's network meets it.
    """
    from flowlane_bench import harness  # Mininet's imports: only the tests that need them

    from tests.support import isolation_modes

    harness.check_prerequisites()
    return isolation_modes.run(tmp_path_factory.mktemp("isolation"))


SERIAL_MARKS = ("ovs", "mininet")
"""Tests that share one Open vSwitch (bridge names, the CPU they measure on): run one at a time."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that needs no Open vSwitch is in the ``fast`` tier (``pytest -m fast``).

    The tier is derived, not declared, so a new test cannot be left out of both
    tiers: ``deploy/test.sh`` runs ``fast`` on every core, then ``not fast``
    (the OVS and Mininet tests) one at a time.
    """
    for item in items:
        if not any(item.get_closest_marker(mark) for mark in SERIAL_MARKS):
            item.add_marker(pytest.mark.fast)


class SlowFirst:
    """Orders the collection for pytest-xdist (``tests.support.slow_first``): the known-slow
    tests lead the workers' shares.  After ``-m`` deselected (``trylast``), so the shares are
    those of the tests that run; every worker computes the same order, as xdist requires."""

    def __init__(self, workers: int) -> None:
        self.workers = workers

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        order = slow_first([item.nodeid for item in items], self.workers, SLOW_S)
        items[:] = [items[i] for i in order]


def pytest_configure(config: pytest.Config) -> None:
    workerinput: dict[str, object] | None = getattr(config, "workerinput", None)
    if workerinput is not None:  # an xdist worker: it collects, the controller hands out
        workers = int(str(workerinput["workercount"]))
        config.pluginmanager.register(SlowFirst(workers), "flowlane-slow-first")


@pytest.fixture(autouse=True)
def root_logging_restored() -> Iterator[None]:
    """The root logger's handlers and level as they were before the test.

    A command run in-process (``flowlane controller`` through typer's CliRunner)
    points the root logger at the runner's stderr, which is closed when the
    command returns: every later log line in that process would then print
    "--- Logging error ---" into whatever output the next test reads.
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


@pytest.fixture(scope="session", autouse=True)
def private_config_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """No process of the session writes the user's own configuration (``~/.config/flowlane``).

    ``private_token_file`` below covers each test, but a module- or session-scoped fixture
    starts its processes before any test's environment is set: an API started there would
    write its bootstrap token beside the user's.  This sets the token file and the config
    directory for the whole session first.
    """
    home = tmp_path_factory.mktemp("config-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CONFIG_HOME", str(home))
        patch.setenv("FLOWLANE_TOKEN_FILE", str(home / "flowlane" / "token"))
        yield home


@pytest.fixture(autouse=True)
def private_token_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test reads or writes the user's own API token file (``~/.config/flowlane/token``)."""
    path = tmp_path / "flowlane-token"
    monkeypatch.setenv("FLOWLANE_TOKEN_FILE", str(path))
    monkeypatch.delenv("FLOWLANE_TOKEN", raising=False)
    return path
