"""What parsed of an invalid policy: the cross-field checks read it as they read a valid one."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from controller.policy.checks import cross_field_errors, semantic_errors
from controller.policy.model import Policy, PortRates, Rule, TrafficClass
from controller.policy.parts import ClassParts, RuleParts, document_parts, policy_parts
from controller.policy.units import AbsoluteRate, parse_rate

POLICIES = Path(__file__).resolve().parents[2] / "policies"
POLICY_FILES = sorted(POLICIES.rglob("*.yaml"))


@pytest.mark.parametrize("model", [Policy, TrafficClass, Rule, PortRates])
def test_field_by_field_models_check_everything_in_their_field_types(
    model: type[BaseModel],
) -> None:
    """``valid_fields`` checks each field's type alone: a validator of the model itself would
    be skipped, and a value it rejects would then be judged as if valid."""
    decorators = model.__pydantic_decorators__
    assert not decorators.field_validators
    assert not decorators.model_validators


@pytest.mark.parametrize("path", POLICY_FILES, ids=lambda p: str(p.relative_to(POLICIES)))
def test_a_valid_document_reads_the_same_either_way(path: Path) -> None:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert document_parts(document) == policy_parts(Policy.model_validate(document))


def test_cross_field_errors_are_the_same_either_way(document: dict[str, Any]) -> None:
    """A structurally valid document with every kind of cross-field error."""
    document["default_class"] = "bulk"
    document["rules"][1]["class"] = "bulk"
    document["rules"][2]["name"] = "triton"
    document["classes"]["best-effort"]["dscp"] = 46
    document["classes"]["training"]["max_rate"] = "1Gbit"
    document["tenants"] = {"a": {"networks": ["10.0.0.0/8"]}, "b": {"networks": ["10.1.0.0/16"]}}
    document["detection"] = {"elephant": {"class": "elephants"}}
    document["forwarding"] = {"mode": "fabric", "placement": {"classes": ["gold"]}}
    errors = semantic_errors(Policy.model_validate(document))
    assert len(errors) == 8
    assert cross_field_errors(document_parts(document)) == errors


def test_what_parsed_of_an_invalid_document(document: dict[str, Any]) -> None:
    broken = copy.deepcopy(document)
    broken["classes"]["training"]["dscp"] = 99
    broken["classes"]["inference"]["min_rate"] = "20 percent"
    broken["classes"]["best-effort"] = "none"
    broken["rules"][0]["match"]["udp_dst"] = 70000
    broken["rules"][1] = {"name": "2bad", "class": "inference", "match": {}}
    broken["ports"]["rate"] = "50%"
    broken["ports"]["overrides"]["s1-eth5"] = "2Gbit"
    broken["default_class"] = 3
    parts = document_parts(broken)
    assert parts.class_names == ("inference", "training", "best-effort")
    assert parts.classes == {
        "inference": ClassParts(dscp=46),
        "training": ClassParts(min_rate=parse_rate("70%")),
        "best-effort": ClassParts(),
    }
    assert parts.default_class is None
    assert parts.rules == {
        0: RuleParts("rocev2", "training"),
        1: RuleParts(None, "inference"),
        2: RuleParts("ssh", "best-effort", Rule.model_validate(document["rules"][2])),
    }
    assert parts.port_rates == {
        "ports.overrides.s1-eth4": AbsoluteRate(1_000_000_000),
        "ports.overrides.s1-eth5": AbsoluteRate(2_000_000_000),
    }


@pytest.mark.parametrize("rules", ["all", None, [1, "x"]])
def test_sections_of_the_wrong_shape_give_nothing(document: dict[str, Any], rules: object) -> None:
    document["rules"] = rules
    document["ports"] = ["10Gbit"]
    document["tenants"] = "everyone"
    parts = document_parts(document)
    assert parts.rules == ({} if not isinstance(rules, list) else {0: RuleParts(), 1: RuleParts()})
    assert parts.port_rates == {}
    assert parts.tenants == {}


def test_detection_known(document: dict[str, Any]) -> None:
    assert document_parts(document).detection_known
    document["detection"] = None
    assert document_parts(document).detection_known
    document["detection"] = {"elephant": {}}
    assert not document_parts(document).detection_known


def test_a_rule_written_with_field_names_is_read_too(document: dict[str, Any]) -> None:
    """``Rule`` accepts ``traffic_class`` for ``class``: a broken rule's class is read so too."""
    document["rules"][0] = {"name": "roce", "match": {"udp_dst": -1}, "traffic_class": "gold"}
    assert document_parts(document).rules[0] == RuleParts("roce", "gold")
