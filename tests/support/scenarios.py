"""The scenarios the repository ships (``mininet/scenarios/*.yaml``, each with its policy in
``policies/scenarios/``), by name in sorted order: the one list every test of the set compares
against, so that a scenario added or removed is one edit here."""

from __future__ import annotations

from typing import Final

SHIPPED_SCENARIOS: Final = (
    "allreduce",
    "collide",
    "failover",
    "incast",
    "isolation",
    "jobs-fabric",
    "jobs-share",
    "jobs-weights",
    "leafspine",
)
