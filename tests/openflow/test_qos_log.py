"""The switch worker's log line after it repaired a port's queues or tc filters.

It read ``queues set on s1-eth1, tc filters set on -``: a ``-`` where a port
name belongs, whenever only one of the two was set (always on a kernel
datapath, which needs no filters).  Each part now names its ports, and a part
with none is left out.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from controller.metrics import ControllerMetrics
from controller.openflow import worker as worker_module
from controller.openflow.settings import ActivePolicy, ControllerSettings
from controller.openflow.worker import SwitchWorker
from controller.policy.load import parse_policy
from controller.qos.ovsdb import Bridge
from controller.qos.provision import QosOutcome

DOCUMENT: dict[str, Any] = {
    "classes": {
        "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
        "training": {"priority": 1, "dscp": 26, "min_rate": "70%"},
    },
    "default_class": "inference",
}


def repaired(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, outcome: QosOutcome
) -> list[str]:
    """The worker's info lines after a queue sync whose OVSDB/tc work came to ``outcome``."""
    settings = ControllerSettings(
        ActivePolicy(parse_policy(DOCUMENT, source="test")),
        metrics=ControllerMetrics(registry=CollectorRegistry()),
    )
    switch = SwitchWorker(SimpleNamespace(dpid=1), SimpleNamespace(settings=settings))  # type: ignore[arg-type]
    switch.bridge = Bridge("s1", 1, "netdev")
    switch.synced_once = True  # a repair, not the first setup
    monkeypatch.setattr(worker_module, "reconcile_bridge", lambda *_: outcome)
    caplog.set_level(logging.INFO, "flowlane.controller")
    switch._sync_qos()
    return [record.getMessage() for record in caplog.records]


def test_queues_set_on_a_port_whose_filters_held_name_only_the_queues(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    lines = repaired(monkeypatch, caplog, QosOutcome(changed_ports=["s1-eth1", "s1-eth2"]))
    assert lines == ["switch 0000000000000001: queues set on s1-eth1, s1-eth2"]


def test_filters_set_on_a_port_name_the_port(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    lines = repaired(monkeypatch, caplog, QosOutcome(filtered_ports=["s1-eth3"]))
    assert lines == ["switch 0000000000000001: tc filters set on s1-eth3"]


def test_both_name_their_own_ports(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    outcome = QosOutcome(changed_ports=["s1-eth1"], filtered_ports=["s1-eth1", "s1-eth2"])
    lines = repaired(monkeypatch, caplog, outcome)
    assert lines == [
        "switch 0000000000000001: queues set on s1-eth1; tc filters set on s1-eth1, s1-eth2"
    ]
    assert not any(line.endswith(" -") or " - " in line for line in lines)
