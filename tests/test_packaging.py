"""``pip install .`` (not editable), outside the checkout: a wheel is built and installed
into a clean venv, and the installed ``flowlane`` works there, without the source tree."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=600, check=False
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A clean venv (no system site-packages) with the wheel of this checkout in it."""
    work = tmp_path_factory.mktemp("packaging")
    built = run(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", work / "dist", REPO, cwd=work
    )
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = (work / "dist").glob("flowlane-*.whl")
    made = run(sys.executable, "-m", "venv", work / "venv", cwd=work)
    assert made.returncode == 0, made.stderr
    pip = run(work / "venv" / "bin" / "python", "-m", "pip", "install", "-q", wheel, cwd=work)
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
