"""Policies built in code for the pipeline tests, and the shipped default policy."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import pytest

from controller.policy.load import load_policy_file, parse_policy
from controller.policy.model import Policy

POLICIES = Path(__file__).resolve().parents[2] / "policies"

# Queue numbers follow document order: inference 0, training 1, best-effort 2.
CLASSES: dict[str, dict[str, Any]] = {
    "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
    "training": {"priority": 1, "dscp": 26, "min_rate": "70%"},
    "best-effort": {"priority": 2, "dscp": 0, "min_rate": "10%"},
}


class MakePolicy(Protocol):
    def __call__(
        self,
        rules: list[dict[str, Any]],
        *,
        default_class: str = ...,
        classes: Mapping[str, Mapping[str, Any]] | None = ...,
    ) -> Policy: ...


@pytest.fixture
def make_policy() -> MakePolicy:
    """Build a validated policy from rule dicts, as an operator would write them in YAML."""

    def make(
        rules: list[dict[str, Any]],
        *,
        default_class: str = "best-effort",
        classes: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> Policy:
        document = {
            "classes": copy.deepcopy(dict(classes if classes is not None else CLASSES)),
            "default_class": default_class,
            "rules": copy.deepcopy(rules),
        }
        return parse_policy(document, source="test")

    return make


@pytest.fixture
def default_policy() -> Policy:
    return load_policy_file(POLICIES / "default.yaml")


@pytest.fixture
def class_of() -> Callable[[Policy, int], str]:
    """The class a packet was put in, read back from the metadata the classifier wrote."""

    def name(policy: Policy, metadata: int) -> str:
        index = (metadata & 0xFF) - 1
        assert 0 <= index < len(policy.class_names), f"unclassified metadata {metadata:#x}"
        return policy.class_names[index]

    return name
