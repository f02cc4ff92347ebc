"""The policy each mode runs, derived from the scenario's one policy so that only the mode differs.

Modes are derived from the policy *document* (what the operator wrote), so the
file a mode's controller reads is the operator's own text minus what the mode
turns off.  Every mode keeps the policy's port rates: the bottleneck has the
same capacity in all of them; only how traffic is classified and queued
changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.policy.load import parse_policy
from controller.policy.model import Policy
from controller.scenario.spec import Mode

FIFO_CLASS = "fifo"


def mode_document(document: Mapping[str, Any], mode: Mode) -> dict[str, Any]:
    """``fifo``: one class and no rules; ``static``: no detection; ``flowlane``: all of it."""
    if mode is Mode.FIFO:
        fifo: dict[str, Any] = {
            "classes": {FIFO_CLASS: {"priority": 0, "dscp": 0, "min_rate": "100%"}},
            "default_class": FIFO_CLASS,
            "rules": [],
        }
        if "ports" in document:
            fifo["ports"] = document["ports"]
        return fifo
    if mode is Mode.STATIC:
        return {key: value for key, value in document.items() if key != "detection"}
    return dict(document)


def mode_policy(document: Mapping[str, Any], mode: Mode) -> Policy:
    """The validated policy of ``mode``; a scenario's policy is valid, so this one is too."""
    return parse_policy(mode_document(document, mode), f"{mode} mode")
