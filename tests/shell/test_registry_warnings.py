"""The controller logs what in its policy will never act: once per policy version.

The registry owns the policy and the ports every served switch reported, so
it says it (``Registry._warn_policy``): on every policy change and whenever a
switch reports its ports (a slow link can make a setting void).  Port names
in ``ports.overrides`` that no connected switch has are said at a policy
change (``_warn_unmatched_overrides``).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from controller.metrics import ControllerMetrics
from controller.openflow.settings import ActivePolicy, ControllerSettings
from controller.pipeline.plan import PortState
from controller.policy.load import parse_policy
from controller.policy.model import Policy
from controller.shell.registry import Claim, PolicyArrived, PortsKnown, Registry
from tests.shell.test_registry import FakeConn, FakeRef, RecordingSwitches

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


def registry(policy: Policy, version: int) -> Registry:
    settings = ControllerSettings(
        ActivePolicy(policy, version), metrics=ControllerMetrics(CollectorRegistry())
    )
    return Registry(
        settings,
        RecordingSwitches(),
        schedule=lambda _delay, _event: lambda: None,
        fabric_policy=lambda _policy: None,
    )


def serve(owner: Registry, dpid: int, *ports: tuple[str, int | None]) -> None:
    """A switch connects and reports its ports."""
    owner.receive(Claim(FakeConn(dpid, f"10.0.0.{dpid}:6653"), FakeRef()))
    known = tuple(PortState(n, name, bps) for n, (name, bps) in enumerate(ports, 1))
    owner.receive(PortsKnown(dpid, known))


def warnings_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_port_too_slow_for_the_detection_rate_is_logged_once_per_version(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="flowlane.controller")
    policy = parse_policy(DOCUMENT)
    owner = registry(policy, 3)
    serve(owner, 1, ("s1-eth1", 10 * G))
    assert warnings_logged(caplog) == []  # every known port can carry 1Gbit/s

    serve(owner, 2, ("s2-eth1", 100 * M))  # a switch with a 100Mbit link connects
    owner.receive(PortsKnown(2, (PortState(1, "s2-eth1", 100 * M),)))  # said again: not repeated
    [logged] = warnings_logged(caplog)
    assert logged.startswith("policy version 3: detection.elephant.rate: 10% of ports.rate")
    assert "port s2-eth1 (100Mbit)" in logged

    caplog.clear()
    owner.receive(PolicyArrived(policy, 4))  # a new version says it again
    assert [m.split(":")[0] for m in warnings_logged(caplog)] == ["policy version 4"]


def test_fabric_without_detection_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="flowlane.controller")
    document = {k: v for k, v in DOCUMENT.items() if k != "detection"}
    policy = parse_policy({**document, "forwarding": "fabric"})
    owner = registry(parse_policy(document), 0)
    owner.receive(PolicyArrived(policy, 1))
    [logged] = warnings_logged(caplog)
    assert logged.startswith("policy version 1: forwarding.placement: placement is on")


def test_an_override_naming_no_connected_port_is_logged_at_the_policy_change(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="flowlane.controller")
    owner = registry(parse_policy(DOCUMENT), 1)
    serve(owner, 1, ("s1-eth1", 10 * G))
    overrides = {"s1-eth1": "5Gbit", "s9-eth9": "5Gbit"}
    owner.receive(
        PolicyArrived(
            parse_policy({**DOCUMENT, "ports": {"rate": "10Gbit", "overrides": overrides}}), 2
        )
    )
    [logged] = warnings_logged(caplog)
    assert logged.startswith("ports.overrides names s9-eth9, which no connected switch has")
