"""Modes: one policy, three ways of running it; only classification and queueing change."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from flowlane_bench.suite.modes import FIFO_CLASS, mode_document, mode_policy, needs_rstp
from flowlane_bench.suite.spec import Mode

from controller.policy.load import load_policy_document, parse_policy
from tests.support.scenarios import SHIPPED_SCENARIOS

REPO = Path(__file__).resolve().parents[2]
POLICY_FILES = sorted((REPO / "policies" / "scenarios").glob("*.yaml"))


@pytest.fixture(params=POLICY_FILES, ids=lambda p: p.stem)
def document(request: pytest.FixtureRequest) -> dict[str, Any]:
    _, document = load_policy_document(request.param)
    return document


def test_the_scenario_policies_are_shipped() -> None:
    assert [p.stem for p in POLICY_FILES] == list(SHIPPED_SCENARIOS)


def test_fifo_is_one_class_without_rules_or_detection(document: dict[str, Any]) -> None:
    original = parse_policy(document)
    policy = mode_policy(document, Mode.FIFO)
    assert policy.class_names == (FIFO_CLASS,) == ("fifo",)
    assert policy.default_class == FIFO_CLASS
    assert list(policy.rules) == []
    assert policy.detection is None
    assert policy.ports == original.ports
    assert policy.ports.overrides  # the bottleneck keeps its rate
    assert set(mode_document(document, Mode.FIFO)) == {"classes", "default_class", "rules", "ports"}


def test_fifo_without_a_ports_section_keeps_the_default_rates(document: dict[str, Any]) -> None:
    bare = {key: value for key, value in document.items() if key != "ports"}
    fifo = mode_document(bare, Mode.FIFO)
    assert "ports" not in fifo
    assert mode_policy(bare, Mode.FIFO).ports == parse_policy(bare).ports


def test_static_drops_detection_only(document: dict[str, Any]) -> None:
    assert "detection" in document  # every scenario policy detects, so static differs
    original = parse_policy(document)
    static_document = mode_document(document, Mode.STATIC)
    dropped = ("detection", "forwarding")
    assert static_document == {k: v for k, v in document.items() if k not in dropped}
    policy = mode_policy(document, Mode.STATIC)
    assert policy.detection is None
    assert policy.classes == original.classes
    assert policy.rules == original.rules
    assert policy.default_class == original.default_class
    assert policy.ports == original.ports


def test_flowlane_is_the_whole_policy(document: dict[str, Any]) -> None:
    assert mode_document(document, Mode.FLOWLANE) == document
    assert mode_policy(document, Mode.FLOWLANE) == parse_policy(document)
    assert mode_policy(document, Mode.FLOWLANE).detection is not None


@pytest.mark.parametrize("mode", list(Mode))
def test_every_mode_parses_back(document: dict[str, Any], mode: Mode) -> None:
    derived = mode_document(document, mode)
    policy = parse_policy(copy.deepcopy(derived), f"{mode} mode")
    assert policy.ports == parse_policy(document).ports
    assert policy == mode_policy(document, mode)


@pytest.mark.parametrize("mode", list(Mode))
def test_deriving_a_mode_leaves_the_document_alone(document: dict[str, Any], mode: Mode) -> None:
    before = copy.deepcopy(document)
    mode_document(document, mode)
    assert document == before
    derived = mode_document(document, mode)
    assert derived is not document


FABRIC_POLICIES = [p for p in POLICY_FILES if p.stem in ("collide", "failover", "leafspine")]


@pytest.fixture(params=FABRIC_POLICIES, ids=lambda p: p.stem)
def fabric_document(request: pytest.FixtureRequest) -> dict[str, Any]:
    _, document = load_policy_document(request.param)
    return document


def test_the_fabric_policies_route_and_place(fabric_document: dict[str, Any]) -> None:
    policy = parse_policy(fabric_document)
    assert policy.forwarding.fabric
    assert policy.forwarding.placement is not None
    assert policy.forwarding.placement_classes(policy.detection) == {"training"}


def test_stp_is_the_whole_policy_forwarded_by_normal(fabric_document: dict[str, Any]) -> None:
    original = parse_policy(fabric_document)
    derived = mode_document(fabric_document, Mode.STP)
    assert derived["forwarding"] == {"mode": "normal"}
    assert {k: v for k, v in derived.items() if k != "forwarding"} == {
        k: v for k, v in fabric_document.items() if k != "forwarding"
    }
    policy = mode_policy(fabric_document, Mode.STP)
    assert not policy.forwarding.fabric
    assert policy.classes == original.classes and policy.rules == original.rules
    assert policy.detection == original.detection and policy.ports == original.ports
    assert needs_rstp(policy, loops=True)


def test_ecmp_routes_without_placement(fabric_document: dict[str, Any]) -> None:
    original = parse_policy(fabric_document)
    policy = mode_policy(fabric_document, Mode.ECMP)
    assert policy.forwarding.fabric
    assert policy.forwarding.placement is None
    assert policy.forwarding.placement_classes(policy.detection) == frozenset()
    # Only placement differs from flowlane: discovery, punt rate, classes and ports stay.
    assert policy.forwarding.discovery == original.forwarding.discovery
    assert policy.forwarding.punt_rate == original.forwarding.punt_rate
    assert policy.classes == original.classes and policy.detection == original.detection
    assert policy.ports == original.ports
    assert not needs_rstp(policy, loops=True)


def test_ecmp_of_a_normal_policy_turns_the_fabric_on(document: dict[str, Any]) -> None:
    bare = {k: v for k, v in document.items() if k != "forwarding"}
    policy = mode_policy(bare, Mode.ECMP)
    assert policy.forwarding.fabric and policy.forwarding.placement is None


def test_ecmp_reads_the_forwarding_shorthand(document: dict[str, Any]) -> None:
    shorthand = {**document, "forwarding": "fabric"}
    assert mode_document(shorthand, Mode.ECMP)["forwarding"] == {
        "mode": "fabric",
        "placement": None,
    }


def test_fifo_and_static_forward_with_normal(fabric_document: dict[str, Any]) -> None:
    for mode in (Mode.FIFO, Mode.STATIC):
        policy = mode_policy(fabric_document, mode)
        assert not policy.forwarding.fabric
        assert needs_rstp(policy, loops=True) and not needs_rstp(policy, loops=False)


def test_flowlane_keeps_the_fabric(fabric_document: dict[str, Any]) -> None:
    policy = mode_policy(fabric_document, Mode.FLOWLANE)
    assert policy.forwarding.fabric and not needs_rstp(policy, loops=True)
