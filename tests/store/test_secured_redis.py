"""Redis with a password and over TLS (``rediss://``): the store, the controller's link and
the real API process all work through the same URL, and a wrong password or a plain
connection to the TLS port fails with a clear error, never silently."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from controller.auth.model import Role
from controller.link.redis_link import RedisLink
from controller.policy.load import parse_policy
from controller.store.client import connect
from controller.store.errors import StoreUnavailableError
from controller.store.policies import PolicyStore
from controller.store.tokens import TokenStore
from tests.api.test_killed_mid_put import start_api
from tests.conftest import free_port
from tests.support.redis_server import RedisServer

DOCUMENT = {
    "classes": {
        "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
        "training": {"priority": 1, "dscp": 26, "min_rate": "70%"},
    },
    "default_class": "inference",
}
PASSWORD = "s3cret-of-the-test"


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(free_port(), tmp_path, password=PASSWORD, tls=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_the_store_works_over_rediss_with_a_password(secured: RedisServer) -> None:
    assert secured.url.startswith(f"rediss://:{PASSWORD}@")
    policies = PolicyStore(connect(secured.url))
    assert policies.put(DOCUMENT, author="op").version == 1
    active = policies.active()
    assert active is not None and active.document == DOCUMENT


def test_a_wrong_password_or_plain_tcp_fails_clearly(secured: RedisServer) -> None:
    wrong = secured.url.replace(PASSWORD, "guess")
    with pytest.raises(StoreUnavailableError, match=r"(?i)password|WRONGPASS"):
        PolicyStore(connect(wrong)).active()
    no_password = secured.url.replace(f":{PASSWORD}@", "")
    with pytest.raises(StoreUnavailableError, match=r"(?i)auth"):
        PolicyStore(connect(no_password)).active()
    plain = f"redis://:{PASSWORD}@127.0.0.1:{secured.port}/0"
    with pytest.raises(StoreUnavailableError):
        PolicyStore(connect(plain)).active()


def test_the_controller_link_bootstraps_over_rediss(secured: RedisServer) -> None:
    link = RedisLink(secured.url, "test-controller")
    policy, version = link.bootstrap(parse_policy(DOCUMENT), DOCUMENT)
    assert version == 1 and policy == parse_policy(DOCUMENT)
    active = PolicyStore(connect(secured.url)).active()
    assert active is not None and active.author.startswith("controller")


def test_the_api_process_serves_from_rediss(secured: RedisServer) -> None:
    port = free_port()
    _, secret = TokenStore(connect(secured.url)).create("op", Role.admin)
    process = start_api(secured.url, port)
    try:
        headers = {"Authorization": f"Bearer {secret}"}
        base = f"http://127.0.0.1:{port}"
        stored = httpx.put(f"{base}/v1/policy", json=DOCUMENT, headers=headers, timeout=10)
        assert stored.status_code == 201, stored.text
        deadline = time.monotonic() + 5
        while httpx.get(f"{base}/v1/policy", headers=headers).status_code != 200:
            assert time.monotonic() < deadline
        assert PolicyStore(connect(secured.url)).active_version() == 1
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(10)
