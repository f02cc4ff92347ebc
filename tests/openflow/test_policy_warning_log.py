"""The controller logs what in its policy will never act: once per policy version.

``FlowlaneApp._warn_policy`` runs on every policy change and whenever a
switch reports its ports (a slow link can make a setting void); it is called
here on a stand-in for the app, which needs only the attributes it reads.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from controller.openflow.app import FlowlaneApp
from controller.openflow.settings import ActivePolicy
from controller.policy.load import parse_policy

G = 1_000_000_000
M = 1_000_000
DOCUMENT: dict[str, Any] = {
    "classes": {
        "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
        "training": {"priority": 1, "dscp": 26, "min_rate": "70%"},
    },
    "default_class": "inference",
    "ports": {"rate": "10Gbit"},
    "detection": {"elephant": {"class": "training"}},  # 10% of 10Gbit: 1Gbit/s
}


@dataclass
class FakeApp:
    settings: Any
    workers: list[Any] = field(default_factory=list)
    _warned_lock: threading.Lock = field(default_factory=threading.Lock)
    _warned: tuple[int | None, set[str]] = (None, set())

    def _all_workers(self) -> list[Any]:
        return self.workers

    def warn(self) -> None:
        FlowlaneApp._warn_policy(self)  # type: ignore[arg-type]


def worker(*ports: tuple[str, int | None]) -> Any:
    return SimpleNamespace(ports=[SimpleNamespace(name=n, link_bps=b) for n, b in ports])


def warnings_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_port_too_slow_for_the_detection_rate_is_logged_once_per_version(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="flowlane.controller")
    policy = parse_policy(DOCUMENT)
    app = FakeApp(SimpleNamespace(active=ActivePolicy(policy, 3)), [worker(("s1-eth1", 10 * G))])
    app.warn()
    assert warnings_logged(caplog) == []  # every known port can carry 1Gbit/s

    app.workers.append(worker(("s2-eth1", 100 * M)))  # a switch with a 100Mbit link connects
    app.warn()
    app.warn()  # the same warning again: not repeated
    [logged] = warnings_logged(caplog)
    assert logged.startswith("policy version 3: detection.elephant.rate: 10% of ports.rate")
    assert "port s2-eth1 (100Mbit)" in logged

    caplog.clear()
    app.settings.active = ActivePolicy(policy, 4)  # a new version says it again
    app.warn()
    assert [m.split(":")[0] for m in warnings_logged(caplog)] == ["policy version 4"]


def test_fabric_without_detection_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="flowlane.controller")
    document = {k: v for k, v in DOCUMENT.items() if k != "detection"}
    policy = parse_policy({**document, "forwarding": "fabric"})
    FakeApp(SimpleNamespace(active=ActivePolicy(policy, 1))).warn()
    [logged] = warnings_logged(caplog)
    assert logged.startswith("policy version 1: forwarding.placement: placement is on")
