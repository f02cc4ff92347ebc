"""Tokens and passwords of a whole ``flowlane up`` stack (issue 24, findings 10 to 12):

- an ephemeral stack never writes its token over another stack's token file;
- ``--token-ttl`` gives the bootstrap admin a lifetime;
- no log line and no answer carries the Redis password or a token, and a Redis URL
  with a password is read from a file, not the command line.

Each stack is started with its own session and stopped by PID.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis
from flowlane_bench.harness import free_port, wait_for

from controller.api.bootstrap import bootstrap_admin
from controller.auth.files import read_token_file, store_token_file
from controller.auth.redact import redact
from controller.store.tokens import BOOTSTRAP_NAME, TokenStore
from tests.support.processes import stop_session
from tests.support.up_stack import banner, start_up

REPO = Path(__file__).resolve().parents[2]
PERSISTENT_TOKEN = "flt_the-persistent-stacks-token"


@contextlib.contextmanager
def up(tmp_path: Path, args: list[str], env: dict[str, str]) -> Iterator[tuple[str, Path]]:
    """``flowlane up ARGS`` until its banner; yields the API's URL and the log."""
    log = tmp_path / "up.log"
    api_port = free_port()
    argv = ["--api-port", str(api_port), "--ofp-port", str(free_port()), "--metrics-port", "0"]
    process = start_up(log, [*argv, *args], env)
    try:
        yield f"http://127.0.0.1:{api_port}", log
    finally:
        stop_session(process, timeout_s=30)


def clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLANE_")}
    return {**env, "HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config")}


@dataclass(frozen=True)
class EphemeralStack:
    api: str
    log: Path
    persistent: Path
    """The token file of a persistent stack of the same user, there before this one started."""


@pytest.fixture(scope="class")
def ephemeral_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EphemeralStack]:
    """``flowlane up --ephemeral --token-ttl 1h --access-log`` beside a persistent stack's
    token file, for the class's tests (a start costs seconds of CPU: three interpreters).

    Once it has stopped, the persistent token file is asserted as it was: stopping must
    not touch it either.
    """
    tmp_path = tmp_path_factory.mktemp("ephemeral")
    env = clean_env(tmp_path)
    persistent = tmp_path / "config" / "flowlane" / "token"
    persistent.parent.mkdir(parents=True)
    persistent.write_text(PERSISTENT_TOKEN + "\n")
    with up(tmp_path, ["--ephemeral", "--token-ttl", "1h", "--access-log"], env) as (api, log):
        yield EphemeralStack(api, log, persistent)
    assert persistent.read_text() == PERSISTENT_TOKEN + "\n"


class TestOneEphemeralStack:
    """Two tests of one ephemeral stack (`ephemeral_stack`, moved whole by slow_first)."""

    def test_an_ephemeral_stack_leaves_the_persistent_token_alone_and_its_token_expires(
        self, ephemeral_stack: EphemeralStack
    ) -> None:
        """Before: ``flowlane up --ephemeral`` wrote its bootstrap token over
        ~/.config/flowlane/token, and the bootstrap admin never expired."""
        api, log, persistent = ephemeral_stack.api, ephemeral_stack.log, ephemeral_stack.persistent
        line = banner(log, "API token")
        path = Path(line.split(" ", 1)[0])
        assert path != persistent and line.endswith("(a new admin token: the store had none)")
        assert persistent.read_text() == PERSISTENT_TOKEN + "\n"
        token = read_token_file(path)
        assert token is not None
        answer = httpx.get(f"{api}/v1/tokens", headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 200, answer.text
        (record,) = answer.json()["tokens"]
        assert record["name"] == BOOTSTRAP_NAME
        assert record["expires_at"] == pytest.approx(record["created_at"] + 3600)

    def test_no_log_or_answer_carries_the_redis_password_or_a_token(
        self, ephemeral_stack: EphemeralStack
    ) -> None:
        """The stack's whole log (Redis, controller, API, ``flowlane up`` itself) and the
        API's answers are searched for the secrets it used: the private Redis's password
        and the admin token."""
        api, log = ephemeral_stack.api, ephemeral_stack.log
        found = re.search(r"password in (\S+)\)", banner(log, "Redis"))
        assert found is not None
        config = Path(found[1])
        password = config.read_text().split()[1]
        token = read_token_file(Path(banner(log, "API token").split(" ", 1)[0]))
        assert token is not None and len(password) > 16
        headers = {"Authorization": f"Bearer {token}"}
        answers = [
            httpx.get(f"{api}{route}", headers=headers).text
            for route in ("/readyz", "/v1/tokens", "/v1/switches", "/v1/policy", "/v1/events")
        ]
        answers.append(httpx.get(f"{api}/v1/audit", headers={"Authorization": "Bearer x"}).text)
        answers.append(httpx.get(f"{api}/v1/audit", headers=headers).text)
        text = log.read_text() + (config.parent / "redis.log").read_text()
        for secret in (password, token):
            assert secret not in text
            for answer in answers:
                assert secret not in answer


def test_the_api_writes_a_second_stores_token_beside_the_first_ones(
    redis_client: redis.Redis, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Whatever starts the API (a second ``flowlane up``, ``flowlane api``): a token file
    already holding a token is never overwritten, and the log says where the token went."""
    path = tmp_path / "token"
    path.write_text(PERSISTENT_TOKEN + "\n")
    tokens = TokenStore(redis_client)
    with caplog.at_level(logging.WARNING, logger="flowlane.api"):
        assert asyncio.run(bootstrap_admin(tokens, path, ttl_s=60))
    own = store_token_file(path, tokens.store_id())
    assert path.read_text() == PERSISTENT_TOKEN + "\n"
    secret = read_token_file(own)
    assert secret is not None and tokens.authenticate(secret) is not None
    assert str(own) in caplog.text and "left as it is" in caplog.text
    assert secret not in caplog.text


def test_an_empty_token_file_is_written_in_place(redis_client: redis.Redis, tmp_path: Path) -> None:
    path = tmp_path / "token"
    tokens = TokenStore(redis_client)
    assert asyncio.run(bootstrap_admin(tokens, path))
    secret = read_token_file(path)
    assert secret is not None and tokens.authenticate(secret) is not None


def test_a_redis_url_with_a_password_is_never_printed(tmp_path: Path) -> None:
    """Before: ``Redis at redis://:PASSWORD@... does not answer``."""
    env = clean_env(tmp_path)
    password = "s3cret-pw-of-test"
    url = f"redis://:{password}@127.0.0.1:{free_port()}/0"
    url_file = tmp_path / "redis-url"
    url_file.write_text(url + "\n")
    url_file.chmod(0o600)
    args = ["--metrics-port", "0", "--api-port", str(free_port())]
    args += ["--ofp-port", str(free_port())]
    for source in (["--redis-url-file", str(url_file)], ["--redis-url", url]):
        result = subprocess.run(
            [sys.executable, "-m", "controller", "up", *source, *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=60,
        )
        assert result.returncode == 1, result.stdout + result.stderr
        output = result.stdout + result.stderr
        assert password not in output
        assert f"Redis at {redact(url)} does not answer" in " ".join(output.split())
        if source[0] == "--redis-url":  # and the command line is named as the leak it is
            assert "--redis-url carries a password on the command line" in output


def test_flowlane_api_reads_its_redis_url_from_a_file(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    """``flowlane api --redis-url-file``: the URL (password and all) never in ``ps``."""
    url_file = tmp_path / "redis-url"
    url_file.write_text(redis_url + "\n")
    port = free_port()
    env = {**clean_env(tmp_path), "FLOWLANE_TOKEN_FILE": str(tmp_path / "token")}
    argv = [sys.executable, "-m", "controller", "api", "--port", str(port)]
    argv += ["--redis-url-file", str(url_file), "--token-ttl", "2h"]
    with (tmp_path / "api.log").open("wb") as log:
        process = subprocess.Popen(
            argv, cwd=REPO, env=env, start_new_session=True, stdout=log, stderr=log
        )
    try:
        wait_for("the bootstrap token", (tmp_path / "token").exists, 30)
        token = read_token_file(tmp_path / "token")
        assert token is not None
        record = TokenStore(redis_client).authenticate(token)
        assert record is not None and record.expires_at is not None
        assert record.expires_at == pytest.approx(record.created_at + 7200)
    finally:
        stop_session(process, timeout_s=30)
