"""The REST API served by uvicorn in a thread, on a free port, for clients outside Python.

The tests of ``deploy/slurm`` call it with curl from shell scripts and the CLI's tests
with the CLI, so it must be a real server; a thread starts faster than a ``flowlane api``
process and needs no readiness poll: the socket is listening before the thread starts, and
a client's connection waits in the backlog until uvicorn accepts it.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn
import yaml
from prometheus_client import CollectorRegistry

from controller.api.app import create_app
from controller.api.settings import ApiSettings

REPO = Path(__file__).resolve().parents[2]
DEFAULT_POLICY = REPO / "policies" / "default.yaml"


@contextmanager
def serve_api(redis_url: str) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of an API on ``redis_url``, stopped on exit."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
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


def apply_default_policy(api_url: str, admin_token: str) -> dict[str, Any]:
    """Make ``policies/default.yaml`` (inference, training, best-effort) the active policy."""
    document: dict[str, Any] = yaml.safe_load(DEFAULT_POLICY.read_text())
    response = httpx.put(
        f"{api_url}/v1/policy",
        json=document,
        headers={"Authorization": f"Bearer {admin_token}"},
        timeout=10,
    )
    assert response.status_code == 201, response.text
    return document
