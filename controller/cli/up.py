"""``flowlane up``: the whole stack on one machine (Redis, controller, API), kept running.

Each part is its own process, as in production.  This command starts them in
order, waits until each is ready and prints where they listen.  From then on
it supervises them: a child that dies is started again after a back-off that
grows while it keeps dying (``controller.cli.supervise`` decides), and every
death is logged with its exit status.  The others ride it out: switches keep
their flows, and the controller and the API reconnect to a restarted Redis
by themselves, which is why Redis comes back on the same port.  Ctrl-C or
SIGTERM stops them all by PID: the API and the controller together, then Redis.

Start-up fails fast and says why in one line, before any banner: a policy
file that does not validate, a port another process listens on (and which
process), a child that dies while starting (it is not restarted: whatever
stopped it would stop it again).  "flowlane is up" is printed only once each
printed port is held by the very child that was started for it (its socket's
inode is among that child's descriptors), the controller it started beats in
Redis, and the API it started reports that controller: another stack
answering on the same ports cannot pass for this one.

The private Redis keeps its data (append-only file, fsync every second, plus
RDB snapshots) in a data directory, so policy versions, jobs and events
survive a restart of Redis and of ``flowlane up``; ``--ephemeral`` runs it
from a temporary directory with persistence off, for tests and demos.

``--policy FILE`` makes FILE the active policy version (written through the
policy store's compare-and-set, like any other writer; the same document
adds no version), unless ``--keep-stored-policy``; without ``--policy`` the
stored policy stays, and an empty store gets the shipped default.
"""

from __future__ import annotations

import contextlib
import enum
import errno
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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Annotated, Any
from urllib.parse import urlsplit

import httpx
import redis
import typer
from rich.markup import escape
from rich.text import Text

from controller.api.settings import MAX_BODY_BYTES
from controller.auth.files import (
    TOKEN_FILE_ENV,
    default_token_file,
    read_token_file,
    store_token_file,
    write_secret_file,
)
from controller.auth.redact import redact
from controller.cli.api import tls_options
from controller.cli.controller import ofp_tls
from controller.cli.credentials import (
    REDIS_URL_FILE_ENV,
    redis_url_from_file,
    redis_url_warning,
    token_ttl_seconds,
)
from controller.cli.ports import bind_error, holders_text, listens_on, port_holders
from controller.cli.render import LogFormatOption, err, out
from controller.cli.supervise import StartFailedError, Supervisor
from controller.logs import LogFormat
from controller.policy.errors import PolicyError
from controller.policy.load import default_policy_path, load_policy_document
from controller.store.client import connect
from controller.store.errors import StoreUnavailableError, VersionConflictError
from controller.store.liveness import CONTROLLER_MAX_AGE_S
from controller.store.policies import HISTORY_LIMIT, PolicyStore
from controller.store.switches import SwitchStore
from controller.store.tokens import TokenStore
from controller.store.url import parse_store_url

DATA_DIR_ENV = "FLOWLANE_DATA_DIR"
LOCK_FILE = "flowlane.lock"
REDIS_LOG = "redis.log"
REDIS_AUTH_CONF = "redis-auth.conf"
"""The private Redis's password (0600), written afresh by every ``flowlane up``."""
REDIS_URL_ENV = "FLOWLANE_REDIS_URL"
POLICY_AUTHOR = "flowlane up"
"""The author of the versions ``flowlane up --policy FILE`` writes (``flowlane policy history``)."""
READY_TIMEOUT_S = 60.0
TOKEN_WAIT_S = 5.0
"""How long the banner waits for the API to write the first admin token of an empty store."""
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


class PolicyAction(enum.Enum):
    """What ``flowlane up`` does with its policy file, given the store."""

    FIRST = "first"
    """The store has no policy: the file becomes its first version."""
    REPLACE = "replace"
    """``--policy FILE`` on a store with a policy: FILE becomes the next version (the
    store adds none when the document is the active one)."""
    KEEP = "keep"
    """The stored policy stays active: no ``--policy``, or ``--keep-stored-policy``."""


def policy_action(given: bool, keep_stored: bool, stored: int | None) -> PolicyAction:
    """``given``: the operator named a file (not the shipped default); ``stored``: the
    store's active version.  An operator's stored policy is never replaced by the default
    (``make run`` without ``POLICY=``), and a file named on the command line is never
    silently ignored."""
    if stored is None:
        return PolicyAction.FIRST
    if given and not keep_stored:
        return PolicyAction.REPLACE
    return PolicyAction.KEEP


def policy_banner(
    action: PolicyAction,
    path: Path,
    version: int,
    previous: int | None,
    unchanged: bool,
    keep_stored: bool,
) -> str:
    """The banner's policy line: the active version and where it came from."""
    if action is PolicyAction.FIRST:
        return f"version {version} from {path} (the store had none)"
    if action is PolicyAction.REPLACE:
        if unchanged:
            return f"version {version}, already in the store: the same as {path}"
        return (
            f"version {version} from {path} (author {POLICY_AUTHOR}), replacing version {previous}"
        )
    if keep_stored:
        return f"version {version}, stored earlier ({path} not applied: --keep-stored-policy)"
    return f"version {version}, stored earlier (--policy FILE makes a file the active version)"


class TokenState(enum.Enum):
    VALID = "valid"
    """The token file holds a token the store accepts."""
    REFUSED = "refused"
    """The token file holds a token the store does not know (revoked, expired, another store's)."""
    MISSING = "missing"
    """No token file (or an empty one)."""


def token_banner(path: Path, had_tokens: bool, state: TokenState) -> str:
    """The banner's token line, saying where the token came from: only an empty store
    gets a new admin token; a store with tokens leaves the file as it was."""
    if state is TokenState.VALID:
        if had_tokens:
            return f"{path} (written by an earlier start; this store accepts it)"
        return f"{path} (a new admin token: the store had none)"
    if state is TokenState.REFUSED:
        return (
            f"{path} holds a token this store refuses (revoked, expired or another store's);"
            " an admin makes a new one: flowlane token create NAME --role admin"
        )
    if had_tokens:
        return (
            f"none in {path}: the store already has tokens, so none was made;"
            " an admin makes one: flowlane token create NAME --role admin"
        )
    return f"none in {path} yet: the API has not written the first admin token"


def cli_command(on_path: str | None, ours: Path | None, python: str) -> tuple[str, str | None]:
    """How to run this installation's CLI, and a line saying how to put it on ``PATH``.

    ``on_path``: what ``shutil.which("flowlane")`` found; ``ours``: the ``flowlane`` next to
    this interpreter (None when there is none, e.g. a source tree run with ``-m``).  The
    banner's commands must work as pasted, so a ``flowlane`` that is missing from
    ``PATH``, or is another installation, is replaced by the absolute path.
    """
    if ours is None:
        return ("flowlane", None) if on_path else (f"{python} -m controller", None)
    if on_path is not None and Path(on_path).resolve() == ours.resolve():
        return "flowlane", None
    export = f'export PATH="{ours.parent}:$PATH"'
    if on_path is None:
        return str(ours), f"flowlane is not on PATH; {export}"
    return str(ours), f"the flowlane on PATH is {on_path}, not this one; {export}"


def first_policy_error(path: Path, error: PolicyError) -> str:
    """One line for an invalid policy file: the file, its first error, how to see the rest."""
    first = error.errors[0] if error.errors else "invalid"
    more = len(error.errors) - 1
    rest = f" (and {more} more: flowlane policy validate {path})" if more > 0 else ""
    return f"policy {path} is invalid: {first}{rest}"


# ---- the shell ------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def without_password(url: str) -> str:
    """``url`` fit to print: a password in it is replaced by ``***`` (one helper for every
    message, ``controller.auth.redact``)."""
    return redact(url)


def write_redis_password(directory: Path) -> tuple[Path, str]:
    """A fresh random password for the private Redis, in a config file only its owner reads.

    It never appears in a command line (``ps`` shows those to every user): Redis
    reads it from the file, the controller and the API from their environment.
    """
    password = secrets.token_urlsafe(24)
    config = directory / REDIS_AUTH_CONF
    write_secret_file(config, f"requirepass {password}\n".encode())
    return config, password


def _redis_ready(url: str) -> Callable[[], bool]:
    def check() -> bool:
        try:
            # Every store URL (redis+sentinel:// too), asked once: the caller polls.
            with contextlib.closing(connect(url, retry_s=0)) as client:
                return bool(client.ping())
        except redis.RedisError:
            return False

    return check


def _api_ready(url: str, controller_id: str, mutual_tls: bool = False) -> Callable[[], bool]:
    """Whether the API at ``url`` is ready and counts ``controller_id`` among its controllers:
    an API that answers but reads another Redis (another stack's) never lists it.  Our own
    child's certificate is not checked (it may be for a name other than the probe's
    address); an API that requires client certificates, which this probe has none of,
    counts once it accepts connections (its socket's owner is checked apart)."""
    parts = urlsplit(url)

    def check() -> bool:
        if mutual_tls:
            try:
                with socket.create_connection((parts.hostname, parts.port), timeout=0.5):
                    return True
            except OSError:
                return False
        try:
            answer = httpx.get(url, timeout=0.5, verify=False)
            return answer.status_code == 200 and controller_id in answer.json()["controllers"]
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            return False

    return check


def _beats(client: redis.Redis, controller_id: str) -> Callable[[], bool]:
    """Whether the controller we started has a live heartbeat in our Redis."""
    switches = SwitchStore(client)

    def check() -> bool:
        try:
            return controller_id in switches.live_controllers(CONTROLLER_MAX_AGE_S)
        except (StoreUnavailableError, redis.RedisError):
            return False

    return check


Port = tuple[str, str, int]
"""(option, listen address, port) of a port a child listens on, e.g. ("--api-port", ...)."""


def port_problems(ports: list[Port]) -> list[str]:
    """Why each port cannot be listened on now, naming what holds a port in use."""
    problems = []
    for option, host, port in ports:
        error = bind_error(host, port)
        if error is None:
            continue
        if error.errno == errno.EADDRINUSE:
            problems.append(holders_text(port, option, port_holders(port)))
        else:
            problems.append(f"{option} {port} on {host}: {error.strerror or error}")
    return problems


def _refuse_busy_ports(ports: list[Port]) -> None:
    busy = port_problems(ports)
    if busy:
        raise StackError("; ".join(busy))


def _token_state(tokens: TokenStore, path: Path) -> TokenState:
    try:
        secret = read_token_file(path)
    except OSError:
        return TokenState.MISSING
    if secret is None:
        return TokenState.MISSING
    try:
        return TokenState.VALID if tokens.authenticate(secret) is not None else TokenState.REFUSED
    except StoreUnavailableError:
        return TokenState.REFUSED


def _settle_policy(
    client: redis.Redis,
    path: Path,
    document: dict[str, Any],
    given: bool,
    keep_stored: bool,
    history_limit: int,
) -> str:
    """Make the policy file the active version if it should be (``policy_action``), through
    the store's compare-and-set write, before the controller starts: the controller then
    starts on it.  Returns the banner's policy line."""
    store = PolicyStore(client, history_limit=history_limit)
    stored = store.active_version()
    action = policy_action(given, keep_stored, stored)
    if action is PolicyAction.KEEP:
        assert stored is not None
        return policy_banner(action, path, stored, None, unchanged=True, keep_stored=keep_stored)
    comment = f"initial policy from {path}" if stored is None else f"flowlane up --policy {path}"
    try:
        written = store.write(
            document, author=POLICY_AUTHOR, comment=comment, expected_version=stored
        )
    except VersionConflictError as exc:
        raise StackError(
            f"the active policy changed from version {exc.expected} to {exc.active} while"
            f" flowlane up was storing {path}; start it again"
        ) from None
    return policy_banner(
        action, path, written.policy.version, stored, written.unchanged, keep_stored
    )


def _say(message: str, error: bool = False) -> None:
    """A timestamped line: a restart is read next to the children's own logs."""
    console = err if error else out
    console.print(
        f"{time.strftime('%H:%M:%S')} flowlane up: {message}",
        highlight=False,
        markup=False,
        soft_wrap=True,  # one line per event, whatever the width: logs are grepped
    )


def child_env(parent: Mapping[str, str], own: Mapping[str, str]) -> dict[str, str]:
    """A child's environment: the parent's, then the child's own settings.

    ``up`` hands its children the Redis it chose as ``$FLOWLANE_REDIS_URL``; a
    ``$FLOWLANE_REDIS_URL_FILE`` inherited beside it would win in the child (a file beats a
    URL there) and point the controller and the API at another Redis than ``up``'s.
    """
    inherited = {k: v for k, v in parent.items() if k != REDIS_URL_FILE_ENV}
    return {**inherited, **own}


@dataclass
class _Child:
    name: str
    args: list[str]
    quiet: bool = False
    pass_fds: tuple[int, ...] = ()
    stop_timeout_s: float = 10.0
    env: dict[str, str] | None = None
    """Extra environment (the Redis URL with its password: never in the command line)."""
    ports: tuple[Port, ...] = ()
    """Every port this child listens on: it is up only once it holds each of them."""
    process: subprocess.Popen[bytes] | None = None
    stops_last: bool = False
    """Stopped once every other child has exited: the private Redis, which the controller
    still writes to as it stops (it removes its heartbeat)."""

    def start(self) -> subprocess.Popen[bytes]:
        self.process = subprocess.Popen(
            self.args,
            stdout=subprocess.DEVNULL if self.quiet else None,
            pass_fds=self.pass_fds,
            env=child_env(os.environ, self.env) if self.env else None,
        )
        return self.process

    def listens(self, port: int) -> Callable[[], bool]:
        """Whether this very process holds the listening socket on ``port`` (where /proc
        cannot tell, the other checks decide)."""

        def check() -> bool:
            process = self.process
            return process is not None and listens_on(process.pid, port) is not False

        return check

    def stop(self) -> None:
        self.terminate()
        self.wait_stopped()

    def terminate(self) -> None:
        """SIGTERM, if it runs: ``wait_stopped`` then waits for it to exit."""
        process = self.process
        if process is not None and process.poll() is None:
            process.terminate()

    def wait_stopped(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        try:
            process.wait(self.stop_timeout_s)
        except subprocess.TimeoutExpired:
            _say(f"{self.name} (pid {process.pid}) ignored SIGTERM; killing it", error=True)
            process.kill()
            process.wait(5)


Check = tuple[str, Callable[[], bool]]
"""What is awaited, as the timeout names it, and whether it holds now."""


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

    def check_children(self) -> None:
        """During start-up, any child found dead stops the start (``StartFailedError``):
        it is not restarted, and the line says what stopped it when a port explains it."""
        for child in self.children:
            process = child.process
            if process is None or process.poll() is None:
                continue
            try:
                self.supervisor.exited(child.name, process.returncode, process.pid)
            except StartFailedError as exc:
                busy = port_problems(list(child.ports))
                cause = f": {'; '.join(busy)}" if busy else " (its own output above says why)"
                raise StackError(f"{exc}{cause}") from None

    def wait(self, checks: list[Check], timeout_s: float) -> None:
        """Until every check holds, every child alive; a check that held is not asked again."""
        deadline = time.monotonic() + timeout_s
        pending = list(checks)
        while True:
            if self.stopping:
                raise _StoppedError
            self.check_children()
            pending = [(what, ready) for what, ready in pending if not ready()]
            if not pending:
                self.check_children()  # none died while the last check ran
                return
            if time.monotonic() >= deadline:
                waited = ", ".join(what for what, _ in pending)
                raise StackError(f"not ready after {timeout_s:g} s: {waited}")
            time.sleep(_POLL_S)

    def stop(self) -> None:
        """The API and the controller together, then Redis (the controller removes its
        heartbeat from Redis as it stops).  Neither of the first two needs the other to
        stop, and each takes a few tenths of a second: one after the other, they took
        twice as long."""
        first = [child for child in reversed(self.children) if not child.stops_last]
        for child in first:
            child.terminate()
        for child in first:
            child.wait_stopped()
        for child in reversed(self.children):
            if child.stops_last:
                child.stop()

    def supervise(self) -> None:
        """Until Ctrl-C/SIGTERM: report each death, start each child whose back-off is over."""
        supervisor = self.supervisor
        supervisor.settled()
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
            help="Policy YAML to make the active version (the store adds none when it is the"
            " active one already) [default: keep the stored policy; an empty store gets the"
            " shipped default, flowlane policy default prints it]",
            show_default=False,
        ),
    ] = None,
    keep_stored_policy: Annotated[
        bool,
        typer.Option(
            help="With --policy: keep the store's active policy if it has one (FILE is then"
            " only checked, and used on an empty store)"
        ),
    ] = False,
    redis_url: Annotated[
        str | None,
        typer.Option(
            help="Use this Redis instead of starting a private one (one with a password:"
            " --redis-url-file, so ps does not show it)"
        ),
    ] = None,
    redis_url_file: Annotated[
        Path | None,
        typer.Option(
            envvar=REDIS_URL_FILE_ENV,
            help="A file (0600) holding the URL of the Redis to use, password and all",
        ),
    ] = None,
    token_ttl: Annotated[
        str | None,
        typer.Option(
            help="The first admin token of an empty store expires this long after it is made"
            " (30d, 12h; flowlane api --token-ttl) [default: never]",
            show_default=False,
        ),
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
    ofp_bind_dpid: Annotated[
        bool,
        typer.Option(help="Serve a switch only under the datapath id its certificate names"),
    ] = False,
    log_format: LogFormatOption = LogFormat.text,
    access_log: Annotated[bool, typer.Option(help="Log every API request")] = False,
) -> None:
    """Start Redis (unless --redis-url), the controller and the API; restart any that dies;
    stop them all on Ctrl-C. Exits 1, saying why in one line, if any of them cannot start."""
    warning = redis_url_warning(redis_url, from_command_line=True)
    if warning is not None:
        err.print(warning, markup=False, highlight=False)
    try:
        if redis_url_file is not None:
            redis_url = redis_url_from_file(redis_url_file)
        if redis_url is not None:
            parse_store_url(redis_url)  # a bad URL (redis+sentinel:// too) names its wrong part
        token_ttl_seconds(token_ttl)  # checked before anything starts; the API applies it
    except ValueError as exc:
        err.print(f"[bold red]flowlane up:[/] {escape(str(exc))}")
        raise typer.Exit(2) from None
    if redis_url is not None and ephemeral:
        err.print(
            "[bold red]flowlane up:[/] --ephemeral is for the private Redis; drop --redis-url"
        )
        raise typer.Exit(2)
    policy_given = policy is not None
    policy = (policy if policy is not None else default_policy_path()).absolute()
    api_tls = tls_options(tls_cert, tls_key, tls_client_ca)
    switch_tls = ofp_tls(ofp_tls_cert, ofp_tls_key, ofp_ca)
    if ofp_bind_dpid and switch_tls is None:
        err.print(
            "[bold red]flowlane up:[/] --ofp-bind-dpid needs --ofp-tls-cert, --ofp-tls-key"
            " and --ofp-ca: over plain TCP a switch presents no certificate to bind"
        )
        raise typer.Exit(2)
    stack = _Stack()
    signal.signal(signal.SIGTERM, stack.on_signal)
    signal.signal(signal.SIGINT, stack.on_signal)
    flowlane = [sys.executable, "-m", "controller"]
    api_port_spec: Port = ("--api-port", api_host, api_port)
    controller_ports: tuple[Port, ...] = (("--ofp-port", ofp_host, ofp_port),)
    if metrics_port:
        controller_ports += (("--metrics-port", "127.0.0.1", metrics_port),)
    with contextlib.ExitStack() as resources:
        try:
            # Everything that can be known before a child starts is checked first, so a
            # mistake costs one line and no start-up: the policy, the data directory's
            # lock (another stack on it is named as such), then the ports.
            try:
                _, document = load_policy_document(policy)
            except PolicyError as exc:
                raise StackError(first_policy_error(policy, exc)) from None
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
                _refuse_busy_ports([api_port_spec, *controller_ports])
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
                    stops_last=True,
                    ports=(("the private Redis's port", "127.0.0.1", redis_port),),
                )
                stack.start(redis_child)
                try:
                    stack.wait(
                        [
                            (f"redis-server on 127.0.0.1:{redis_port}", _redis_ready(redis_url)),
                            (
                                f"redis-server holding 127.0.0.1:{redis_port}",
                                redis_child.listens(redis_port),
                            ),
                        ],
                        30,
                    )
                except StackError as exc:
                    raise StackError(f"{exc}{_redis_log_tail(directory)}") from None
            else:
                _refuse_busy_ports([api_port_spec, *controller_ports])
                if not _redis_ready(redis_url)():
                    raise StackError(f"Redis at {shown_url} does not answer")
            client = resources.enter_context(contextlib.closing(connect(redis_url)))
            # An ephemeral store's token lives and dies with it, beside its Redis files: it
            # never takes the place of a persistent stack's token in ~/.config/flowlane.
            tokens = token_file or (
                directory / "token" if ephemeral else default_token_file(os.environ, Path.home())
            )
            token_store = TokenStore(client)
            try:
                policy_line = _settle_policy(
                    client, policy, document, policy_given, keep_stored_policy, history_limit
                )
                had_tokens = bool(token_store.all())
            except StoreUnavailableError as exc:
                raise StackError(f"Redis at {shown_url}: {exc}") from None
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
                controller_args += ["--ofp-bind-dpid"] if ofp_bind_dpid else []
            controller_child = _Child(
                "controller",
                [*flowlane, "controller", *controller_args],
                env=secret_env,
                ports=controller_ports,
            )
            controller_process = stack.start(controller_child)
            controller_id = f"{socket.gethostname()}:{controller_process.pid}"
            api_args = ["--host", api_host, "--port", str(api_port)]
            api_args += ["--history-limit", str(history_limit)]
            api_args += ["--token-file", str(tokens), "--max-body", str(max_body)]
            api_args += ["--token-ttl", token_ttl] if token_ttl is not None else []
            api_args += ["--log-format", log_format.value]
            api_args += ["--access-log"] if access_log else []
            for option, path in (
                ("--tls-cert", tls_cert),
                ("--tls-key", tls_key),
                ("--tls-client-ca", tls_client_ca),
            ):
                api_args += [option, str(path)] if path is not None else []
            api_child = _Child(
                "api", [*flowlane, "api", *api_args], env=secret_env, ports=(api_port_spec,)
            )
            stack.start(api_child)
            api = f"{'https' if api_tls else 'http'}://{api_host}:{api_port}"
            checks: list[Check] = [
                (f"the controller on {option} {port}", controller_child.listens(port))
                for option, _, port in controller_ports
            ]
            checks += [
                (f"a heartbeat of controller {controller_id}", _beats(client, controller_id)),
                (f"the API on --api-port {api_port}", api_child.listens(api_port)),
                (
                    f"{api}/readyz listing controller {controller_id}",
                    _api_ready(f"{api}/readyz", controller_id, tls_client_ca is not None),
                ),
            ]
            stack.wait(checks, READY_TIMEOUT_S)
            token_deadline = time.monotonic() + (0.0 if had_tokens else TOKEN_WAIT_S)
            while True:  # an empty store's token is written by the API as it starts
                state = _token_state(token_store, tokens)
                if state is not TokenState.VALID and not had_tokens:
                    # The API leaves a file holding another store's token as it is and
                    # writes this store's to a file of its own (controller/api/bootstrap.py).
                    own = store_token_file(tokens, token_store.store_id())
                    if _token_state(token_store, own) is TokenState.VALID:
                        tokens, state = own, TokenState.VALID
                if state is TokenState.VALID or time.monotonic() >= token_deadline:
                    break
                if stack.stopping:
                    raise _StoppedError
                time.sleep(_POLL_S)
            cli, path_hint = cli_command(shutil.which("flowlane"), _installed_cli(), sys.executable)
            metrics = f"http://127.0.0.1:{metrics_port}/metrics" if metrics_port else "off"
            pids = ", ".join(
                f"{child.name} {child.process.pid}" for child in stack.children if child.process
            )
            lines = [
                ("REST API", f"{api}  (docs: {api}/docs)"),
                ("OpenFlow", f"{'ssl' if switch_tls else 'tcp'}:{ofp_host}:{ofp_port}"),
                ("metrics", metrics),
                ("Redis", str(shown_url)),
                ("Redis data", storage),
                ("policy", policy_line),
                ("API token", token_banner(tokens, had_tokens, state)),
                ("watch", f"{cli} top --api {api}"),
                *([("PATH", path_hint)] if path_hint else []),
                ("pids", pids),
            ]
            # One print, so that whoever waits for "flowlane is up" (a script, a test
            # reading the log) finds the banner with it, never the title alone.
            out.print(
                Text("flowlane is up\n", style="bold green")
                + Text(  # paths and URLs as they are: no markup, no highlighting
                    "".join(f"  {name:<12} {text}\n" for name, text in lines)
                    + "A child that dies is started again. Ctrl-C stops everything."
                ),
                highlight=False,
                soft_wrap=True,  # one line each, whatever the width: the lines are pasted
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


def _installed_cli() -> Path | None:
    """The ``flowlane`` script installed next to this interpreter (a venv's ``bin``)."""
    script = Path(sys.executable).parent / "flowlane"
    return script if script.is_file() else None
