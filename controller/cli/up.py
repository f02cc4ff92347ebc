"""``flowlane up``: the whole stack on one machine (Redis, controller, API), kept running.

Each part is its own process, as in production.  This command starts them in
order, waits until each is ready and prints where they listen.  From then on
it supervises them: a child that dies is started again after a back-off that
grows while it keeps dying (``controller.cli.supervise`` decides), and every
death is logged with its exit status.  The others ride it out: switches keep
their flows, and the controller and the API reconnect to a restarted Redis
by themselves, which is why Redis comes back on the same port.  Ctrl-C or
SIGTERM stops them all by PID, newest first (API, controller, Redis).

The private Redis keeps its data (append-only file, fsync every second, plus
RDB snapshots) in a data directory, so policy versions, jobs and events
survive a restart of Redis and of ``flowlane up``; ``--ephemeral`` runs it
from a temporary directory with persistence off, for tests and demos.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Annotated
from urllib.parse import urlsplit, urlunsplit

import httpx
import redis
import typer
from rich.markup import escape

from controller.api.settings import MAX_BODY_BYTES
from controller.auth.files import TOKEN_FILE_ENV, default_token_file
from controller.cli.api import tls_options
from controller.cli.controller import ofp_tls
from controller.cli.render import LogFormatOption, err, out
from controller.cli.supervise import Supervisor, exit_text
from controller.logs import LogFormat
from controller.policy.load import default_policy_path
from controller.store.policies import HISTORY_LIMIT

DATA_DIR_ENV = "FLOWLANE_DATA_DIR"
LOCK_FILE = "flowlane.lock"
REDIS_LOG = "redis.log"
REDIS_AUTH_CONF = "redis-auth.conf"
"""The private Redis's password (0600), written afresh by every ``flowlane up``."""
REDIS_URL_ENV = "FLOWLANE_REDIS_URL"
_POLL_S = 0.1


class StackError(RuntimeError):
    pass


class _StoppedError(Exception):
    """Ctrl-C or SIGTERM arrived while the stack was still starting."""


# ---- pure pieces ----------------------------------------------------------------------


def default_data_dir(euid: int, home: Path) -> Path:
    """Where the private Redis keeps its files when neither ``--data-dir`` nor
    ``$FLOWLANE_DATA_DIR`` says: the system's place for root, the user's otherwise."""
    if euid == 0:
        return Path("/var/lib/flowlane")
    return home / ".local" / "share" / "flowlane"


def redis_args(
    port: int, directory: Path, persistent: bool, config: Path | None = None
) -> list[str]:
    """``redis-server`` arguments: loopback only, files (and its log) in ``directory``.

    Persistent: an append-only file fsynced every second (a crash of the
    machine loses at most a second; a crash of Redis alone, nothing), and
    Redis's default RDB snapshots, which also keep the AOF rewrite small.
    ``config`` is a file read first: the password, kept out of the command line.
    """
    args = [str(config)] if config is not None else []
    args += ["--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory)]
    args += ["--logfile", str(directory / REDIS_LOG), "--loglevel", "warning"]
    if persistent:
        return [*args, "--appendonly", "yes", "--appendfsync", "everysec"]
    return [*args, "--save", "", "--appendonly", "no"]


# ---- the shell ------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def without_password(url: str) -> str:
    """``url`` fit to print: a password in it is replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def write_redis_password(directory: Path) -> tuple[Path, str]:
    """A fresh random password for the private Redis, in a config file only its owner reads.

    It never appears in a command line (``ps`` shows those to every user): Redis
    reads it from the file, the controller and the API from their environment.
    """
    password = secrets.token_urlsafe(24)
    config = directory / REDIS_AUTH_CONF
    config.unlink(missing_ok=True)
    fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, f"requirepass {password}\n".encode())
    finally:
        os.close(fd)
    return config, password


def _redis_ready(url: str) -> Callable[[], bool]:
    def check() -> bool:
        try:
            return bool(redis.Redis.from_url(url, socket_connect_timeout=0.5).ping())
        except redis.RedisError:
            return False

    return check


def _http_ok(url: str, mutual_tls: bool = False) -> Callable[[], bool]:
    """Whether ``url`` answers 200. Our own child's certificate is not checked (it may be
    for a name other than the probe's address); an API that requires client certificates,
    which this probe has none of, counts as ready once it accepts connections."""
    parts = urlsplit(url)

    def check() -> bool:
        if mutual_tls:
            try:
                with socket.create_connection((parts.hostname, parts.port), timeout=0.5):
                    return True
            except OSError:
                return False
        try:
            return httpx.get(url, timeout=0.5, verify=False).status_code == 200
        except httpx.HTTPError:
            return False

    return check


def _say(message: str, error: bool = False) -> None:
    """A timestamped line: a restart is read next to the children's own logs."""
    console = err if error else out
    console.print(
        f"{time.strftime('%H:%M:%S')} flowlane up: {message}",
        highlight=False,
        markup=False,
        soft_wrap=True,  # one line per event, whatever the width: logs are grepped
    )


@dataclass
class _Child:
    name: str
    args: list[str]
    quiet: bool = False
    pass_fds: tuple[int, ...] = ()
    stop_timeout_s: float = 10.0
    env: dict[str, str] | None = None
    """Extra environment (the Redis URL with its password: never in the command line)."""
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> subprocess.Popen[bytes]:
        self.process = subprocess.Popen(
            self.args,
            stdout=subprocess.DEVNULL if self.quiet else None,
            pass_fds=self.pass_fds,
            env={**os.environ, **self.env} if self.env else None,
        )
        return self.process

    def stop(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(self.stop_timeout_s)
        except subprocess.TimeoutExpired:
            _say(f"{self.name} (pid {process.pid}) ignored SIGTERM; killing it", error=True)
            process.kill()
            process.wait(5)


@dataclass
class _Stack:
    supervisor: Supervisor = field(default_factory=Supervisor)
    children: list[_Child] = field(default_factory=list)
    stopping: bool = False

    def on_signal(self, _signum: int, _frame: FrameType | None) -> None:
        self.stopping = True

    def start(self, child: _Child) -> subprocess.Popen[bytes]:
        self.children.append(child)
        process = child.start()
        self.supervisor.started(child.name)
        return process

    def wait(self, what: str, ready: Callable[[], bool], child: _Child, timeout_s: float) -> None:
        assert child.process is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.stopping:
                raise _StoppedError
            if child.process.poll() is not None:
                raise StackError(f"{what} {exit_text(child.process.returncode)}")
            if ready():
                return
            time.sleep(_POLL_S)
        raise StackError(f"{what} not ready after {timeout_s:g}s")

    def stop(self) -> None:
        """Newest first, so the API goes before the controller and Redis goes last (the
        controller removes its heartbeat from Redis as it stops)."""
        for child in reversed(self.children):
            child.stop()

    def supervise(self) -> None:
        """Until Ctrl-C/SIGTERM: report each death, start each child whose back-off is over."""
        supervisor = self.supervisor
        by_name = {child.name: child for child in self.children}
        while not self.stopping:
            for child in self.children:
                process = child.process
                if not supervisor.running(child.name) or process is None:
                    continue
                if process.poll() is not None and not self.stopping:
                    restart = supervisor.exited(child.name, process.returncode, process.pid)
                    _say(restart.describe(), error=True)
            if self.stopping:
                break  # Ctrl-C reaches the children too: their deaths are the stop, not a crash
            for name in supervisor.due():
                child = by_name[name]
                supervisor.started(name)
                try:
                    process = child.start()
                except OSError as exc:
                    retry = supervisor.exited(name, 127)  # the shell's "cannot execute"
                    _say(f"cannot start {name}: {exc}; next try in {retry.delay_s:g} s", error=True)
                    continue
                _say(f"{name} started again (pid {process.pid})")
            time.sleep(_POLL_S)


@contextlib.contextmanager
def _ephemeral_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="flowlane-redis-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def open_data_dir(path: Path) -> Iterator[int]:
    """Create ``path`` (mode 0700: it holds every policy) and lock it; yields the lock's fd.

    The lock is what stops two stacks (or a stack and the ``redis-server``
    an earlier, killed ``flowlane up`` left behind) from writing one
    append-only file: the fd is passed to ``redis-server``, so the lock is
    held for as long as either process lives.
    """
    try:
        if not path.exists():
            path.mkdir(parents=True, mode=0o700)
            path.chmod(0o700)  # mkdir's mode is filtered by the umask
        elif not path.is_dir():
            raise StackError(f"--data-dir {path}: exists and is not a directory")
        lock = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise StackError(f"--data-dir {path}: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StackError(
                f"--data-dir {path} is in use by another flowlane up, or by a redis-server an"
                f" earlier one left running (fuser {path / LOCK_FILE})"
            ) from None
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            _say(f"{path} is readable by others (mode {mode:o}); chmod 700 it", error=True)
        os.ftruncate(lock, 0)
        os.write(lock, f"{os.getpid()}\n".encode())
        yield lock
    finally:
        os.close(lock)


def _redis_log_tail(directory: Path, lines: int = 5) -> str:
    try:
        tail = (directory / REDIS_LOG).read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return "".join(f"\n  {line}" for line in tail)


def up(
    policy: Annotated[
        Path | None,
        typer.Option(
            help="Policy YAML used when Redis has none [default: the shipped default policy,"
            " flowlane policy default prints it]",
            show_default=False,
        ),
    ] = None,
    redis_url: Annotated[
        str | None, typer.Option(help="Use this Redis instead of starting a private one")
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            envvar=DATA_DIR_ENV,
            help="Where the private Redis keeps its data (default: /var/lib/flowlane as root,"
            " else ~/.local/share/flowlane)",
        ),
    ] = None,
    ephemeral: Annotated[
        bool,
        typer.Option(help="Private Redis in a temporary directory, persistence off (tests, demos)"),
    ] = False,
    api_host: Annotated[str, typer.Option(help="REST API listen address")] = "127.0.0.1",
    api_port: Annotated[int, typer.Option(help="REST API port")] = 8080,
    ofp_host: Annotated[str, typer.Option(help="OpenFlow listen address")] = "127.0.0.1",
    ofp_port: Annotated[int, typer.Option(help="OpenFlow listen port")] = 6653,
    metrics_port: Annotated[int, typer.Option(help="Controller /metrics port (0 disables)")] = 9100,
    history_limit: Annotated[
        int, typer.Option(min=1, help="Policy versions kept (flowlane api --history-limit)")
    ] = HISTORY_LIMIT,
    token_file: Annotated[
        Path | None,
        typer.Option(
            envvar=TOKEN_FILE_ENV,
            help="Where the API writes the first admin token of an empty store"
            " [default: ~/.config/flowlane/token, where the CLI looks]",
            show_default=False,
        ),
    ] = None,
    max_body: Annotated[
        int, typer.Option(min=1024, help="Largest API request body in bytes (flowlane api)")
    ] = MAX_BODY_BYTES,
    tls_cert: Annotated[Path | None, typer.Option(help="Serve the API over HTTPS")] = None,
    tls_key: Annotated[Path | None, typer.Option(help="The API certificate's key")] = None,
    tls_client_ca: Annotated[
        Path | None, typer.Option(help="Require API client certificates of this CA")
    ] = None,
    ofp_tls_cert: Annotated[
        Path | None, typer.Option(help="OpenFlow over mutual TLS: the controller's certificate")
    ] = None,
    ofp_tls_key: Annotated[Path | None, typer.Option(help="Its private key")] = None,
    ofp_ca: Annotated[
        Path | None, typer.Option(help="Accept only switches certified by this CA")
    ] = None,
    log_format: LogFormatOption = LogFormat.text,
    access_log: Annotated[bool, typer.Option(help="Log every API request")] = False,
) -> None:
    """Start Redis (unless --redis-url), the controller and the API; restart any that dies;
    stop them all on Ctrl-C."""
    if redis_url is not None and ephemeral:
        err.print(
            "[bold red]flowlane up:[/] --ephemeral is for the private Redis; drop --redis-url"
        )
        raise typer.Exit(2)
    policy = policy if policy is not None else default_policy_path()
    api_tls = tls_options(tls_cert, tls_key, tls_client_ca)
    switch_tls = ofp_tls(ofp_tls_cert, ofp_tls_key, ofp_ca)
    stack = _Stack()
    signal.signal(signal.SIGTERM, stack.on_signal)
    signal.signal(signal.SIGINT, stack.on_signal)
    flowlane = [sys.executable, "-m", "controller"]
    with contextlib.ExitStack() as resources:
        try:
            storage = "external"
            shown_url = without_password(redis_url) if redis_url is not None else None
            if redis_url is None:
                redis_port = _free_port()
                server = shutil.which("redis-server")
                if server is None:
                    raise StackError(
                        "redis-server not found: install it (make setup) or pass --redis-url"
                    )
                lock: tuple[int, ...] = ()
                if ephemeral:
                    directory = resources.enter_context(_ephemeral_dir())
                    storage = "ephemeral (nothing is kept)"
                else:
                    directory = (data_dir or default_data_dir(os.geteuid(), Path.home())).absolute()
                    lock = (resources.enter_context(open_data_dir(directory)),)
                    storage = f"{directory} (append-only file)"
                config, password = write_redis_password(directory)
                redis_url = f"redis://:{password}@127.0.0.1:{redis_port}/0"
                shown_url = f"redis://127.0.0.1:{redis_port}/0 (password in {config})"
                redis_child = _Child(
                    "redis-server",
                    [
                        server,
                        *redis_args(redis_port, directory, persistent=not ephemeral, config=config),
                    ],
                    quiet=True,
                    pass_fds=lock,
                    stop_timeout_s=30.0,  # a clean stop writes its snapshot first
                )
                stack.start(redis_child)
                try:
                    stack.wait("redis-server", _redis_ready(redis_url), redis_child, 30)
                except StackError as exc:
                    raise StackError(f"{exc}{_redis_log_tail(directory)}") from None
            elif not _redis_ready(redis_url)():
                raise StackError(f"Redis at {redis_url} does not answer")
            secret_env = {REDIS_URL_ENV: redis_url}
            controller_args = ["--policy", str(policy)]
            controller_args += ["--ofp-host", ofp_host, "--ofp-port", str(ofp_port)]
            controller_args += ["--metrics-port", str(metrics_port)]
            controller_args += ["--log-format", log_format.value]
            if switch_tls is not None:
                controller_args += ["--ofp-tls-cert", str(switch_tls.cert)]
                controller_args += [
                    "--ofp-tls-key",
                    str(switch_tls.key),
                    "--ofp-ca",
                    str(switch_tls.ca),
                ]
            controller_child = _Child(
                "controller", [*flowlane, "controller", *controller_args], env=secret_env
            )
            stack.start(controller_child)
            api_args = ["--host", api_host, "--port", str(api_port)]
            api_args += ["--history-limit", str(history_limit)]
            tokens = token_file or default_token_file(os.environ, Path.home())
            api_args += ["--token-file", str(tokens), "--max-body", str(max_body)]
            api_args += ["--log-format", log_format.value]
            api_args += ["--access-log"] if access_log else []
            for option, path in (
                ("--tls-cert", tls_cert),
                ("--tls-key", tls_key),
                ("--tls-client-ca", tls_client_ca),
            ):
                api_args += [option, str(path)] if path is not None else []
            api_child = _Child("api", [*flowlane, "api", *api_args], env=secret_env)
            stack.start(api_child)
            api = f"{'https' if api_tls else 'http'}://{api_host}:{api_port}"
            stack.wait(
                "the API and a controller heartbeat",
                _http_ok(f"{api}/readyz", mutual_tls=tls_client_ca is not None),
                api_child,
                60,
            )
            if controller_child.process is not None and controller_child.process.poll() is not None:
                raise StackError(f"controller {exit_text(controller_child.process.returncode)}")
            metrics = f"http://127.0.0.1:{metrics_port}/metrics" if metrics_port else "off"
            pids = ", ".join(
                f"{child.name} {child.process.pid}" for child in stack.children if child.process
            )
            out.print(
                f"[bold green]flowlane is up[/]\n"
                f"  REST API     {api}  (docs: {api}/docs)\n"
                f"  OpenFlow     {'ssl' if switch_tls else 'tcp'}:{ofp_host}:{ofp_port}\n"
                f"  metrics      {metrics}\n"
                f"  Redis        {shown_url}\n"
                f"  Redis data   {storage}\n"
                f"  API token    {tokens} (the first admin token of an empty store)\n"
                f"  watch        flowlane top --api {api}\n"
                f"  pids         {pids}\n"
                "A child that dies is started again. Ctrl-C stops everything.",
                highlight=False,
            )
            stack.supervise()
        except _StoppedError:
            pass
        except StackError as exc:
            err.print(f"[bold red]flowlane up:[/] {escape(str(exc))}", soft_wrap=True)
            stack.stop()
            raise typer.Exit(1) from None
        finally:
            stack.stop()
    out.print("flowlane stopped")
