"""deploy/slurm's prolog and epilog against a real API, with ``scontrol`` and ``getent`` stubbed.

The scripts run as slurmctld runs them: a copy in a directory of its own beside its
``flowlane-slurm.env``, the job in ``SLURM_*`` variables. Only the Slurm commands are
stubs (on PATH, which the scripts keep when set); the API, Redis, curl and the token
checks are real. ``test_slurm.py`` runs them under a real slurmctld.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis

from controller.auth.model import Role
from controller.store.jobs import JobStore
from controller.store.tokens import TokenStore
from tests.conftest import free_port
from tests.support.api_thread import REPO, apply_default_policy, serve_api

SCRIPTS = REPO / "deploy" / "slurm"
INSTALLED = ("prolog.sh", "epilog.sh", "flowlane-slurm.sh")


def scontrol_stub(nodes: dict[str, str], time_limit: str) -> str:
    """``scontrol`` answering for ``nodes`` (name → NodeAddr) and one job's time limit."""
    cases = "\n".join(
        f'  "-o show node {name}") echo "NodeName={name} Arch=x86_64 NodeAddr={addr}'
        f' NodeHostName={name} State=ALLOCATED" ;;'
        for name, addr in nodes.items()
    )
    hosts = " ".join(nodes)
    return f"""#!/bin/sh
case "$*" in
  "show hostnames "*) printf '%s\\n' {hosts} ;;
{cases}
  "-o show job "*) echo "JobId=$4 JobName=train TimeLimit={time_limit} Comment=x" ;;
  *) echo "scontrol stub: unexpected $*" >&2; exit 1 ;;
esac
"""


GETENT_STUB = """#!/bin/sh
# getent ahostsv4 NAME: gpu-b is 10.9.0.2, anything else is unknown.
[ "$1 $2" = "ahostsv4 gpu-b" ] || exit 2
printf '10.9.0.2        STREAM gpu-b\\n10.9.0.2        DGRAM\\n'
"""


@dataclass
class Site:
    """The scripts installed as an operator would, with stubs and a token."""

    home: Path
    stubs: Path
    api_url: str
    redis_client: redis.Redis
    settings: dict[str, str] = field(default_factory=dict)

    @property
    def token_file(self) -> Path:
        return self.home / "token"

    @property
    def log_file(self) -> Path:
        return self.home / "flowlane.log"

    def configure(self, **settings: str) -> None:
        self.settings.update(settings)
        lines = [f"{key}={value}" for key, value in self.settings.items()]
        (self.home / "flowlane-slurm.env").write_text("# test settings\n" + "\n".join(lines))

    def stub_nodes(self, nodes: dict[str, str], time_limit: str = "UNLIMITED") -> None:
        stub = self.stubs / "scontrol"
        stub.write_text(scontrol_stub(nodes, time_limit))
        stub.chmod(0o755)

    def run(
        self, script: str, comment: str | None = None, job_id: str = "7"
    ) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": f"{self.stubs}:/usr/local/bin:/usr/bin:/bin",
            "SLURM_JOB_ID": job_id,
            "SLURM_JOB_NODELIST": "stubbed",
            "SLURM_SCRIPT_CONTEXT": f"{script.removesuffix('.sh')}_slurmctld",
            **({"SLURM_JOB_COMMENT": comment} if comment is not None else {}),
        }
        return subprocess.run(
            [str(self.home / script)], env=env, capture_output=True, text=True, timeout=30
        )

    def jobs(self) -> dict[str, dict[str, Any]]:
        return {job.name: job.to_dict() for job in JobStore(self.redis_client).all()}


@pytest.fixture
def api_url(redis_client: redis.Redis, redis_url: str) -> Iterator[str]:
    """An API with the default policy active."""
    _, admin = TokenStore(redis_client).create("admin", Role.admin)
    with serve_api(redis_url) as url:
        apply_default_policy(url, admin)
        yield url


@pytest.fixture
def site(tmp_path: Path, api_url: str, redis_client: redis.Redis) -> Site:
    home = tmp_path / "slurm-flowlane"
    stubs = tmp_path / "stubs"
    home.mkdir()
    stubs.mkdir()
    for name in INSTALLED:
        shutil.copy2(SCRIPTS / name, home / name)
    getent = stubs / "getent"
    getent.write_text(GETENT_STUB)
    getent.chmod(0o755)
    _, secret = TokenStore(redis_client).create("slurm", Role.operator)
    token = home / "token"
    token.write_text(secret + "\n")
    token.chmod(0o600)
    installed = Site(home, stubs, api_url, redis_client)
    installed.configure(
        FLOWLANE_API=api_url,
        FLOWLANE_TOKEN_FILE=str(token),
        FLOWLANE_LOG_FILE=str(installed.log_file),
    )
    installed.stub_nodes({"gpu-a": "10.9.0.1", "gpu-b": "gpu-b", "gpu-c": "10.9.0.1"})
    return installed


def test_prolog_registers_the_nodes_class_weight_and_ttl(site: Site) -> None:
    site.stub_nodes({"gpu-a": "10.9.0.1", "gpu-b": "gpu-b"}, time_limit="1-02:03:04")
    done = site.run("prolog.sh", "owner=ml flowlane:class=training,weight=2 ; other")
    assert done.returncode == 0, done.stderr
    job = site.jobs()["slurm-7"]
    assert job["class"] == "training"
    assert job["weight"] == 2
    # gpu-b's NodeAddr is a name: getent resolved it.
    assert job["endpoints"] == [
        {"ipv4": "10.9.0.1/32", "ports": None},
        {"ipv4": "10.9.0.2/32", "ports": None},
    ]
    assert job["ttl"] == 86400 + 2 * 3600 + 3 * 60 + 4 + 300
    assert "registered slurm-7: class training, weight 2, 2 node(s)" in site.log_file.read_text()


def test_epilog_removes_the_job_and_a_missing_one_is_fine(site: Site) -> None:
    assert site.run("prolog.sh", "flowlane:class=training").returncode == 0
    assert "slurm-7" in site.jobs()
    removed = site.run("epilog.sh", "flowlane:class=training")
    assert removed.returncode == 0, removed.stderr
    assert site.jobs() == {}
    again = site.run("epilog.sh", "flowlane:class=training")
    assert again.returncode == 0, again.stderr
    log = site.log_file.read_text()
    assert "removed slurm-7" in log
    assert "slurm-7 was not registered (or expired)" in log


def test_a_duplicate_address_and_loopback_are_left_out(site: Site) -> None:
    site.stub_nodes({"gpu-a": "10.9.0.1", "gpu-c": "10.9.0.1", "login": "127.0.1.1"})
    assert site.run("prolog.sh", "flowlane:class=training").returncode == 0
    assert site.jobs()["slurm-7"]["endpoints"] == [{"ipv4": "10.9.0.1/32", "ports": None}]
    assert "node login resolves to loopback 127.0.1.1: left out" in site.log_file.read_text()


def test_the_default_class_and_opting_out(site: Site) -> None:
    assert site.run("prolog.sh", None, job_id="1").returncode == 0
    assert site.jobs() == {}, "no comment and no default class: not a flowlane job"
    site.configure(FLOWLANE_DEFAULT_CLASS="best-effort")
    assert site.run("prolog.sh", None, job_id="2").returncode == 0
    assert site.run("prolog.sh", "flowlane:off", job_id="3").returncode == 0
    assert site.run("prolog.sh", "flowlane:weight=3", job_id="4").returncode == 0
    jobs = site.jobs()
    assert sorted(jobs) == ["slurm-2", "slurm-4"]
    assert (jobs["slurm-2"]["class"], jobs["slurm-2"]["weight"]) == ("best-effort", 1)
    assert (jobs["slurm-4"]["class"], jobs["slurm-4"]["weight"]) == ("best-effort", 3)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_token_file_others_can_read_is_refused(site: Site, mode: int) -> None:
    site.token_file.chmod(mode)
    done = site.run("prolog.sh", "flowlane:class=training")
    assert done.returncode == 0, "a refused token must not fail the job"
    assert f"has mode {mode:o}: it is readable or writable by others" in done.stderr
    assert site.jobs() == {}
    site.configure(FLOWLANE_STRICT="1")
    assert site.run("prolog.sh", "flowlane:class=training").returncode == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_token_file_of_another_user_is_refused(site: Site) -> None:
    os.chown(site.token_file, 65534, -1)
    done = site.run("prolog.sh", "flowlane:class=training")
    assert done.returncode == 0
    assert "is owned by uid 65534, not by the Slurm user" in done.stderr
    assert site.jobs() == {}


def test_an_unreachable_api_does_not_fail_the_job_unless_strict(site: Site) -> None:
    site.configure(FLOWLANE_API=f"http://127.0.0.1:{free_port()}")
    done = site.run("prolog.sh", "flowlane:class=training")
    assert done.returncode == 0, done.stderr
    assert "unreachable, slurm-7 not registered" in done.stderr
    assert "unreachable, slurm-7 not registered" in site.log_file.read_text()
    site.configure(FLOWLANE_STRICT="1")
    assert site.run("prolog.sh", "flowlane:class=training").returncode == 1
    assert site.run("epilog.sh", "flowlane:class=training").returncode == 1


@pytest.mark.parametrize(
    ("comment", "message"),
    [
        ("flowlane:class=training,weight=0", "weight '0' is not a whole number 1..100"),
        ("flowlane:class=training,weight=2x", "weight '2x' is not a whole number 1..100"),
        ('flowlane:class=tr"aining', "is not a class name"),
        ("flowlane:class=training,prio=1", "unknown 'prio=1'"),
        # Past the script's checks, the API is the judge: its 422 is logged with the path.
        ("flowlane:class=training,weight=101", "HTTP 422"),
        ("flowlane:class=bulk", "unknown class 'bulk'"),
    ],
)
def test_a_bad_comment_is_logged_and_not_registered(site: Site, comment: str, message: str) -> None:
    done = site.run("prolog.sh", comment)
    assert done.returncode == 0
    assert message in done.stderr
    assert site.jobs() == {}


def test_the_weight_refusal_names_the_field(site: Site) -> None:
    done = site.run("prolog.sh", "flowlane:class=training,weight=101")
    assert '"path":"weight"' in done.stderr
    assert "weight 101 is outside 1..100" in done.stderr


def test_settings_are_read_not_run(site: Site, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    (site.home / "flowlane-slurm.env").write_text(f"FLOWLANE_DEFAULT_CLASS=$(touch {marker})\n")
    done = site.run("prolog.sh", None)
    assert not marker.exists()
    assert "FLOWLANE_DEFAULT_CLASS '$(touch" in done.stderr
    (site.home / "flowlane-slurm.env").write_text("EVIL=1\n")
    assert "unknown setting EVIL" in site.run("prolog.sh", None).stderr


def test_a_job_on_more_nodes_than_a_flowlane_job_takes_is_not_registered(site: Site) -> None:
    site.stub_nodes({f"gpu-{i}": f"10.9.1.{i}" for i in range(65)})
    done = site.run("prolog.sh", "flowlane:class=training")
    assert done.returncode == 0
    assert "the job has 65 nodes, more than the 64 endpoints a flowlane job takes" in done.stderr
    assert site.jobs() == {}
    site.stub_nodes({f"gpu-{i}": f"10.9.1.{i}" for i in range(64)})
    assert site.run("prolog.sh", "flowlane:class=training").returncode == 0
    assert len(site.jobs()["slurm-7"]["endpoints"]) == 64


def test_a_settings_file_others_may_write_is_refused(site: Site) -> None:
    settings = site.home / "flowlane-slurm.env"
    settings.chmod(0o666)
    done = site.run("prolog.sh", "flowlane:class=training")
    assert done.returncode == 0
    assert "is writable by its group or others: refusing it" in done.stderr
    assert site.jobs() == {}
