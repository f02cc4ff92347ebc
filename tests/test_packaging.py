"""A wheel built from the checkout (not an editable install) goes into a clean venv, outside
the checkout, and the installed ``flowlane`` works there, without the source tree.

uv builds the wheel through the project's own build backend (setuptools, in an isolated
build environment, as pip would) and installs it with every dependency resolved afresh from
the package index into a venv without system site-packages: what a user's ``pip install``
proves, in seconds instead of a minute and a half (uv resolves and downloads in parallel and
keeps its cache across runs).  uv is a dev dependency (``pyproject.toml``); a missing uv
fails the fixture.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


# The clean venv is the test's own: its modules are compiled once, by the first command that
# imports them, and read back by the next ones, even where the environment says not to write
# bytecode (as a user's installed venv would be compiled once).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def uv(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The uv of this venv (``python -m uv`` finds the binary the ``uv`` wheel installed)."""
    return run(sys.executable, "-m", "uv", *args, cwd=cwd)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A clean venv (no system site-packages) with the wheel of this checkout in it."""
    work = tmp_path_factory.mktemp("packaging")
    built = uv("build", "--quiet", "--wheel", "--out-dir", work / "dist", REPO, cwd=work)
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = (work / "dist").glob("flowlane-*.whl")
    # The interpreter the project runs on (Debian's, under .venv), without its site-packages.
    made = uv("venv", "--quiet", "--python", sys.executable, work / "venv", cwd=work)
    assert made.returncode == 0, made.stdout + made.stderr
    config = (work / "venv" / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = false" in config, config
    python = work / "venv" / "bin" / "python"
    pip = uv("pip", "install", "--quiet", "--python", python, wheel, cwd=work)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    yield work


def test_the_installed_command_works_outside_the_checkout(installed: Path) -> None:
    flowlane = installed / "venv" / "bin" / "flowlane"
    version = run(flowlane, "--version", cwd=installed)
    assert version.returncode == 0 and version.stdout.startswith("flowlane "), version.stderr
    where = run(
        installed / "venv" / "bin" / "python",
        "-c",
        "import controller; print(controller.__file__)",
        cwd=installed,
    )
    assert str(installed / "venv") in where.stdout and str(REPO) not in where.stdout
    for command in ("controller", "api", "up", "policy", "jobs", "token", "certs", "switches"):
        shown = run(flowlane, command, "--help", cwd=installed)
        assert shown.returncode == 0, (command, shown.stdout, shown.stderr)


def test_the_default_policy_ships_inside_the_package(installed: Path) -> None:
    flowlane = installed / "venv" / "bin" / "flowlane"
    printed = run(flowlane, "policy", "default", cwd=installed)
    assert printed.stdout == (REPO / "policies" / "default.yaml").read_text()
    (installed / "policy.yaml").write_text(printed.stdout)
    valid = run(flowlane, "policy", "validate", "policy.yaml", cwd=installed)
    assert valid.returncode == 0, valid.stdout + valid.stderr


def test_the_scenario_runner_says_it_needs_a_checkout(installed: Path) -> None:
    listed = run(installed / "venv" / "bin" / "flowlane", "scenario", "list", cwd=installed)
    assert listed.returncode == 2
    assert "source checkout" in listed.stdout + listed.stderr
    assert "[scenarios]" in listed.stdout + listed.stderr
