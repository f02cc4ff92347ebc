"""``flowlane up`` keeps its stack running and its data; the controller stops cleanly.

No Open vSwitch is needed: the controller listens with no switch connected,
or with a scripted OpenFlow 1.3 peer that answers the handshake, the
multipart requests and the barriers (a switch with an empty flow table that
accepts every flow mod).  Every process is started with its own session and
stopped by PID; the tests look for leftovers by session id.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import yaml
from flowlane_bench.harness import free_port, wait_for
from redis.backoff import NoBackoff
from redis.retry import Retry
from typer.testing import CliRunner

from controller.cli.main import app
from controller.cli.supervise import Backoff, Supervisor
from controller.cli.up import (
    LOCK_FILE,
    PolicyAction,
    StackError,
    TokenState,
    _Child,
    _Stack,
    child_env,
    cli_command,
    default_data_dir,
    first_policy_error,
    open_data_dir,
    policy_action,
    policy_banner,
    redis_args,
    token_banner,
    without_password,
    write_redis_password,
)
from controller.policy.errors import FieldError, PolicyError
from controller.store.client import connect
from controller.store.switches import SwitchStore
from tests.support.openflow_peer import ScriptedSwitch
from tests.support.processes import pid_alive, session_members, stat_fields, stop_session
from tests.support.up_stack import banner, start_up

REPO = Path(__file__).resolve().parents[2]
POLICY = """
classes:
  inference: {priority: 0, dscp: 46, min_rate: 20%}
  training:  {priority: 1, dscp: 26, min_rate: 80%}
default_class: inference
rules:
  - {name: iperf, match: {tcp_dst: 5201}, class: training}
ports: {rate: 1Gbit}
"""


def children(pid: int) -> dict[str, int]:
    """Live children of ``pid`` by role: redis-server, controller or api."""
    found: dict[str, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = stat_fields(int(entry.name))
        if fields is None or fields[0] == "Z" or int(fields[1]) != pid:
            continue
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if b"redis-server" in argv[0]:
                found["redis-server"] = int(entry.name)
            elif b"controller" in argv[3:4] or b"api" in argv[3:4]:
                found[argv[3].decode()] = int(entry.name)
    return found


# ---- pure pieces ----------------------------------------------------------------------------


def test_the_data_directory_is_the_systems_for_root_and_the_users_otherwise() -> None:
    assert default_data_dir(0, Path("/root")) == Path("/var/lib/flowlane")
    assert default_data_dir(1000, Path("/home/ana")) == Path("/home/ana/.local/share/flowlane")


def test_the_private_redis_password_stays_out_of_command_lines(tmp_path: Path) -> None:
    config, password = write_redis_password(tmp_path)
    assert config.stat().st_mode & 0o777 == 0o600
    assert config.read_text() == f"requirepass {password}\n"
    assert len(password) >= 32
    args = redis_args(7000, tmp_path, persistent=True, config=config)
    assert args[0] == str(config) and password not in " ".join(args)
    again, other = write_redis_password(tmp_path)  # a new one per flowlane up
    assert again == config and other != password


def test_urls_are_printed_without_their_password() -> None:
    assert without_password("redis://:s3cret@10.0.0.5:6380/1") == "redis://:***@10.0.0.5:6380/1"
    assert without_password("rediss://app:pw@db/0") == "rediss://app:***@db/0"
    assert without_password("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"


def test_the_private_redis_persists_unless_ephemeral(tmp_path: Path) -> None:
    persistent = redis_args(7000, tmp_path, persistent=True)
    assert persistent[:6] == ["--port", "7000", "--bind", "127.0.0.1", "--dir", str(tmp_path)]
    assert persistent[persistent.index("--appendonly") + 1] == "yes"
    assert persistent[persistent.index("--appendfsync") + 1] == "everysec"
    assert "--save" not in persistent  # Redis's default snapshots stay on
    ephemeral = redis_args(7000, tmp_path, persistent=False)
    assert ephemeral[ephemeral.index("--appendonly") + 1] == "no"
    assert ephemeral[ephemeral.index("--save") + 1] == ""


def test_the_data_directory_is_private_and_held_by_one_stack(tmp_path: Path) -> None:
    directory = tmp_path / "a" / "data"
    with open_data_dir(directory) as lock:
        assert (directory.stat().st_mode & 0o777) == 0o700
        assert (directory / LOCK_FILE).read_text() == f"{os.getpid()}\n"
        assert os.get_inheritable(lock) is False  # only the redis-server child gets it
        with pytest.raises(StackError, match="is in use by another flowlane up"):  # noqa: SIM117
            with open_data_dir(directory):
                pass
    with open_data_dir(directory):  # released with the stack
        pass


def test_a_data_directory_that_is_a_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "data"
    path.write_text("")
    with pytest.raises(StackError, match=f"--data-dir {path}: exists and is not a directory"):  # noqa: SIM117
        with open_data_dir(path):
            pass


def test_ephemeral_with_an_external_redis_is_a_usage_error() -> None:
    result = CliRunner().invoke(app, ["up", "--ephemeral", "--redis-url", "redis://x:1/0"])
    assert result.exit_code == 2
    assert "--ephemeral is for the private Redis" in result.output


# ---- the controller process ----------------------------------------------------------------


@contextlib.contextmanager
def controller_process(
    tmp_path: Path, redis_url: str
) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    log = tmp_path / "controller.log"
    ofp_port = free_port()
    args = ["--policy", str(policy), "--ofp-port", str(ofp_port), "--metrics-port", "0"]
    args += ["--redis-url", redis_url, "--no-qos", "--audit-interval", "0.5"]
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "controller", "controller", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            start_new_session=True,
        )
    try:
        wait_for(
            "the controller to listen",
            lambda: process.poll() is not None or "listening for OpenFlow" in log.read_text(),
            30,
        )
        assert process.poll() is None, log.read_text()
        yield process, ofp_port, log
    finally:
        stop_session(process)


def sigterm_exit(process: subprocess.Popen[bytes]) -> tuple[int | None, float]:
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        code = process.wait(5)
    except subprocess.TimeoutExpired:
        code = None
    return code, time.monotonic() - started


def problems(log: Path) -> list[str]:
    return [
        line
        for line in log.read_text().splitlines()
        if " ERROR " in line or "Traceback" in line or "uncaught exception" in line
    ]


def test_the_controller_stops_on_sigterm_with_status_0_and_leaves_nothing(
    tmp_path: Path, start_redis: Callable[[int | None], object]
) -> None:
    server = start_redis(None)
    url: str = server.url  # type: ignore[attr-defined]
    switches = SwitchStore(connect(url))
    with controller_process(tmp_path, url) as (process, _, log):
        controller_id = f"{socket.gethostname()}:{process.pid}"
        wait_for("a heartbeat", lambda: controller_id in switches.live_controllers(10), 10)
        code, took = sigterm_exit(process)
        assert code == 0, log.read_text()
        assert took < 2.0, f"stopping took {took:.2f} s"
        assert session_members(process.pid) == []
        assert controller_id not in switches.live_controllers(60)
        assert problems(log) == []


def test_the_controller_hangs_up_its_switches_and_stops_within_2_s(
    tmp_path: Path, start_redis: Callable[[int | None], object]
) -> None:
    server = start_redis(None)
    url: str = server.url  # type: ignore[attr-defined]
    switches = SwitchStore(connect(url))
    with controller_process(tmp_path, url) as (process, ofp_port, log):
        first, second = (
            ScriptedSwitch.connect(ofp_port, 0xA1),
            ScriptedSwitch.connect(ofp_port, 0xA2),
        )
        try:
            wait_for(
                "both switches reported",
                lambda: {r.dpid for r in switches.live_reports(10)} == {0xA1, 0xA2},
                15,
            )
            code, took = sigterm_exit(process)
            assert code == 0, log.read_text()
            assert took < 2.0, f"stopping took {took:.2f} s"
            assert first.hung_up.wait(1) and second.hung_up.wait(1)
            assert session_members(process.pid) == []
            assert switches.all() == []  # a clean stop takes its switches' reports along
            assert switches.live_controllers(60) == []
            assert problems(log) == []
        finally:
            first.close()
            second.close()


def test_a_switch_that_hangs_up_is_noticed_at_once(
    tmp_path: Path, start_redis: Callable[[int | None], object]
) -> None:
    """os-ken's native hub used to notice only when the next request went out."""
    server = start_redis(None)
    url: str = server.url  # type: ignore[attr-defined]
    switches = SwitchStore(connect(url))
    with controller_process(tmp_path, url) as (process, ofp_port, log):
        switch = ScriptedSwitch.connect(ofp_port, 0xB1)
        wait_for("the switch reported", lambda: switches.all() != [], 15)
        switch.close()
        wait_for("the switch forgotten", lambda: switches.all() == [], 2)
        assert "switch 00000000000000b1 disconnected" in log.read_text()
        code, _ = sigterm_exit(process)
        assert code == 0


# ---- flowlane up -----------------------------------------------------------------------------


def test_up_restarts_dead_children_and_keeps_its_data(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    data = tmp_path / "data"
    api_port = free_port()
    api = f"http://127.0.0.1:{api_port}"
    log = tmp_path / "up.log"
    args = ["--policy", str(policy), "--data-dir", str(data), "--api-port", str(api_port)]
    args += ["--ofp-port", str(free_port()), "--metrics-port", "0"]
    token_file = tmp_path / "token"
    args += ["--token-file", str(token_file)]
    process = start_up(log, args, timeout_s=60)
    seen: set[int] = set()
    try:
        assert "API token" in log.read_text()
        wait_for("the bootstrap admin token", token_file.exists, 10)
        auth = {"Authorization": f"Bearer {token_file.read_text().strip()}"}
        first = children(process.pid)
        assert set(first) == {"redis-server", "controller", "api"}
        # The private Redis wants its password, which no command line shows.
        password = (data / "redis-auth.conf").read_text().split()[1]
        for pid in first.values():
            assert password not in Path(f"/proc/{pid}/cmdline").read_text()
        match = re.search(r"Redis +redis://127\.0\.0\.1:(\d+)/0", log.read_text())
        assert match is not None, log.read_text()
        # Asked once: redis-py's default retries of the refused HELLO took 3 s.
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=int(match[1]), socket_timeout=2, retry=Retry(NoBackoff(), 0)).ping()
        seen.update(first.values())

        # A second stack on the same data directory is refused: one writer per AOF.
        other = subprocess.run(
            [sys.executable, "-m", "controller", "up", "--data-dir", str(data)],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=30,
        )
        assert other.returncode == 1
        assert "is in use by another flowlane up" in other.stderr

        # The controller is killed: it is started again and beats again.
        os.kill(first["controller"], signal.SIGKILL)

        def new_controller_ready() -> bool:
            now = children(process.pid)
            seen.update(now.values())
            pid = now.get("controller")
            if pid is None or pid == first["controller"]:
                return False
            ready = httpx.get(f"{api}/readyz", timeout=1)
            return ready.status_code == 200 and any(
                c.endswith(f":{pid}") for c in ready.json()["controllers"]
            )

        wait_for("the controller restarted and ready", new_controller_ready, 20)
        assert f"controller (pid {first['controller']}) was killed by SIGKILL" in log.read_text()

        # A policy stored before Redis is killed is there once Redis is back.
        document = {**yaml.safe_load(POLICY), "default_class": "training"}
        stored = httpx.put(f"{api}/v1/policy", json=document, timeout=10, headers=auth)
        assert stored.status_code in (200, 201), stored.text
        version = stored.json()["version"]
        assert version == 2
        os.kill(first["redis-server"], signal.SIGKILL)

        def policy_back() -> bool:
            now = children(process.pid)
            seen.update(now.values())
            if now.get("redis-server") in (None, first["redis-server"]):
                return False
            try:
                # the token survives the Redis restart too: it is in the append-only file
                answer = httpx.get(f"{api}/v1/policy", timeout=1, headers=auth)
            except httpx.HTTPError:
                return False
            return answer.status_code == 200 and answer.json()["version"] == version

        wait_for("the policy back after the Redis restart", policy_back, 20)
        answer = httpx.get(f"{api}/v1/policy", timeout=5, headers=auth).json()
        assert answer["policy"]["default_class"] == "training"

        # SIGTERM stops every child, and the data directory is free again.
        seen.update(children(process.pid).values())
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, log.read_text()
        assert [pid for pid in seen if pid_alive(pid)] == []
        with (data / LOCK_FILE).open() as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert "flowlane stopped" in log.read_text()
    finally:
        stop_session(process, timeout_s=30)
        for pid in seen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# ---- the first hour: start-up fails fast and truthfully ------------------------------------


def test_the_policy_file_replaces_a_stored_policy_only_when_named() -> None:
    assert policy_action(given=False, keep_stored=False, stored=None) is PolicyAction.FIRST
    assert policy_action(given=True, keep_stored=True, stored=None) is PolicyAction.FIRST
    assert policy_action(given=True, keep_stored=False, stored=3) is PolicyAction.REPLACE
    assert policy_action(given=True, keep_stored=True, stored=3) is PolicyAction.KEEP
    # make run without POLICY=: the shipped default never replaces an operator's policy
    assert policy_action(given=False, keep_stored=False, stored=3) is PolicyAction.KEEP


def test_the_policy_line_says_which_version_runs_and_where_it_came_from() -> None:
    path = Path("/p/b.yaml")
    assert policy_banner(PolicyAction.FIRST, path, 1, None, False, False) == (
        "version 1 from /p/b.yaml (the store had none)"
    )
    assert policy_banner(PolicyAction.REPLACE, path, 5, 4, False, False) == (
        "version 5 from /p/b.yaml (author flowlane up), replacing version 4"
    )
    assert policy_banner(PolicyAction.REPLACE, path, 4, 4, True, False) == (
        "version 4, already in the store: the same as /p/b.yaml"
    )
    assert "--keep-stored-policy" in policy_banner(PolicyAction.KEEP, path, 4, None, True, True)
    assert "stored earlier" in policy_banner(PolicyAction.KEEP, path, 4, None, True, False)


def test_the_token_line_says_where_the_token_came_from() -> None:
    path = Path("/h/.config/flowlane/token")
    assert token_banner(path, had_tokens=False, state=TokenState.VALID) == (
        f"{path} (a new admin token: the store had none)"
    )
    assert token_banner(path, had_tokens=True, state=TokenState.VALID) == (
        f"{path} (written by an earlier start; this store accepts it)"
    )
    refused = token_banner(path, had_tokens=True, state=TokenState.REFUSED)
    assert refused.startswith(f"{path} holds a token this store refuses")
    missing = token_banner(path, had_tokens=True, state=TokenState.MISSING)
    assert missing.startswith(f"none in {path}: the store already has tokens")
    assert "first admin token of an empty store" not in refused + missing


def test_the_banner_names_a_cli_that_works_as_pasted(tmp_path: Path) -> None:
    ours = tmp_path / "venv" / "bin" / "flowlane"
    ours.parent.mkdir(parents=True)
    ours.write_text("")
    assert cli_command(str(ours), ours, "/py") == ("flowlane", None)
    command, hint = cli_command(None, ours, "/py")
    assert command == str(ours)
    assert hint == f'flowlane is not on PATH; export PATH="{ours.parent}:$PATH"'
    command, hint = cli_command("/usr/local/bin/flowlane", ours, "/py")
    assert command == str(ours) and hint is not None and "/usr/local/bin/flowlane" in hint
    assert cli_command(None, None, "/py") == ("/py -m controller", None)


def test_an_invalid_policy_is_one_line_naming_the_file_and_its_first_error() -> None:
    error = PolicyError([FieldError("classes.x.min_rate", "Field required")] * 3, "f")
    assert first_policy_error(Path("/p/bad.yaml"), error) == (
        "policy /p/bad.yaml is invalid: classes.x.min_rate: Field required"
        " (and 2 more: flowlane policy validate /p/bad.yaml)"
    )


def run_up(
    args: list[str], timeout_s: float = 60
) -> tuple[subprocess.CompletedProcess[str], float]:
    """``flowlane up`` expected to exit by itself: its result and how long it took."""
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "controller", "up", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop_session(process)
        stdout, stderr = process.communicate()
        raise AssertionError(
            f"flowlane up still running after {timeout_s:g} s:\n{stdout}{stderr}"
        ) from None
    finally:
        stop_session(process)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr), (
        time.monotonic() - started
    )


def flowlane_line(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("flowlane up:")]


def test_up_with_an_invalid_policy_exits_1_at_once_naming_the_file(tmp_path: Path) -> None:
    """It used to print the errors, then wait 60 s on a dead controller and a 503 /readyz."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(POLICY.replace("min_rate: 20%", "min_rat: 20%"))
    args = ["--ephemeral", "--policy", str(bad), "--api-port", str(free_port())]
    args += ["--ofp-port", str(free_port()), "--metrics-port", "0"]
    args += ["--token-file", str(tmp_path / "token")]
    done, took = run_up(args)
    assert done.returncode == 1, done.stdout + done.stderr
    assert took < 15, f"took {took:.1f} s"
    lines = flowlane_line(done.stderr)
    assert len(lines) == 1, done.stderr
    assert f"policy {bad} is invalid: classes.inference.min_rate" in lines[0]
    assert "flowlane is up" not in done.stdout


class ForeignStack:
    """Another stack's API on a port: answers every GET 200, /readyz ready with a controller."""

    def __init__(self) -> None:
        import http.server

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = b'{"status": "ready", "controllers": ["elsewhere:1"]}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port: int = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def test_up_on_another_stacks_port_exits_1_naming_the_port_and_its_holder(
    tmp_path: Path,
) -> None:
    """It used to print "flowlane is up" with the other stack's URL (its /readyz answered)."""
    foreign = ForeignStack()
    try:
        args = ["--ephemeral", "--policy", str(tmp_path / "p.yaml"), "--metrics-port", "0"]
        (tmp_path / "p.yaml").write_text(POLICY)
        args += ["--api-port", str(foreign.port), "--ofp-port", str(free_port())]
        args += ["--token-file", str(tmp_path / "token")]
        done, took = run_up(args)
    finally:
        foreign.close()
    assert done.returncode == 1, done.stdout + done.stderr
    assert "flowlane is up" not in done.stdout
    assert took < 15, f"took {took:.1f} s"
    lines = flowlane_line(done.stderr)
    assert len(lines) == 1, done.stderr
    assert f"port {foreign.port} (--api-port) is in use by pid {os.getpid()} (" in lines[0]
    assert "Traceback" not in done.stderr


def test_a_child_that_cannot_bind_its_port_is_a_start_failure_not_a_restart(
    tmp_path: Path,
) -> None:
    """The port is taken after the pre-flight check (a race): the child dies on it, the start
    stops with the port and its holder named, and the child is never started again."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        marker = tmp_path / "starts"
        code = (
            f"import socket; open({str(marker)!r}, 'a').write('x');"
            f" socket.socket().bind(('127.0.0.1', {port}))"
        )
        later = [0.0]  # seconds added to the supervisor's clock: the back-off, without a sleep
        stack = _Stack(Supervisor(clock=lambda: time.monotonic() + later[0]))
        child = _Child(
            "api", [sys.executable, "-c", code], ports=(("--api-port", "127.0.0.1", port),)
        )
        stack.start(child)
        try:
            with pytest.raises(StackError) as failure:
                stack.wait([("the API on --api-port", child.listens(port))], 30)
        finally:
            stack.stop()
        message = str(failure.value)
        assert message.startswith("api (pid ") and "exited with status 1 during start-up" in message
        assert f"port {port} (--api-port) is in use by pid {os.getpid()}" in message
        later[0] = 2 * Backoff().initial_s  # longer than the first back-off
        assert stack.supervisor.due() == []
        assert marker.read_text() == "x"  # started once, never again


def test_up_waits_for_its_own_child_on_the_port_not_any_listener(tmp_path: Path) -> None:
    """A listener that is not the child (the port is held by this test) never makes it ready."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        stack = _Stack()
        child = _Child("api", [sys.executable, "-c", "import time; time.sleep(30)"])
        stack.start(child)
        try:
            with pytest.raises(StackError, match=f"not ready after 1 s: the API on port {port}"):
                stack.wait([(f"the API on port {port}", child.listens(port))], 1)
        finally:
            stack.stop()
        assert child.process is not None and child.process.poll() is not None


def start_up_stack(
    tmp_path: Path, name: str, extra: list[str], env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], Path]:
    """``flowlane up`` on ``tmp_path/data``, run until its banner (asserted)."""
    log = tmp_path / f"{name}.log"
    args = ["--data-dir", str(tmp_path / "data"), "--api-port", str(free_port())]
    args += ["--ofp-port", str(free_port()), "--metrics-port", "0"]
    args += ["--token-file", str(tmp_path / "token"), *extra]
    return start_up(log, args, env, what=f"flowlane up ({name})"), log


def stop_up(process: subprocess.Popen[bytes], log: Path) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        assert process.wait(30) == 0, log.read_text()
    finally:
        stop_session(process, timeout_s=30)


Stored = tuple[dict[str, Any], list[int]]
"""The active policy as ``GET /v1/policy`` answers it, and the versions of its history."""


@dataclass(frozen=True)
class Restarts:
    """Five ``flowlane up`` on one data directory and token file, each stopped (status 0)
    before the next starts: their logs, and what the API said while two of them ran."""

    token: Path
    first_policy: Path
    second_policy: Path
    logs: dict[str, Path]
    """Start name ("first" to "fifth") → that stack's log."""
    stored: dict[str, Stored]
    """What the second and the fifth stack served."""
    venv_bin: str
    """The venv's ``bin``, taken off every stack's ``PATH``."""


@pytest.fixture(scope="class")
def restarts(tmp_path_factory: pytest.TempPathFactory) -> Restarts:
    tmp_path = tmp_path_factory.mktemp("restarts")
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(POLICY)
    second.write_text(yaml.safe_dump({**yaml.safe_load(POLICY), "default_class": "training"}))
    # `make run` does not put the venv on PATH: the banner used to say bare `flowlane`.
    venv_bin = str(Path(sys.executable).parent)
    path = ":".join(p for p in os.environ.get("PATH", "").split(":") if p != venv_bin)
    env = {**os.environ, "PATH": path}

    def stored(log: Path) -> Stored:
        api = banner(log, "REST API").split()[0]
        auth = {"Authorization": f"Bearer {(tmp_path / 'token').read_text().strip()}"}
        active = httpx.get(f"{api}/v1/policy", headers=auth, timeout=10).json()
        history = httpx.get(f"{api}/v1/policy/history", headers=auth, timeout=10).json()
        return active, [entry["version"] for entry in history["versions"]]

    logs: dict[str, Path] = {}
    served: dict[str, Stored] = {}
    for name, extra in (
        ("first", ["--policy", str(first)]),
        ("second", ["--policy", str(second)]),
        ("third", ["--policy", str(second)]),  # the same file again adds no version
        ("fourth", ["--policy", str(first), "--keep-stored-policy"]),
        ("fifth", []),
    ):
        process, logs[name] = start_up_stack(tmp_path, name, extra, env)
        try:
            if name in ("second", "fifth"):
                served[name] = stored(logs[name])
        finally:
            stop_up(process, logs[name])
    return Restarts(tmp_path / "token", first, second, logs, served, venv_bin)


class TestRestarts:
    """What ``flowlane up`` says at each start on a store an earlier start wrote to.

    The three tests read one sequence of starts (a class-scoped fixture, moved whole
    by ``tests/support/slow_first.py``): a start costs seconds of CPU (three Python
    interpreters), and the token and PATH lines of a start are the same whatever its
    ``--policy``, so they are read from the policy sequence's first two starts rather
    than from starts of their own.
    """

    def test_the_banner_names_a_flowlane_that_runs_as_pasted(self, restarts: Restarts) -> None:
        """``make run`` does not put the venv on PATH: the banner used to say bare
        ``flowlane``."""
        log = restarts.logs["first"]
        watch = banner(log, "watch").split()
        assert watch[0] == str(Path(restarts.venv_bin) / "flowlane"), watch
        assert banner(log, "PATH") == (
            f'flowlane is not on PATH; export PATH="{restarts.venv_bin}:$PATH"'
        )
        version = subprocess.run([watch[0], "--version"], capture_output=True, timeout=30)
        assert version.returncode == 0, version.stderr

    def test_the_token_line_tells_a_restart_from_a_first_start(self, restarts: Restarts) -> None:
        """It said "the first admin token of an empty store" on every start."""
        token = restarts.token
        line = banner(restarts.logs["second"], "API token")
        assert "empty store" not in line and "the store had none" not in line
        assert line == f"{token} (written by an earlier start; this store accepts it)"
        assert banner(restarts.logs["first"], "API token") == (
            f"{token} (a new admin token: the store had none)"
        )

    def test_policy_on_a_store_with_a_policy_becomes_the_next_version(
        self, restarts: Restarts
    ) -> None:
        """It used to be ignored: the stored policy ran, and nothing said so."""
        first, second, logs = restarts.first_policy, restarts.second_policy, restarts.logs
        active, _ = restarts.stored["second"]
        assert (active["version"], active["author"]) == (2, "flowlane up")
        assert active["policy"]["default_class"] == "training"
        assert banner(logs["second"], "policy") == (
            f"version 2 from {second} (author flowlane up), replacing version 1"
        )
        assert banner(logs["first"], "policy") == f"version 1 from {first} (the store had none)"
        # The same file again adds no version; --keep-stored-policy and no --policy keep it.
        assert banner(logs["third"], "policy") == (
            f"version 2, already in the store: the same as {second}"
        )
        assert banner(logs["fourth"], "policy") == (
            f"version 2, stored earlier ({first} not applied: --keep-stored-policy)"
        )
        active, versions = restarts.stored["fifth"]
        assert (active["version"], versions) == (2, [2, 1])
        assert banner(logs["fifth"], "policy").startswith("version 2, stored earlier")


def make_run_command(*assignments: str) -> str:
    done = subprocess.run(
        ["make", "-n", "run", *assignments], capture_output=True, text=True, cwd=REPO, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return next(line for line in done.stdout.splitlines() if "flowlane up" in line)


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_run_passes_a_policy_only_when_policy_is_set() -> None:
    """A plain ``make run`` keeps the operator's stored policy; ``POLICY=`` replaces it."""
    assert "--policy" not in make_run_command()
    assert "--policy policies/examples/mininet.yaml" in make_run_command(
        "POLICY=policies/examples/mininet.yaml"
    )


def test_children_use_the_redis_up_chose_not_an_inherited_url_file() -> None:
    """A ``$FLOWLANE_REDIS_URL_FILE`` in up's environment would beat the ``$FLOWLANE_REDIS_URL``
    up gives its children (in them a file wins over a URL): they must not inherit it."""
    parent = {"PATH": "/usr/bin", "FLOWLANE_REDIS_URL_FILE": "/etc/other-redis-url"}
    env = child_env(parent, {"FLOWLANE_REDIS_URL": "redis://127.0.0.1:6390/0"})
    assert env == {"PATH": "/usr/bin", "FLOWLANE_REDIS_URL": "redis://127.0.0.1:6390/0"}
