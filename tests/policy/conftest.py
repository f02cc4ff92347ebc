"""Shared fixtures for the policy tests: a small valid document to break one field at a time."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
POLICIES = REPO / "policies"

_BASE_DOCUMENT: dict[str, Any] = {
    "classes": {
        "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
        "training": {"priority": 1, "dscp": 26, "min_rate": "70%"},
        "best-effort": {"priority": 2, "dscp": 0, "min_rate": "10%"},
    },
    "default_class": "inference",
    "rules": [
        {"name": "rocev2", "match": {"ip_proto": "udp", "udp_dst": 4791}, "class": "training"},
        {"name": "triton", "match": {"tcp_dst": [8000, 8001]}, "class": "inference"},
        {"name": "ssh", "match": {"tcp_dst": 22}, "class": "best-effort"},
    ],
    "ports": {"rate": "10Gbit", "overrides": {"s1-eth4": "1Gbit"}},
}


@pytest.fixture
def document() -> dict[str, Any]:
    """A fresh, valid policy document each test may mutate."""
    return copy.deepcopy(_BASE_DOCUMENT)


@pytest.fixture
def default_policy_path() -> Path:
    return POLICIES / "default.yaml"


@pytest.fixture
def write_file(tmp_path: Path) -> Callable[[str | bytes], Path]:
    def write(content: str | bytes) -> Path:
        path = tmp_path / "policy.yaml"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path

    return write
