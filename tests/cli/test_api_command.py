"""``flowlane api``: the real command serves the API until it is stopped."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import redis
from typer.testing import CliRunner

from controller.cli.main import app

REPO = Path(__file__).resolve().parents[2]
RUNNING = "Uvicorn running on"


def test_flowlane_api_serves_until_terminated(
    redis_client: redis.Redis, redis_url: str, unused_port: int, private_token_file: Path
) -> None:
    """On an empty store the first start writes an admin token, readable by its owner only."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "controller",
            "api",
            "--port",
            str(unused_port),
            "--redis-url",
            redis_url,
            "--log-level",
            "info",
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    started = threading.Event()
    log: list[str] = []

    def watch() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            log.append(line)
            if RUNNING in line:
                started.set()
        started.set()  # the output ended: the process is gone

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        assert started.wait(20) and process.poll() is None, "".join(log)
        base = f"http://127.0.0.1:{unused_port}"
        assert httpx.get(f"{base}/healthz").json() == {"status": "ok"}
        assert httpx.get(f"{base}/v1/policy/history").status_code == 401
        deadline = time.monotonic() + 10
        while not private_token_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert private_token_file.stat().st_mode & 0o777 == 0o600
        assert "created admin token 'bootstrap-admin'" in "".join(log)
        token = {"Authorization": f"Bearer {private_token_file.read_text().strip()}"}
        assert httpx.get(f"{base}/v1/policy/history", headers=token).status_code == 200
        assert httpx.get(f"{base}/openapi.json").json()["info"]["title"] == "flowlane"
    finally:
        process.terminate()
        process.wait(timeout=10)
        watcher.join(timeout=10)
    # uvicorn shuts down gracefully, then re-raises SIGTERM so the exit status tells why.
    assert process.returncode in (0, -signal.SIGTERM)
    assert "Application shutdown complete" in "".join(log)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--wait-timeout", "200"], "default_wait_timeout_s <= max_wait_timeout_s"),
        (["--port", "0"], "Invalid value for '--port'"),
    ],
)
def test_bad_settings_are_usage_errors(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["api", *args], env={"COLUMNS": "200"})
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())
