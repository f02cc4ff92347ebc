"""How big a policy or a job may grow once expanded into OpenFlow entries. Pure.

A document is small; what it expands to need not be: 4096 rules with
512-port lists are 10 MB of JSON and 8.4 million entries per switch, and
one 64-endpoint job with 256-port lists is 4.2 million. Either would take
a switch minutes to install and the controller gigabytes to plan, so
validation counts the entries first and refuses, with the count and the
limit, what no fabric needs. The counts are upper bounds of what the
planner installs (it drops duplicates; it never adds to these).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Protocol

from controller.policy.match import MatchSpec, port_prefixes

MAX_POLICY_ENTRIES: Final = 65_536
"""Classification entries one policy's rules may expand to on one switch."""
MAX_JOB_ENTRIES: Final = 16_384
"""Classification entries one job may expand to on one switch."""
MAX_JOB_QUEUES: Final = 8
"""Job queues of one ``share: per-job`` class on a port; beyond it jobs share queues.
Why 8: ``controller.qos.shares``."""
DSCP_VALUES: Final = 64
"""Code points of the 6-bit DSCP field: one per class and one per job queue."""


class RuleLike(Protocol):
    @property
    def match(self) -> MatchSpec: ...
    @property
    def bidirectional(self) -> bool: ...


def rule_entries(rules: Iterable[RuleLike]) -> int:
    """Entries the rules cost on a switch: each match, and its mirror when two-way."""
    return sum(
        rule.match.flow_count * (2 if rule.bidirectional and rule.match.in_port is None else 1)
        for rule in rules
    )


def job_entries(ports_of_endpoints: Iterable[tuple[tuple[int, int], ...] | None]) -> int:
    """Entries a job costs on a switch, from each endpoint's port ranges (None: any port).

    Every (source, target) pair gets TCP and UDP matches: per port prefix of
    the target and mirrored when the target names ports, otherwise one per
    protocol plus one for any other IP traffic.
    """
    per_target = [
        2 * 2 * len(port_prefixes(ports)) if ports is not None else 3
        for ports in ports_of_endpoints
    ]
    return len(per_target) * sum(per_target)
