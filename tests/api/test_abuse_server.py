"""The uvicorn-level bounds of the real ``flowlane api`` process: half-sent bodies, slow
bodies, the connection limit and whose ``X-Forwarded-For`` is believed.

Raw sockets, because an HTTP client would not send half a request and stall.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from typer.testing import CliRunner

from controller.auth.model import Role
from controller.cli.main import app as cli
from controller.store.events import EventStore
from controller.store.tokens import TokenStore
from tests.conftest import free_port
from tests.support.api_process import start_api, stop_api


@pytest.fixture(scope="module")
def api(redis_url: str) -> Iterator[tuple[str, int]]:
    """One API process for the module, with 1 s deadlines for heads and bodies and room for 60
    connections: (base URL, pid)."""
    port = free_port()
    process = start_api(
        redis_url,
        port,
        *("--body-timeout", "1", "--head-timeout", "1", "--limit-concurrency", "60"),
        *("--log-level", "error"),
    )
    try:
        yield f"http://127.0.0.1:{port}", process.pid
    finally:
        stop_api(process)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def half_sent(base: str, path: str, headers: dict[str, str], chunked: bool) -> socket.socket:
    """A connection that sent the headers and 8 KB of a larger body, then stalls."""
    port = int(base.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    lines = [f"PUT {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    part = b'{"x": "' + b"a" * 8192
    if chunked:
        lines.append("Transfer-Encoding: chunked")
        body = b"%x\r\n" % (64 * 1024) + part
    else:
        lines.append(f"Content-Length: {4 * 1024 * 1024}")
        body = part
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    return sock


def answer_and_close(sock: socket.socket, timeout_s: float) -> tuple[int, bool]:
    """(status, whether the server closed the connection) within ``timeout_s``."""
    sock.settimeout(timeout_s)
    received = b""
    closed = False
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                closed = True
                break
            received += data
    except TimeoutError:
        pass
    except ConnectionResetError:
        closed = True
    assert received.startswith(b"HTTP/1.1 "), received[:200]
    return int(received.split(b" ", 2)[1]), closed


def test_half_sent_bodies_without_a_token_are_refused_at_once_and_closed(
    api: tuple[str, int],
) -> None:
    """40 connections that send part of a body without a token and stall: each is refused
    from its headers and closed, /healthz stays quick and memory stays put (before: the API
    read or waited for every body, and 40 such connections took it from 121 to 370 MB)."""
    base, pid = api
    with httpx.Client(base_url=base, timeout=5) as probe:
        for _ in range(10):
            probe.get("/healthz")
        before = rss_kib(pid)
        sockets = [half_sent(base, "/v1/policy", {}, chunked=bool(i % 2)) for i in range(40)]
        try:
            started = time.monotonic()
            outcomes = [answer_and_close(sock, 3.0) for sock in sockets]
            took = time.monotonic() - started
            healthz = time.monotonic()
            assert probe.get("/healthz").status_code == 200
            healthz = time.monotonic() - healthz
            after = rss_kib(pid)
        finally:
            for sock in sockets:
                sock.close()
    print(
        f"\n40 half-sent bodies: answered in {took:.2f} s, /healthz {healthz * 1000:.1f} ms,"
        f" RSS {before} -> {after} KiB"
    )
    assert all(status in (401, 429) for status, _ in outcomes), outcomes
    assert all(closed for _, closed in outcomes), outcomes
    assert after - before < 20 * 1024, (before, after)


def test_a_stalled_body_with_a_token_is_cut_off_at_the_deadline(
    api: tuple[str, int], redis_client: redis.Redis
) -> None:
    base, _ = api
    _, secret = TokenStore(redis_client).create("slow-writer", Role.admin)
    sock = half_sent(base, "/v1/policy", {"Authorization": f"Bearer {secret}"}, chunked=True)
    try:
        started = time.monotonic()
        status, closed = answer_and_close(sock, 5.0)
        took = time.monotonic() - started
    finally:
        sock.close()
    assert (status, closed) == (408, True)
    assert 0.8 < took < 4, took


def test_a_request_head_that_never_ends_is_cut_off(api: tuple[str, int]) -> None:
    """Headers trickled without their final blank line, on a new connection and on one that
    was already served: closed at the head deadline, so they cannot pile up to the
    connection limit (uvicorn alone waits for them for ever)."""
    base, _ = api
    port = int(base.rsplit(":", 1)[1])
    fresh = socket.create_connection(("127.0.0.1", port), timeout=5)
    served = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        served.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        response = b""
        while not response.endswith(b'{"status":"ok"}'):
            response += served.recv(65536)
        assert response.startswith(b"HTTP/1.1 200")
        started = time.monotonic()
        for sock in (fresh, served):
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        for sock in (fresh, served):
            for _ in range(3):  # a byte now and then does not extend the deadline
                time.sleep(0.2)
                with contextlib.suppress(OSError):
                    sock.sendall(b"a")
            sock.settimeout(5)
            with contextlib.suppress(ConnectionResetError):
                assert sock.recv(65536) == b""
        took = time.monotonic() - started
    finally:
        fresh.close()
        served.close()
    assert took < 4, took


def test_connections_beyond_the_limit_are_refused(api: tuple[str, int]) -> None:
    """--limit-concurrency: with 60 connections open, the next request is 503 (uvicorn's)."""
    base, _ = api
    port = int(base.rsplit(":", 1)[1])
    idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(60)]
    try:
        time.sleep(0.3)  # the server accepts them
        assert httpx.get(f"{base}/healthz", timeout=5).status_code == 503
    finally:
        for sock in idle:
            sock.close()
    deadline = time.monotonic() + 5
    while httpx.get(f"{base}/healthz", timeout=5).status_code != 200:
        assert time.monotonic() < deadline
        time.sleep(0.1)


def forwarded_client(base: str, client: redis.Redis, forwarded: str) -> str:
    """The client address the audit log records for a refused write claiming ``forwarded``."""
    marker = f"/v1/jobs/forwarded-{time.monotonic_ns()}"
    answer = httpx.delete(
        f"{base}{marker}",
        headers={"X-Forwarded-For": forwarded, "Authorization": "Bearer flt_wrong"},
    )
    assert answer.status_code in (401, 429)
    deadline = time.monotonic() + 5
    while True:
        for event in EventStore(client, name="audit").read(limit=10_000):
            entry = event.to_dict()
            if entry.get("path") == marker or marker in entry.get("paths", []):
                return str(entry["client"])
        assert time.monotonic() < deadline, "no audit entry"
        time.sleep(0.1)


def test_x_forwarded_for_is_believed_only_from_listed_proxies(
    api: tuple[str, int], redis_client: redis.Redis, redis_url: str, unused_port: int
) -> None:
    """By default the header is ignored (before: uvicorn believed it from 127.0.0.1, so any
    local process chose the address the audit log recorded); --forwarded-allow-ips lists the
    proxies whose header counts."""
    base, _ = api
    assert forwarded_client(base, redis_client, "203.0.113.7") == "127.0.0.1"
    proxied = start_api(redis_url, unused_port, "--forwarded-allow-ips", "127.0.0.1")
    try:
        url = f"http://127.0.0.1:{unused_port}"
        assert forwarded_client(url, redis_client, "203.0.113.7") == "203.0.113.7"
    finally:
        stop_api(proxied)


def test_the_server_options_reach_uvicorn(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    seen: dict[str, object] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: seen.update(kwargs))
    runner = CliRunner()
    args = ["api", "--redis-url", "redis://127.0.0.1:1/0"]
    assert runner.invoke(cli, args).exit_code == 0
    assert seen["http"].__name__ == "HeadDeadlineProtocol"  # type: ignore[attr-defined]
    assert (seen["proxy_headers"], seen["limit_concurrency"], seen["timeout_keep_alive"]) == (
        False,
        512,
        5,
    )
    extra = ["--forwarded-allow-ips", "10.0.0.1, 10.0.1.0/24", "--limit-concurrency", "9"]
    assert runner.invoke(cli, [*args, *extra, "--timeout-keep-alive", "2"]).exit_code == 0
    assert seen["proxy_headers"] is True
    assert seen["forwarded_allow_ips"] == ["10.0.0.1", "10.0.1.0/24"]
    assert (seen["limit_concurrency"], seen["timeout_keep_alive"]) == (9, 2)
