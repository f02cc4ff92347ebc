"""What a client without a token can make the API do: hold memory, fill Redis, rewrite the audit.

The real ``flowlane api`` process on a private ``redis-server`` (both on
loopback, started and stopped here), attacked as issue 24's probe did:

1. half-sent bodies: 200 connections send the headers of a ``PUT
   /v1/policy`` without a token and up to 2 MiB of a 4 MiB body (half
   chunked, half with a ``Content-Length``), as fast as the API reads it,
   then stall. While they are open: the slowest
   and median ``/healthz``, and the API's resident memory (targets: slowest
   ``/healthz`` at most 100 ms, RSS at most 50 MB above its baseline); how
   many were answered, and how many closed by the server.
2. Redis filled through the audit log: 3 000 ``POST /v1x<long path>``
   without a token, then 3 000 with a valid one (404). Redis ``used_memory``
   before and after, and the audit stream's length and memory. uvicorn's
   HTTP parser (h11) refuses a request head above 16 KiB (400, never seen by
   the app), so the paths are 15 000 bytes.
3. The audit log rewritten: 6 000 requests with a wrong bearer token. How
   many 401 and 429, the request rate, the audit entries they wrote, and the
   time at that pace to replace a full log (100 000 entries); then whether a
   valid token from the same address is still served.

Figures are printed (and written as JSON with ``--out``), not asserted: the
tests assert behaviour (``tests/api/test_abuse*.py``). ``--repo DIR`` runs
the API from another checkout (a copy of an older commit, to measure before
a change) with this interpreter.

    .venv/bin/python -m flowlane_bench.bench_api_abuse [--repo DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import redis

REPO = Path(__file__).resolve().parents[2]
AUDIT = "flowlane:audit"
REDIS = ("redis-server", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
AUDIT_FULL = 100_000
HEALTHZ_TARGET_MS = 100.0
BODY_BYTES = 4 * 1024 * 1024
"""What each half-sent body announces (below the 8 MiB limit)."""
PART_BYTES = 2 * 1024 * 1024
"""What each sends of it before stalling, if the server reads that much."""
RSS_TARGET_MB = 50.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def wait_until(check: Any, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (OSError, httpx.HTTPError, redis.RedisError):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not come up within {timeout_s:g} s")


def stop(process: subprocess.Popen[bytes]) -> None:
    """End a process this script started (its own process group), by its id."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


@contextmanager
def stack(repo: Path) -> Iterator[tuple[str, int, str, redis.Redis]]:
    """A private Redis and ``flowlane api`` from ``repo``: (base URL, API pid, admin token,
    Redis client)."""
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server is missing: apt-get install redis-server")
    work = Path(tempfile.mkdtemp(prefix="bench-api-abuse-"))
    redis_port, api_port = free_port(), free_port()
    processes: list[subprocess.Popen[bytes]] = []
    try:
        processes.append(
            subprocess.Popen(
                [*REDIS, "--port", str(redis_port), "--dir", str(work)],
                stdout=subprocess.DEVNULL,
                start_new_session=True,
            )
        )
        client = redis.Redis(port=redis_port)
        wait_until(client.ping, "redis-server")
        token_file = work / "token"
        env = {**os.environ, "PYTHONPATH": str(repo), "FLOWLANE_TOKEN_FILE": str(token_file)}
        api = [sys.executable, "-m", "controller", "api", "--port", str(api_port)]
        processes.append(
            subprocess.Popen(
                [*api, "--redis-url", f"redis://127.0.0.1:{redis_port}/0", "--log-level", "error"],
                cwd=repo,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        )
        base = f"http://127.0.0.1:{api_port}"
        wait_until(lambda: httpx.get(f"{base}/healthz").status_code == 200, "flowlane api")
        wait_until(token_file.exists, "the bootstrap token")
        yield base, processes[-1].pid, token_file.read_text().strip(), client
    finally:
        for process in reversed(processes):
            stop(process)
        shutil.rmtree(work, ignore_errors=True)


def half_sent(port: int, chunked: bool) -> socket.socket:
    """A connection that sent the headers of a 4 MiB body without a token (non-blocking)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    head = "PUT /v1/policy HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    if chunked:
        head += f'Transfer-Encoding: chunked\r\n\r\n{BODY_BYTES:x}\r\n{{"x": "'
    else:
        head += f'Content-Length: {BODY_BYTES}\r\n\r\n{{"x": "'
    sock.sendall(head.encode())
    sock.setblocking(False)
    return sock


def send_part(
    sockets: list[socket.socket], part_bytes: int, timeout_s: float
) -> set[socket.socket]:
    """Send up to ``part_bytes`` more of each body, as fast as the server takes it, then stall:
    the connections the server closed (or reset) meanwhile."""
    left = {sock: part_bytes for sock in sockets}
    closed: set[socket.socket] = set()
    block = b"a" * 65536
    deadline = time.monotonic() + timeout_s
    while left and time.monotonic() < deadline:
        progressed = False
        for sock in list(left):
            try:
                sent = sock.send(block[: left[sock]])
            except BlockingIOError:
                continue
            except OSError:  # reset or broken pipe: the server closed it
                closed.add(sock)
                del left[sock]
                continue
            progressed = True
            left[sock] -= sent
            if left[sock] <= 0:
                del left[sock]
        if not progressed:
            time.sleep(0.01)
    return closed


def answered(sock: socket.socket) -> tuple[bool, bool]:
    """(got an HTTP answer, the server closed the connection), without waiting."""
    got, closed = b"", False
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                closed = True
                break
            got += data
    except BlockingIOError:
        pass
    except ConnectionResetError:
        closed = True
    return got.startswith(b"HTTP/1.1 "), closed


def slow_bodies(base: str, pid: int, connections: int) -> dict[str, Any]:
    port = int(base.rsplit(":", 1)[1])
    with httpx.Client(base_url=base, timeout=10) as probe:
        for _ in range(20):
            probe.get("/healthz")
        baseline = rss_mb(pid)
        sockets = [half_sent(port, chunked=bool(i % 2)) for i in range(connections)]
        try:
            reset = send_part(sockets, PART_BYTES, timeout_s=15.0)
            latencies = []
            peak = rss_mb(pid)
            for _ in range(50):
                started = time.perf_counter()
                probe.get("/healthz").raise_for_status()
                latencies.append((time.perf_counter() - started) * 1000)
                peak = max(peak, rss_mb(pid))
                time.sleep(0.02)
            outcomes = [answered(sock) for sock in sockets]
            closed = sum(c or sock in reset for sock, (_, c) in zip(sockets, outcomes, strict=True))
        finally:
            for sock in sockets:
                sock.close()
        time.sleep(1.0)
        after = rss_mb(pid)
    return {
        "connections": connections,
        "answered": sum(a for a, _ in outcomes),
        "closed_by_server": closed,
        "healthz_max_ms": round(max(latencies), 1),
        "healthz_median_ms": round(statistics.median(latencies), 1),
        "rss_baseline_mb": round(baseline, 1),
        "rss_peak_mb": round(peak, 1),
        "rss_after_close_mb": round(after, 1),
        "rss_growth_mb": round(peak - baseline, 1),
    }


def audit_figures(client: redis.Redis) -> tuple[int, int]:
    length = int(client.xlen(AUDIT))
    memory = client.memory_usage(AUDIT) or 0
    return length, int(memory)


def fill(base: str, token: str, client: redis.Redis, count: int, path_bytes: int) -> dict[str, Any]:
    path = "/v1x" + "a" * (path_bytes - 4)
    used_before = int(client.info("memory")["used_memory"])
    out: dict[str, Any] = {"requests_per_kind": count, "path_bytes": path_bytes}
    for kind, headers in (("no_token", {}), ("valid_token", {"Authorization": f"Bearer {token}"})):
        statuses: Counter[int] = Counter()
        started = time.perf_counter()
        with httpx.Client(base_url=base, timeout=10, headers=headers) as http:
            for _ in range(count):
                statuses[http.post(path).status_code] += 1
        out[kind] = {
            "statuses": dict(sorted(statuses.items())),
            "rate_per_s": round(count / (time.perf_counter() - started)),
        }
    time.sleep(1.5)  # summaries are written a second after the refusals they count
    used_after = int(client.info("memory")["used_memory"])
    length, memory = audit_figures(client)
    out |= {
        "redis_used_mb_before": round(used_before / 2**20, 1),
        "redis_used_mb_after": round(used_after / 2**20, 1),
        "audit_entries": length,
        "audit_stream_mb": round(memory / 2**20, 2),
    }
    return out


def wrong_tokens(base: str, token: str, client: redis.Redis, count: int) -> dict[str, Any]:
    length_before, _ = audit_figures(client)
    statuses: Counter[int] = Counter()
    started = time.perf_counter()
    with httpx.Client(base_url=base, timeout=10) as http:
        wrong = {"Authorization": "Bearer flt_wrong-token"}
        for _ in range(count):
            statuses[http.get("/v1/jobs", headers=wrong).status_code] += 1
        elapsed = time.perf_counter() - started
        valid = http.get("/v1/jobs", headers={"Authorization": f"Bearer {token}"}).status_code
    time.sleep(1.5)
    written = audit_figures(client)[0] - length_before
    per_s = written / elapsed
    return {
        "requests": count,
        "statuses": dict(sorted(statuses.items())),
        "rate_per_s": round(count / elapsed),
        "audit_entries_written": written,
        "audit_entries_per_s": round(per_s, 2),
        "hours_to_replace_full_audit": round(AUDIT_FULL / per_s / 3600, 2) if per_s else None,
        "valid_token_status_meanwhile": valid,
    }


def verdict(ok: bool) -> str:
    return "meets" if ok else "MISSES"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", type=Path, default=REPO, help="Checkout to run the API from")
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--fill", type=int, default=3000, help="Long-path requests per kind")
    parser.add_argument("--path-bytes", type=int, default=15_000)
    parser.add_argument("--wrong", type=int, default=6000, help="Wrong-token requests")
    parser.add_argument("--out", type=Path, help="Write the figures here as JSON")
    args = parser.parse_args()
    figures: dict[str, Any] = {"repo": str(args.repo.resolve())}
    with stack(args.repo.resolve()) as (base, pid, token, client):
        figures["slow_bodies"] = slow = slow_bodies(base, pid, args.connections)
        print(f"API from {figures['repo']}")
        print(
            f"1. {slow['connections']} half-sent bodies without a token:"
            f" {slow['answered']} answered, {slow['closed_by_server']} closed by the server;"
            f" /healthz max"
            f" {slow['healthz_max_ms']} ms (median {slow['healthz_median_ms']} ms,"
            f" {verdict(slow['healthz_max_ms'] <= HEALTHZ_TARGET_MS)} <= {HEALTHZ_TARGET_MS:g} ms);"
            f" RSS {slow['rss_baseline_mb']} -> {slow['rss_peak_mb']} MB"
            f" (+{slow['rss_growth_mb']} MB, {verdict(slow['rss_growth_mb'] <= RSS_TARGET_MB)}"
            f" <= +{RSS_TARGET_MB:g} MB), {slow['rss_after_close_mb']} MB after they closed"
        )
        figures["fill"] = filled = fill(base, token, client, args.fill, args.path_bytes)
        print(
            f"2. {args.fill} x POST {args.path_bytes}-byte unknown path, without a token"
            f" {filled['no_token']['statuses']} ({filled['no_token']['rate_per_s']}/s) and with one"
            f" {filled['valid_token']['statuses']}: Redis used_memory"
            f" {filled['redis_used_mb_before']} -> {filled['redis_used_mb_after']} MB; audit"
            f" {filled['audit_entries']} entries, {filled['audit_stream_mb']} MB"
        )
        figures["wrong_tokens"] = wrong = wrong_tokens(base, token, client, args.wrong)
        print(
            f"3. {wrong['requests']} wrong tokens: {wrong['statuses']} at {wrong['rate_per_s']}/s;"
            f" {wrong['audit_entries_written']} audit entries"
            f" ({wrong['audit_entries_per_s']}/s: {wrong['hours_to_replace_full_audit']} h to"
            f" replace {AUDIT_FULL} entries); a valid token meanwhile:"
            f" {wrong['valid_token_status_meanwhile']}"
        )
    if args.out is not None:
        args.out.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
