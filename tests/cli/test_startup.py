"""A ``flowlane`` call imports only what its command uses.

Each CLI call used to import every command's module (the API client, Redis,
Prometheus, the planner, the scenario runner): 0.8 to 0.95 s before anything ran.
The import set is what can regress, and unlike wall time it does not depend on
how busy the machine is, so that is what these tests pin; the time is
measured by hand (see the README).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from controller.cli.main import COMMANDS, app, load_command

HEAVY = (
    "redis",
    "prometheus_client",
    "controller.api",
    "controller.store",
    "controller.pipeline",
    "controller.openflow",
    "controller.fabric",
    "flowlane_bench",
    "controller.policy.model",
    "os_ken",
    "uvicorn",
    "fastapi",
    "cryptography",
    "matplotlib",
)

PROBE = """
import json, sys
from controller.cli.main import app
try:
    app(sys.argv[1:], standalone_mode=False)
except BaseException:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def imported_by(*argv: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=60, check=True
    )
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY or m.startswith(HEAVY))


@pytest.mark.parametrize(
    "argv",
    [
        ("policy", "show", "--api", "http://127.0.0.1:1"),
        ("policy", "history", "--api", "http://127.0.0.1:1"),
        ("jobs", "list", "--api", "http://127.0.0.1:1"),
        ("switches", "--api", "http://127.0.0.1:1"),
        ("--version",),
    ],
)
def test_a_call_to_the_api_imports_no_server_side_module(argv: tuple[str, ...]) -> None:
    modules = imported_by(*argv)
    assert heavy(modules) == []
    assert "httpx" in modules or argv == ("--version",)


def test_version_imports_no_command_module() -> None:
    modules = imported_by("--version")
    assert "httpx" not in modules
    assert not [
        m
        for m in modules
        if m.startswith("controller.cli.")
        and m
        not in (
            "controller.cli.main",
            "controller.cli.credentials",
            "controller.cli.groups",  # the top-level group's class: difflib and a table
        )
    ]


def test_every_command_still_loads_and_is_listed(capsys: pytest.CaptureFixture[str]) -> None:
    for name in COMMANDS:
        assert load_command(name).name == name
    with pytest.raises(SystemExit):
        app(["--help"])
    listed = capsys.readouterr().out
    assert all(name in listed for name in COMMANDS)


def test_an_unknown_command_is_a_usage_error() -> None:
    done = subprocess.run(
        [str(Path(sys.executable).parent / "flowlane"), "nosuch"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "nosuch" in done.stderr
