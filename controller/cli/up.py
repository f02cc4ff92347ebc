"""``flowlane up``: the whole stack on one machine (Redis, controller, API).

Each part is its own process, as in production; this command only starts
them in order, waits until each is ready, prints where they listen and stops
them all (by PID) on Ctrl-C or SIGTERM, or as soon as one of them dies.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Annotated

import httpx
import redis
import typer

from controller.cli.render import err, out


class StackError(RuntimeError):
    pass


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait(
    what: str, ready: Callable[[], bool], process: subprocess.Popen[bytes], timeout_s: float
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise StackError(f"{what} exited with status {process.returncode}")
        if ready():
            return
        time.sleep(0.1)
    raise StackError(f"{what} not ready after {timeout_s:g}s")


def _redis_ready(url: str) -> Callable[[], bool]:
    def check() -> bool:
        try:
            return bool(redis.Redis.from_url(url, socket_connect_timeout=0.5).ping())
        except redis.RedisError:
            return False

    return check


def _http_ok(url: str) -> Callable[[], bool]:
    def check() -> bool:
        try:
            return httpx.get(url, timeout=0.5).status_code == 200
        except httpx.HTTPError:
            return False

    return check


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    """Newest first, so the API goes before the controller and Redis goes last."""
    for process in reversed(processes):
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)


@contextlib.contextmanager
def _private_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="flowlane-redis-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def up(
    policy: Annotated[Path, typer.Option(help="Policy YAML used when Redis has none")] = Path(
        "policies/default.yaml"
    ),
    redis_url: Annotated[
        str | None, typer.Option(help="Use this Redis instead of starting a private one")
    ] = None,
    api_host: Annotated[str, typer.Option(help="REST API listen address")] = "127.0.0.1",
    api_port: Annotated[int, typer.Option(help="REST API port")] = 8080,
    ofp_host: Annotated[str, typer.Option(help="OpenFlow listen address")] = "127.0.0.1",
    ofp_port: Annotated[int, typer.Option(help="OpenFlow listen port")] = 6653,
    metrics_port: Annotated[int, typer.Option(help="Controller /metrics port (0 disables)")] = 9100,
) -> None:
    """Start Redis (unless --redis-url), the controller and the API; stop them on Ctrl-C."""
    processes: dict[str, subprocess.Popen[bytes]] = {}
    stopping = False

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    def start(name: str, args: list[str], quiet: bool = False) -> subprocess.Popen[bytes]:
        processes[name] = subprocess.Popen(args, stdout=subprocess.DEVNULL if quiet else None)
        return processes[name]

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    flowlane = [sys.executable, "-m", "controller"]
    with _private_dir() as workdir:
        try:
            if redis_url is None:
                redis_port = _free_port()
                redis_url = f"redis://127.0.0.1:{redis_port}/0"
                server = shutil.which("redis-server")
                if server is None:
                    raise StackError(
                        "redis-server not found: install it (make setup) or pass --redis-url"
                    )
                redis_args = ["--port", str(redis_port), "--bind", "127.0.0.1"]
                redis_args += ["--dir", str(workdir), "--save", "", "--appendonly", "no"]
                started = start("redis-server", [server, *redis_args], quiet=True)
                _wait("redis-server", _redis_ready(redis_url), started, 15)
            elif not _redis_ready(redis_url)():
                raise StackError(f"Redis at {redis_url} does not answer")
            controller_args = ["--policy", str(policy), "--redis-url", redis_url]
            controller_args += ["--ofp-host", ofp_host, "--ofp-port", str(ofp_port)]
            controller_args += ["--metrics-port", str(metrics_port)]
            start("controller", [*flowlane, "controller", *controller_args])
            api_args = ["--host", api_host, "--port", str(api_port), "--redis-url", redis_url]
            api_process = start("api", [*flowlane, "api", *api_args])
            api = f"http://{api_host}:{api_port}"
            _wait("the API and a controller heartbeat", _http_ok(f"{api}/readyz"), api_process, 60)
            if processes["controller"].poll() is not None:
                raise StackError(
                    f"controller exited with status {processes['controller'].returncode}"
                )
            metrics = f"http://127.0.0.1:{metrics_port}/metrics" if metrics_port else "off"
            out.print(
                f"[bold green]flowlane is up[/]\n"
                f"  REST API     {api}  (docs: {api}/docs)\n"
                f"  OpenFlow     tcp:{ofp_host}:{ofp_port}\n"
                f"  metrics      {metrics}\n"
                f"  Redis        {redis_url}\n"
                "Ctrl-C stops everything."
            )
            while not stopping:
                for name, process in processes.items():
                    if process.poll() is not None:
                        raise StackError(f"{name} exited with status {process.returncode}")
                time.sleep(0.2)
        except StackError as exc:
            err.print(f"[bold red]flowlane up:[/] {exc}")
            _stop(list(processes.values()))
            raise typer.Exit(1) from None
        finally:
            _stop(list(processes.values()))
    out.print("flowlane stopped")
