"""A real API server (uvicorn, in a thread, on a free port) on the test Redis, for the CLI."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from typer.testing import CliRunner

from controller.auth.files import TOKEN_ENV
from controller.auth.model import Role
from controller.store.tokens import TokenStore
from tests.support.api_thread import serve_api


@pytest.fixture
def api_url(
    redis_client: redis.Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of an API on an empty Redis, stopped after the test; the CLI
    calls it with an admin token named ``cli-admin`` (``$FLOWLANE_TOKEN``)."""
    _, secret = TokenStore(redis_client).create("cli-admin", Role.admin)
    monkeypatch.setenv(TOKEN_ENV, secret)
    with serve_api(redis_url) as url:
        yield url


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()
