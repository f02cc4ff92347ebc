"""deploy/slurm under a real single-node Slurm (Debian's slurm-wlm): srun registers, the end
removes.

munged, slurmctld and slurmd run on this machine from a slurm.conf generated in the test's
temporary directory, on free ports, with PrologSlurmctld/EpilogSlurmctld pointing at a copy
of deploy/slurm's scripts; nothing reads or writes /etc/slurm or /etc/munge (every command
gets ``-f``/``SLURM_CONF``, munged its own key and socket). Each daemon runs in the
foreground in a session of its own and is stopped by its process group.

Needs root (slurmd starts job steps as their user) and the packages deploy/setup.sh installs:
a missing one fails the test, it is never skipped.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
import redis

from controller.auth.model import Role
from controller.store.jobs import JobRecord, JobStore
from controller.store.tokens import TokenStore
from tests.conftest import free_port
from tests.support.api_thread import REPO, apply_default_policy, serve_api

SCRIPTS = REPO / "deploy" / "slurm"
BINARIES = ("munged", "slurmctld", "slurmd", "srun", "scontrol", "sinfo")
T = TypeVar("T")


def binary(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if found is None:
        pytest.fail(
            f"{name} is missing: install slurm-wlm and munge (deploy/setup.sh does);"
            " the Slurm test is never skipped"
        )
    return found


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float = 20) -> T:
    """``probe()`` once it answers; polling, since the daemons say nothing when ready."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = probe()
        if found is not None:
            return found
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def node_address() -> str:
    """This machine's first global IPv4 address: the node's NodeAddr, hence the job's endpoint.

    The host name may resolve to loopback (it does in many containers), which the prolog
    rightly leaves out; an explicit NodeAddr is what an operator would set.
    """
    shown = subprocess.run(
        ["ip", "-4", "-o", "addr", "show", "scope", "global"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = re.search(r"\binet (\d+\.\d+\.\d+\.\d+)/", shown)
    if found is None:
        pytest.fail(f"no global IPv4 address on this machine for the Slurm node: {shown!r}")
    return found.group(1)


@dataclass
class Cluster:
    """A running single-node cluster and the files of its flowlane scripts."""

    directory: Path
    conf: Path
    scripts: Path
    node: str
    address: str

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    @property
    def log(self) -> Path:
        return self.directory / "flowlane-slurm.log"

    def configure(self, **settings: str) -> None:
        text = "".join(f"{key}={value}\n" for key, value in settings.items())
        (self.scripts / "flowlane-slurm.env").write_text(text)

    def srun(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [binary("srun"), *args],
            env=self.env,
            cwd=self.directory,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def daemon_logs(self) -> str:
        logs = sorted(self.directory.glob("*.log"))
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in logs)


def slurm_conf(directory: Path, node: str, address: str, scripts: Path) -> str:
    return f"""\
ClusterName=flowlanetest
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={directory}/munge/socket
StateSaveLocation={directory}/state
SlurmdSpoolDir={directory}/spool
SlurmctldPidFile={directory}/slurmctld.pid
SlurmdPidFile={directory}/slurmd.pid
SlurmctldLogFile={directory}/slurmctld.log
SlurmdLogFile={directory}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
PrologSlurmctld={scripts}/prolog.sh
EpilogSlurmctld={scripts}/epilog.sh
NodeName={node} NodeAddr={address} CPUs=2 State=UNKNOWN
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""


def start(command: list[str], log: Path) -> subprocess.Popen[bytes]:
    """A foreground daemon in a session of its own, its output in ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
        )


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the daemon's process group (slurmd's job steps are in it too), then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=10)
            break
        except subprocess.TimeoutExpired:
            continue


def run_ok(command: list[str], env: dict[str, str]) -> str | None:
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=10)
    return done.stdout if done.returncode == 0 else None


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    if os.geteuid() != 0:
        pytest.fail("the Slurm test needs root: slurmd starts job steps as the job's user")
    for name in BINARIES:
        binary(name)
    directory = tmp_path / "slurm"
    scripts = directory / "flowlane"
    for sub in ("munge", "state", "spool", "flowlane"):
        (directory / sub).mkdir(parents=True)
    (directory / "munge").chmod(0o711)
    for name in ("prolog.sh", "epilog.sh", "flowlane-slurm.sh"):
        shutil.copy2(SCRIPTS / name, scripts / name)
    key = directory / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    node = socket.gethostname().split(".")[0]
    address = node_address()
    conf = directory / "slurm.conf"
    conf.write_text(slurm_conf(directory, node, address, scripts))
    made = Cluster(directory, conf, scripts, node, address)
    munge_dir = directory / "munge"
    daemons: list[subprocess.Popen[bytes]] = []
    try:
        daemons.append(
            start(
                [
                    binary("munged"),
                    "--foreground",
                    "--force",
                    f"--key-file={key}",
                    f"--socket={munge_dir / 'socket'}",
                    f"--pid-file={munge_dir / 'munged.pid'}",
                    f"--log-file={directory / 'munged.log'}",
                    f"--seed-file={munge_dir / 'seed'}",
                ],
                directory / "munged.out.log",
            )
        )
        wait_for("munged's socket", lambda: (munge_dir / "socket").exists() or None)
        slurmctld = [binary("slurmctld"), "-D", "-i", "-f", str(conf)]
        daemons.append(start(slurmctld, directory / "slurmctld.out.log"))
        wait_for(
            "slurmctld to answer",
            lambda: (
                run_ok([binary("scontrol"), "ping"], made.env)
                if daemons[-1].poll() is None
                else pytest.fail(f"slurmctld exited\n{made.daemon_logs()}")
            ),
        )
        daemons.append(
            start(
                [binary("slurmd"), "-D", "-N", node, "-f", str(conf)],
                directory / "slurmd.out.log",
            )
        )

        def node_idle() -> str | None:
            state = run_ok([binary("sinfo"), "-h", "-n", node, "-o", "%T"], made.env)
            return state if state is not None and state.strip() == "idle" else None

        try:
            wait_for("the node to be idle", node_idle)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{made.daemon_logs()}") from None
        yield made
    finally:
        for daemon in reversed(daemons):
            stop(daemon)


@pytest.fixture
def flowlane(redis_client: redis.Redis, redis_url: str, cluster: Cluster) -> Iterator[str]:
    """The API with the default policy, and the scripts configured to call it with an
    operator token in a file only root (the SlurmUser here) reads."""
    tokens = TokenStore(redis_client)
    _, admin = tokens.create("admin", Role.admin)
    _, operator = tokens.create("slurm", Role.operator)
    token = cluster.scripts / "token"
    token.write_text(operator + "\n")
    token.chmod(0o600)
    with serve_api(redis_url) as url:
        apply_default_policy(url, admin)
        cluster.configure(
            FLOWLANE_API=url,
            FLOWLANE_TOKEN_FILE=str(token),
            FLOWLANE_LOG_FILE=str(cluster.log),
            SLURM_CONF=str(cluster.conf),
        )
        yield url


def test_srun_registers_the_job_while_it_runs_and_the_end_removes_it(
    cluster: Cluster, flowlane: str, redis_client: redis.Redis
) -> None:
    jobs = JobStore(redis_client)
    started = time.monotonic()
    srun = cluster.srun("--comment=flowlane:class=training,weight=2", "--time=1", "sleep", "2")

    def registered() -> JobRecord | None:
        return next(iter(jobs.all()), None)

    try:
        job = wait_for("the prolog to register the job", registered, timeout_s=15)
        latency = time.monotonic() - started
        assert srun.poll() is None, "the job is registered while it runs"
        assert re.fullmatch(r"slurm-\d+", job.name), job.name
        body = job.to_dict()
        assert body["class"] == "training"
        assert body["weight"] == 2
        assert body["endpoints"] == [{"ipv4": f"{cluster.address}/32", "ports": None}]
        assert body["ttl"] == 60 + 300, "the job's 1-minute limit and the margin"
        _, stderr = srun.communicate(timeout=20)
    finally:
        if srun.poll() is None:
            srun.kill()
            srun.wait()
    assert srun.returncode == 0, stderr
    # The epilog logs once the API answered its DELETE: its line, then the store, say it is done.
    removed = f"removed {job.name}"
    wait_for("the epilog to remove the job", lambda: removed in cluster.log.read_text() or None)
    assert jobs.all() == []
    assert f"registered {job.name}: class training, weight 2, 1 node(s)" in cluster.log.read_text()
    # The first half of "srun to the job's first packet classified" (target 1 s); the second,
    # the registration to the job's entries on a switch, is timed by tests/mininet/test_jobs.py.
    print(f"srun to registered: {latency:.3f} s")
    assert latency < 0.5, latency


def test_a_job_runs_when_flowlane_is_down_unless_strict(cluster: Cluster, flowlane: str) -> None:
    token = cluster.scripts / "token"
    down = f"http://127.0.0.1:{free_port()}"
    settings = {"FLOWLANE_API": down, "FLOWLANE_TOKEN_FILE": str(token)}
    cluster.configure(**settings, FLOWLANE_LOG_FILE=str(cluster.log), SLURM_CONF=str(cluster.conf))
    srun = cluster.srun("--comment=flowlane:class=training", "true")
    _, stderr = srun.communicate(timeout=20)
    assert srun.returncode == 0, stderr
    assert "unreachable" in cluster.log.read_text()

    # Strict: slurmctld cancels an srun job whose PrologSlurmctld failed.
    cluster.configure(
        **settings,
        FLOWLANE_LOG_FILE=str(cluster.log),
        SLURM_CONF=str(cluster.conf),
        FLOWLANE_STRICT="1",
    )
    srun = cluster.srun("--comment=flowlane:class=training", "true")
    _, stderr = srun.communicate(timeout=20)
    assert srun.returncode != 0, "a strict prolog that fails cancels the job"
    # srun says why when it hears of the kill in time, and only that its allocation was revoked
    # when the cancellation wins the race (a loaded machine); slurmctld logs the cause either way.
    assert "PrologSlurmctld failed, job killed" in stderr or "has been revoked" in stderr, stderr
    assert re.search(
        r"prolog_slurmctld JobId=\d+ prolog exit status 1:0",
        (cluster.directory / "slurmctld.log").read_text(errors="replace"),
    ), cluster.daemon_logs()
