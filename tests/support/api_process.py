"""A real ``flowlane api`` process for the tests that need uvicorn itself (its bounds, TLS, a kill).

The process runs from the repository in its own session (so its process group holds only
what it started) and is stopped by that group, never by name.
"""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]


def start_api(
    redis_url: str,
    port: int,
    *args: str,
    scheme: str = "http",
    verify: ssl.SSLContext | bool = True,
    timeout_s: float = 30,
) -> subprocess.Popen[bytes]:
    """``flowlane api --port PORT --redis-url URL ARGS``, returned once ``/healthz`` answers.

    ``scheme`` and ``verify`` are for an API started with ``--tls-cert``: the readiness probe
    must speak HTTPS and trust the test's CA.  If the process exits or does not answer within
    ``timeout_s``, its group is killed and the error carries the end of its stderr.
    """
    command = [sys.executable, "-m", "controller", "api", "--port", str(port)]
    process = subprocess.Popen(
        [*command, "--redis-url", redis_url, *args],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    healthz = f"{scheme}://127.0.0.1:{port}/healthz"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(healthz, verify=verify, timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.05)
    kill_group(process)
    assert process.stderr is not None
    err = process.stderr.read().decode(errors="replace")
    raise RuntimeError(f"flowlane api did not answer on {healthz}: {err[-2000:]}")


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process's own group (what it started) and reap it: no graceful shutdown."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(5)


def stop_api(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process's group (uvicorn's own clean shutdown), SIGKILL after 10 s.

    Its stderr is drained while it stops, so a chatty shutdown cannot block on a full pipe.
    """
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate(timeout=10)
