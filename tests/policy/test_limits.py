"""Expansion bounds: the counts are upper bounds of what the planner installs, and tight
enough that what validation refuses is what the planner would have built."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from controller.pipeline.planner import classification_flows, job_flows
from controller.policy.errors import PolicyError
from controller.policy.jobs import JobSpec
from controller.policy.limits import MAX_JOB_ENTRIES, MAX_POLICY_ENTRIES, job_entries, rule_entries
from controller.policy.load import parse_policy

CLASSES: dict[str, Any] = {
    "classes": {
        "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
        "training": {"priority": 1, "dscp": 26, "min_rate": "50%"},
    },
    "default_class": "inference",
}

RULES: list[dict[str, Any]] = [
    {"name": "roce", "match": {"udp_dst": 4791}, "class": "training"},
    {"name": "range", "match": {"tcp_dst": "8000-8100", "tcp_src": [1, 3]}, "class": "training"},
    {
        "name": "oneway",
        "match": {"ipv4_dst": "10.0.0.0/8"},
        "class": "training",
        "bidirectional": False,
    },
    {"name": "port", "match": {"in_port": "s1-eth1", "tcp_dst": [22, 80]}, "class": "training"},
    {"name": "anyip", "match": {"ip_proto": "tcp"}, "class": "training"},
]


def installed_rule_entries(rules: list[dict[str, Any]]) -> tuple[int, int]:
    policy = parse_policy({**CLASSES, "rules": rules})
    flows, unresolved = classification_flows(policy, {"s1-eth1": 1})
    assert unresolved == []
    return rule_entries(policy.rules), len(flows) - 1  # the default-class entry is no rule's


def test_rule_entries_is_what_the_planner_installs() -> None:
    counted, installed = installed_rule_entries(RULES[:-1])
    assert counted == installed
    # A match without addresses or ports is its own mirror: the planner installs it once.
    counted, installed = installed_rule_entries(RULES)
    assert counted == installed + 2


@pytest.mark.parametrize(
    "endpoints",
    [
        [{"ipv4": "10.0.0.1"}, {"ipv4": "10.0.0.2"}],
        [{"ipv4": "10.0.0.1", "ports": [4791]}, {"ipv4": "10.0.0.0/24", "ports": "8000-8100"}],
        [{"ipv4": "10.0.0.1", "ports": [22, 80]}, {"ipv4": "10.0.1.1"}, {"ipv4": "10.0.2.0/24"}],
    ],
)
def test_job_entries_bounds_what_the_planner_installs(endpoints: list[dict[str, Any]]) -> None:
    policy = parse_policy(CLASSES)
    spec = JobSpec.model_validate({"name": "j", "class": "training", "endpoints": endpoints})
    installed = len(job_flows(policy, [spec]))
    counted = job_entries(endpoint.ports for endpoint in spec.endpoints)
    # Equal but for the duplicates the planner drops (a pair of an endpoint with itself).
    assert installed <= counted <= 2 * installed


def test_a_policy_that_expands_beyond_the_limit_is_refused_with_the_count() -> None:
    many_ports = [2 * i + 1 for i in range(512)]  # odd ports: one prefix each
    rules = [
        {"name": f"r{i}", "match": {"tcp_dst": many_ports}, "class": "training"} for i in range(33)
    ]
    with pytest.raises(PolicyError) as caught:
        parse_policy({**CLASSES, "rules": rules})
    expected = 33 * 512 * 2 * 2  # two address families, two directions
    assert f"rules: the rules expand to {expected} OpenFlow entries per switch" in str(caught.value)
    assert f"the limit of {MAX_POLICY_ENTRIES}" in str(caught.value)
    parse_policy({**CLASSES, "rules": rules[:32]})  # 65 536: at the limit, accepted


def test_a_job_that_expands_beyond_the_limit_is_refused_with_the_count() -> None:
    ports = [2 * i + 1 for i in range(256)]
    endpoints = [{"ipv4": f"10.0.0.{i}", "ports": ports} for i in range(1, 9)]
    with pytest.raises(ValidationError) as caught:
        JobSpec.model_validate({"name": "j", "class": "training", "endpoints": endpoints})
    assert f"expand to {8 * 8 * 4 * 256} OpenFlow entries" in str(caught.value)
    assert f"limit of {MAX_JOB_ENTRIES}" in str(caught.value)
    JobSpec.model_validate({"name": "j", "class": "training", "endpoints": endpoints[:4]})
