"""deploy/systemd: the units pass ``systemd-analyze verify`` without a warning, start the
installed ``flowlane`` with the settings of their environment files, and stay hardened."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SYSTEMD = Path(__file__).resolve().parents[2] / "deploy" / "systemd"
UNITS = ("flowlane-controller.service", "flowlane-api.service")
INSTALLED = "/usr/local/bin/flowlane"


def analyze() -> str:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.fail("systemd-analyze not found: apt-get install systemd (deploy/setup.sh does)")
    return tool


@pytest.fixture
def units(tmp_path: Path) -> list[Path]:
    """The units as shipped, but running this checkout's flowlane and reading the shipped
    environment files (verify checks that both exist)."""
    flowlane = Path(sys.executable).with_name("flowlane")
    assert flowlane.exists(), f"{flowlane}: install flowlane into the venv (make setup)"
    written = []
    for name in UNITS:
        text = (SYSTEMD / name).read_text()
        assert INSTALLED in text
        text = text.replace(INSTALLED, str(flowlane))
        text = re.sub(
            r"EnvironmentFile=/etc/flowlane/(\S+)", rf"EnvironmentFile={SYSTEMD}/\1", text
        )
        path = tmp_path / name
        path.write_text(text)
        written.append(path)
    return written


def test_the_units_verify_without_a_warning(units: list[Path]) -> None:
    done = subprocess.run(
        [analyze(), "verify", *map(str, units)], capture_output=True, text=True, check=False
    )
    ours = [
        line
        for line in (done.stdout + done.stderr).splitlines()
        if any(unit.name in line for unit in units)
    ]
    assert done.returncode == 0 and ours == [], done.stdout + done.stderr


@pytest.mark.parametrize(
    ("unit", "most"), [("flowlane-controller.service", 3.0), ("flowlane-api.service", 2.0)]
)
def test_the_units_are_hardened(units: list[Path], unit: str, most: float) -> None:
    """systemd's own exposure score (0 best, 10 worst): the controller keeps CAP_NET_ADMIN
    for tc and root for the OVSDB socket; the API needs no privilege at all."""
    path = next(u for u in units if u.name == unit)
    done = subprocess.run(
        [analyze(), "security", "--offline=yes", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    match = re.search(r"Overall exposure level for \S+: ([0-9.]+)", done.stdout + done.stderr)
    assert match is not None, done.stdout + done.stderr
    print(f"\n{unit}: exposure {match[1]}")
    assert float(match[1]) <= most


def test_every_setting_a_unit_uses_is_in_its_environment_file() -> None:
    for unit, env in (
        ("flowlane-controller.service", "controller.env"),
        ("flowlane-api.service", "api.env"),
    ):
        used = set(re.findall(r"\$\{?(FLOWLANE_\w+)\}?", (SYSTEMD / unit).read_text()))
        defined = set(re.findall(r"^(FLOWLANE_\w+)=", (SYSTEMD / env).read_text(), re.M))
        assert used - {"FLOWLANE_TOKEN_FILE"} <= defined, (unit, used - defined)
        assert "FLOWLANE_REDIS_URL" in defined


TEMPLATE = "flowlane-controller@.service"


@pytest.fixture
def instance(tmp_path: Path) -> Path:
    """Instance ``a`` of the template, as shipped but running this checkout's flowlane, with
    the shipped controller.env and the example instance file as its controller-a.env."""
    flowlane = Path(sys.executable).with_name("flowlane")
    text = (SYSTEMD / TEMPLATE).read_text().replace(INSTALLED, str(flowlane))
    text = text.replace("/etc/flowlane/controller.env", str(SYSTEMD / "controller.env"))
    text = text.replace("/etc/flowlane/controller-%i.env", f"{tmp_path}/controller-%i.env")
    (tmp_path / TEMPLATE).write_text(text)
    (tmp_path / "controller-a.env").write_text((SYSTEMD / "controller-instance.env").read_text())
    return tmp_path / "flowlane-controller@a.service"


def test_the_instance_template_verifies_without_a_warning(instance: Path) -> None:
    done = subprocess.run(
        [analyze(), "verify", str(instance)], capture_output=True, text=True, check=False
    )
    ours = [
        line for line in (done.stdout + done.stderr).splitlines() if "flowlane-controller@" in line
    ]
    assert done.returncode == 0 and ours == [], done.stdout + done.stderr


def test_the_instance_template_is_as_hardened_as_the_unit(instance: Path) -> None:
    done = subprocess.run(
        [analyze(), "security", "--offline=yes", str(instance)],
        capture_output=True,
        text=True,
        check=False,
    )
    match = re.search(r"Overall exposure level for \S+: ([0-9.]+)", done.stdout + done.stderr)
    assert match is not None, done.stdout + done.stderr
    assert float(match[1]) <= 3.0


def test_an_instance_is_named_and_given_its_ports_by_its_own_file() -> None:
    """The instance name is its --instance-id (its lease, heartbeat and events say it); its
    file comes after controller.env, so its ports win; the rest is the single unit's."""
    text = (SYSTEMD / TEMPLATE).read_text()
    assert "--instance-id %i " in text
    files = re.findall(r"^EnvironmentFile=(\S+)$", text, re.M)
    assert files == ["/etc/flowlane/controller.env", "/etc/flowlane/controller-%i.env"]
    used = set(re.findall(r"\$\{?(FLOWLANE_\w+)\}?", text))
    shared = set(re.findall(r"^(FLOWLANE_\w+)=", (SYSTEMD / "controller.env").read_text(), re.M))
    own = set(
        re.findall(r"^(FLOWLANE_\w+)=", (SYSTEMD / "controller-instance.env").read_text(), re.M)
    )
    assert used <= shared | own
    assert own == {"FLOWLANE_OFP_PORT", "FLOWLANE_METRICS_PORT"}
    single = (SYSTEMD / "flowlane-controller.service").read_text()
    hardening = re.findall(r"^(?:[A-Z]\w+)=.*$", single.split("[Service]")[1], re.M)
    for line in hardening:
        if not line.startswith(("ExecStart=", "EnvironmentFile=")):
            assert line in text, f"the template lacks the unit's {line!r}"
