"""Re-planning after a one-rule change: unchanged rules' entries come from the cache, and the
cache never gives an entry that a fresh build would not."""

from __future__ import annotations

from typing import Any

import pytest

from controller.pipeline import planner
from controller.pipeline.flows import Learn
from controller.pipeline.planner import BasePlans, plan_switch
from controller.policy.load import parse_policy
from controller.policy.model import Policy
from tests.pipeline.conftest import MakePolicy

PORTS = {"s1-eth1": 1, "s1-eth2": 2}


def _rules(flipped: int | None = None) -> list[dict[str, Any]]:
    rules = []
    for index in range(20):
        training = (index % 2 == 0) != (index == flipped)
        rules.append(
            {
                "name": f"service-{index}",
                "match": {"tcp_dst": 10_000 + index},
                "class": "training" if training else "inference",
            }
        )
    rules.append({"name": "uplink", "match": {"in_port": "s1-eth2"}, "class": "best-effort"})
    return rules


def _fresh(policy: Policy) -> list[Any]:
    """The plan built with the rule cache emptied first."""
    planner._rule_flows.cache_clear()
    return list(plan_switch(policy, PORTS).flows)


def test_a_one_rule_change_rebuilds_only_that_rule(make_policy: MakePolicy) -> None:
    before = plan_switch(make_policy(_rules()), PORTS).flows
    after = plan_switch(make_policy(_rules(flipped=3)), PORTS).flows
    old = {flow.key: flow for flow in before}
    rule_entries = [flow for flow in after if _dst(flow) is not None or _src(flow) is not None]
    rebuilt = [flow for flow in rule_entries if old[flow.key] is not flow]
    # Rule 3's entries (tcp_dst 10003 over IPv4 and IPv6, and their replies) are new, with new
    # instructions; every other rule's are the very objects of the first plan.
    assert len(rebuilt) == 4
    assert all(old[flow.key].cookie != flow.cookie for flow in rebuilt)
    assert {_dst(flow) or _src(flow) for flow in rebuilt} == {10_003}
    assert len(rule_entries) == 20 * 4


def test_cached_plans_equal_fresh_ones(make_policy: MakePolicy) -> None:
    for flipped in (None, 0, 7, None):
        policy = make_policy(_rules(flipped))
        cached = list(plan_switch(policy, PORTS).flows)
        assert cached == _fresh(policy)
        assert [flow.cookie for flow in cached] == [flow.cookie for flow in _fresh(policy)]


def test_a_rule_moved_to_another_place_gets_that_places_priority(make_policy: MakePolicy) -> None:
    rules = _rules()
    policy = make_policy(rules)
    moved = make_policy([rules[1], rules[0], *rules[2:]])
    first = {f.priority for f in plan_switch(policy, PORTS).flows if _dst(f) == 10_000}
    second = {f.priority for f in plan_switch(moved, PORTS).flows if _dst(f) == 10_000}
    assert len(first) == len(second) == 1 and first != second


def test_a_named_port_resolves_per_switch(make_policy: MakePolicy) -> None:
    policy = make_policy(_rules())
    on_two = [f for f in plan_switch(policy, PORTS).flows if _in_port(f) is not None]
    on_seven = [f for f in plan_switch(policy, {"s1-eth2": 7}).flows if _in_port(f) is not None]
    assert {_in_port(f) for f in on_two} == {2}
    assert {_in_port(f) for f in on_seven} == {7}
    assert "uplink" in plan_switch(policy, {"s1-eth1": 1}).unresolved_rules


def test_detection_timeout_is_part_of_the_entry() -> None:
    def policy(release_after: str) -> Policy:
        return parse_policy(
            {
                "classes": {
                    "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
                    "training": {"priority": 1, "dscp": 26, "min_rate": "70%"},
                },
                "default_class": "inference",
                "rules": [{"name": "svc", "match": {"tcp_dst": 10_000}, "class": "training"}],
                "detection": {
                    "elephant": {"bytes": "10MiB", "class": "training"},
                    "release_after": release_after,
                },
            }
        )

    short = {f.key: f for f in plan_switch(policy("10s"), PORTS).flows if _dst(f) == 10_000}
    long = {f.key: f for f in plan_switch(policy("30s"), PORTS).flows if _dst(f) == 10_000}
    assert short.keys() == long.keys() and short
    for key, flow in short.items():
        assert flow.cookie != long[key].cookie
        assert _idle(flow) == 10 and _idle(long[key]) == 30


def _idle(flow: Any) -> int | None:
    for instruction in flow.instructions:
        for action in getattr(instruction, "actions", ()):
            if isinstance(action, Learn):
                return action.idle_timeout
    return None


def _dst(flow: Any) -> int | None:
    return next((f.value for f in flow.match if f.name == "tcp_dst"), None)


def _src(flow: Any) -> int | None:
    return next((f.value for f in flow.match if f.name == "tcp_src"), None)


def _in_port(flow: Any) -> int | None:
    return next((f.value for f in flow.match if f.name == "in_port"), None)


def test_switches_whose_named_ports_match_share_one_base_plan(make_policy: MakePolicy) -> None:
    policy = make_policy(_rules())
    plans = BasePlans(policy)
    one = plans.plan({"s1-eth1": 1, "s1-eth2": 2})
    # Another switch, another unnamed port: the same plan object.
    assert plans.plan({"s1-eth2": 2, "s1-eth9": 9}) is one
    # The named port has another number: another plan, equal to the one built from scratch.
    other = plans.plan({"s1-eth2": 7})
    assert other is not one
    assert list(other.flows) == list(plan_switch(policy, {"s1-eth2": 7}).flows)
    assert plans.plan({"s1-eth1": 1}).unresolved_rules == ("uplink",)
    assert plan_switch(policy, PORTS, base_plans=plans) == plan_switch(policy, PORTS)


def test_base_plans_refuse_another_policy(make_policy: MakePolicy) -> None:
    plans = BasePlans(make_policy(_rules()))
    with pytest.raises(ValueError, match="another policy"):
        plan_switch(make_policy(_rules(flipped=1)), PORTS, base_plans=plans)
