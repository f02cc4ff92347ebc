"""The ``forwarding`` policy section, through the loader as operators meet it."""

from __future__ import annotations

from typing import Any

import pytest

from controller.policy.errors import PolicyError
from controller.policy.forwarding import ForwardingMode, ForwardingSpec
from controller.policy.load import parse_policy, parse_policy_yaml
from controller.policy.model import Policy
from controller.policy.units import AbsoluteRate

DETECTION: dict[str, Any] = {
    "interval": "500ms",
    "elephant": {"bytes": "10MiB", "class": "training"},
}


def with_forwarding(
    document: dict[str, Any], forwarding: object, detection: bool = True
) -> dict[str, Any]:
    document["forwarding"] = forwarding
    if detection:
        document["detection"] = dict(DETECTION)
    return document


def errors(document: dict[str, Any]) -> dict[str, str]:
    """Path → message of every error the loader reports."""
    with pytest.raises(PolicyError) as info:
        parse_policy(document, source="test")
    return {error.path: error.message for error in info.value.errors}


# --------------------------------------------------------------------------------------------
# Accepted
# --------------------------------------------------------------------------------------------


def test_forwarding_defaults_to_normal(document: dict[str, Any]) -> None:
    policy = parse_policy(document)
    assert policy.forwarding.mode is ForwardingMode.NORMAL
    assert not policy.forwarding.fabric
    assert policy.forwarding == ForwardingSpec()


def test_fabric_shorthand_is_fabric_with_every_default(document: dict[str, Any]) -> None:
    policy = parse_policy(with_forwarding(document, "fabric"))
    spec = policy.forwarding
    assert spec.fabric
    assert spec == ForwardingSpec(mode=ForwardingMode.FABRIC)
    assert spec.punt_rate == 1000
    assert (spec.discovery.lldp_interval, spec.discovery.link_timeout) == (1.0, 3.5)
    assert spec.placement is not None
    assert spec.placement.classes == []
    assert spec.placement.min_rate == AbsoluteRate(1_000_000)


def test_a_full_section_in_yaml() -> None:
    policy = parse_policy_yaml(
        """
classes:
  inference: {priority: 0, dscp: 46, min_rate: 20%}
  training: {priority: 1, dscp: 26, min_rate: 70%}
default_class: inference
detection:
  elephant: {bytes: 10MiB, class: training}
forwarding:
  mode: fabric
  punt_rate: 200
  discovery: {lldp_interval: 500ms, link_timeout: 1s}
  placement: {classes: [training, inference], min_rate: 5Mbit, interval: 1s, hold: 10s}
"""
    )
    spec = policy.forwarding
    assert spec.fabric
    assert spec.punt_rate == 200
    assert (spec.discovery.lldp_interval, spec.discovery.link_timeout) == (0.5, 1.0)
    assert spec.placement is not None
    assert spec.placement.min_rate == AbsoluteRate(5_000_000)
    assert (spec.placement.interval, spec.placement.hold) == (1.0, 10.0)
    assert spec.placement_classes(policy.detection) == {"training", "inference"}


def test_placement_null_is_accepted_and_places_nothing(document: dict[str, Any]) -> None:
    policy = parse_policy(with_forwarding(document, {"mode": "fabric", "placement": None}))
    assert policy.forwarding.fabric
    assert policy.forwarding.placement is None
    assert policy.forwarding.placement_classes(policy.detection) == frozenset()


def test_placement_null_needs_no_detection(document: dict[str, Any]) -> None:
    forwarding = {"mode": "fabric", "placement": None}
    policy = parse_policy(with_forwarding(document, forwarding, detection=False))
    assert policy.detection is None
    assert policy.forwarding.placement is None


def test_link_timeout_of_exactly_two_intervals_is_accepted(document: dict[str, Any]) -> None:
    forwarding = {"mode": "fabric", "discovery": {"lldp_interval": "1s", "link_timeout": "2s"}}
    policy = parse_policy(with_forwarding(document, forwarding))
    assert policy.forwarding.discovery.link_timeout == 2.0


@pytest.mark.parametrize("rate", [10, 100_000])
def test_punt_rate_bounds_are_inclusive(document: dict[str, Any], rate: int) -> None:
    policy = parse_policy(with_forwarding(document, {"mode": "fabric", "punt_rate": rate}))
    assert policy.forwarding.punt_rate == rate


# --------------------------------------------------------------------------------------------
# Rejected
# --------------------------------------------------------------------------------------------


def test_an_unknown_mode_is_rejected_naming_the_mode(document: dict[str, Any]) -> None:
    found = errors(with_forwarding(document, {"mode": "spanning-tree"}))
    assert list(found) == ["forwarding.mode"]
    assert "normal" in found["forwarding.mode"] and "fabric" in found["forwarding.mode"]


def test_an_unknown_shorthand_is_rejected_naming_the_mode(document: dict[str, Any]) -> None:
    assert list(errors(with_forwarding(document, "ecmp"))) == ["forwarding.mode"]


def test_an_unknown_key_is_rejected(document: dict[str, Any]) -> None:
    found = errors(with_forwarding(document, {"mode": "fabric", "stp": True}))
    assert list(found) == ["forwarding.stp"]


def test_placement_classes_must_exist(document: dict[str, Any]) -> None:
    forwarding = {"mode": "fabric", "placement": {"classes": ["bulk", "training"]}}
    found = errors(with_forwarding(document, forwarding))
    assert list(found) == ["forwarding.placement.classes[0]"]
    message = found["forwarding.placement.classes[0]"]
    assert "'bulk'" in message
    assert "inference, training, best-effort" in message


def test_explicit_placement_classes_need_a_detection_section(document: dict[str, Any]) -> None:
    forwarding = {"mode": "fabric", "placement": {"classes": ["training"]}}
    found = errors(with_forwarding(document, forwarding, detection=False))
    assert list(found) == ["forwarding.placement"]
    message = found["forwarding.placement"]
    assert "detection" in message
    assert "placement: null" in message  # says what to write instead


def test_placement_classes_are_not_checked_in_normal_mode(document: dict[str, Any]) -> None:
    """Placement only applies to a fabric; a normal policy may keep a section for later."""
    forwarding = {"mode": "normal", "placement": {"classes": ["bulk"]}}
    policy = parse_policy(with_forwarding(document, forwarding, detection=False))
    assert policy.forwarding.placement_classes(policy.detection) == frozenset()


@pytest.mark.parametrize(
    ("interval", "timeout"), [("1s", "1.9s"), ("500ms", "900ms"), ("2s", "3.5s")]
)
def test_a_link_timeout_under_two_intervals_is_rejected(
    document: dict[str, Any], interval: str, timeout: str
) -> None:
    forwarding = {
        "mode": "fabric",
        "discovery": {"lldp_interval": interval, "link_timeout": timeout},
    }
    found = errors(with_forwarding(document, forwarding))
    assert list(found) == ["forwarding.discovery"]
    assert "link_timeout must be at least twice lldp_interval" in found["forwarding.discovery"]


@pytest.mark.parametrize("rate", [0, 9, 100_001])
def test_punt_rate_out_of_bounds_is_rejected(document: dict[str, Any], rate: int) -> None:
    found = errors(with_forwarding(document, {"mode": "fabric", "punt_rate": rate}))
    assert list(found) == ["forwarding.punt_rate"]


def test_every_forwarding_error_is_reported_at_once(document: dict[str, Any]) -> None:
    forwarding = {
        "mode": "fabric",
        "punt_rate": 1,
        "discovery": {"lldp_interval": "1s", "link_timeout": "1s"},
    }
    found = errors(with_forwarding(document, forwarding))
    assert set(found) == {"forwarding.punt_rate", "forwarding.discovery"}


# --------------------------------------------------------------------------------------------
# placement_classes
# --------------------------------------------------------------------------------------------


def placed(document: dict[str, Any], forwarding: object, detection: bool = True) -> frozenset[str]:
    policy: Policy = parse_policy(with_forwarding(document, forwarding, detection))
    return policy.forwarding.placement_classes(policy.detection)


def test_placement_classes_default_to_the_elephant_class(document: dict[str, Any]) -> None:
    assert placed(document, "fabric") == {"training"}


def test_placement_classes_follow_the_elephant_class(document: dict[str, Any]) -> None:
    document["detection"] = {"elephant": {"bytes": "1MiB", "class": "best-effort"}}
    document["forwarding"] = "fabric"
    policy = parse_policy(document)
    assert policy.forwarding.placement_classes(policy.detection) == {"best-effort"}


def test_explicit_placement_classes_win_over_the_elephant_class(
    document: dict[str, Any],
) -> None:
    forwarding = {"mode": "fabric", "placement": {"classes": ["best-effort"]}}
    assert placed(document, forwarding) == {"best-effort"}


def test_no_placement_classes_in_normal_mode(document: dict[str, Any]) -> None:
    assert placed(document, "normal") == frozenset()
    assert placed(document, {}) == frozenset()


def test_no_placement_classes_with_placement_null(document: dict[str, Any]) -> None:
    assert placed(document, {"mode": "fabric", "placement": None}) == frozenset()


def test_no_placement_classes_without_detection_by_default(document: dict[str, Any]) -> None:
    assert placed(document, "fabric", detection=False) == frozenset()
