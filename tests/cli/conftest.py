"""A real API server (uvicorn, in a thread, on a free port) on the test Redis, for the CLI."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
import redis
import uvicorn
from prometheus_client import CollectorRegistry
from typer.testing import CliRunner

from controller.api.app import create_app
from controller.api.settings import ApiSettings
from controller.auth.files import TOKEN_ENV
from controller.auth.model import Role
from controller.store.tokens import TokenStore


@pytest.fixture
def api_url(
    redis_client: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of an API on an empty Redis, stopped after the test; the CLI
    calls it with an admin token named ``cli-admin`` (``$FLOWLANE_TOKEN``).

    The socket is bound and listening before the server thread starts, so a
    client can connect at once: its connection waits in the backlog until
    uvicorn accepts it, and no readiness poll is needed.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    _, secret = TokenStore(redis_client).create("cli-admin", Role.admin)
    monkeypatch.setenv(TOKEN_ENV, secret)
    settings = ApiSettings(redis_url=redis_url, registry=CollectorRegistry())
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
        assert not thread.is_alive(), "the API server did not stop"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()
