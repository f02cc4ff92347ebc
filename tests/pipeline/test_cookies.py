"""Content cookies: tagged, owned, deterministic, and changing only with the content."""

from __future__ import annotations

from typing import Any

from controller.pipeline import tables
from controller.pipeline.flows import (
    COOKIE_TAG,
    ApplyActions,
    FlowEntry,
    GotoTable,
    Owner,
    SetField,
    cookie_owner,
    make_match,
)
from controller.pipeline.planner import plan_switch
from controller.policy.model import Policy

RULES = [
    {"name": "roce", "match": {"udp_dst": 4791}, "class": "training"},
    {"name": "triton", "match": {"tcp_dst": [8000, 8001]}, "class": "inference"},
    {"name": "ssh", "match": {"tcp_dst": 22}, "class": "best-effort"},
]


def test_every_cookie_is_tagged_and_names_its_owner(default_policy: Policy) -> None:
    flows = plan_switch(default_policy, {}).flows
    assert flows
    for flow in flows:
        assert flow.cookie >> 56 == COOKIE_TAG == 0xF1
        assert 0 <= flow.cookie < 2**64
        assert cookie_owner(flow.cookie) is flow.owner
    owners: dict[int, set[Owner]] = {flow.table_id: set() for flow in flows}
    for flow in flows:
        owners[flow.table_id].add(flow.owner)
    assert owners == {
        tables.CLASSIFY: {Owner.POLICY},
        tables.MARK: {Owner.PIPELINE},
        tables.FORWARD: {Owner.FORWARDING},
    }
    assert len({flow.cookie for flow in flows}) == len(flows)


def test_cookie_owner_rejects_foreign_cookies() -> None:
    assert cookie_owner(0) is None
    assert cookie_owner(0xF0 << 56 | 2 << 48) is None
    assert cookie_owner(0xF1 << 56 | 0x7F << 48 | 123) is None
    assert cookie_owner(0xF1 << 56 | 0 << 48) is None
    assert cookie_owner(0xF1 << 56 | 2 << 48 | 0xFFFF_FFFF_FFFF) is Owner.POLICY
    assert cookie_owner(0xF1 << 56 | 3 << 48) is Owner.FORWARDING


def test_cookie_depends_on_content_and_owner() -> None:
    base = FlowEntry(0, 5, make_match(), (GotoTable(1),), Owner.POLICY)
    same = FlowEntry(0, 5, make_match(), (GotoTable(1),), Owner.POLICY)
    assert base.cookie == same.cookie
    variants = [
        FlowEntry(0, 6, make_match(), (GotoTable(1),), Owner.POLICY),
        FlowEntry(0, 5, make_match(), (GotoTable(2),), Owner.POLICY),
        FlowEntry(0, 5, make_match(), (ApplyActions((SetField("ip_dscp", 1),)),), Owner.POLICY),
        FlowEntry(0, 5, make_match(), (GotoTable(1),), Owner.PIPELINE),
    ]
    assert len({base.cookie, *(v.cookie for v in variants)}) == 1 + len(variants)
    assert cookie_owner(variants[-1].cookie) is Owner.PIPELINE


def test_planning_twice_gives_identical_flows(make_policy: Any, default_policy: Policy) -> None:
    for policy in (default_policy, make_policy(RULES)):
        first = plan_switch(policy, {"s1-eth1": 1})
        second = plan_switch(policy, {"s1-eth1": 1})
        assert first == second
        assert [f.cookie for f in first.flows] == [f.cookie for f in second.flows]
    # and a policy parsed again from the same document plans the same
    assert plan_switch(make_policy(RULES), {}) == plan_switch(make_policy(RULES), {})


def test_changing_one_dscp_changes_only_that_class_marking(make_policy: Any) -> None:
    before = plan_switch(make_policy(RULES), {}).flows
    classes = {
        "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
        "training": {"priority": 1, "dscp": 34, "min_rate": "70%"},
        "best-effort": {"priority": 2, "dscp": 0, "min_rate": "10%"},
    }
    after = plan_switch(make_policy(RULES, classes=classes), {}).flows
    assert [f.key for f in before] == [f.key for f in after]
    changed = [(old, new) for old, new in zip(before, after, strict=True) if old != new]
    assert len(changed) == 2  # the IPv4 and IPv6 marking entries of training
    training_metadata = tables.class_metadata(1)
    for old, new in changed:
        assert old.table_id == new.table_id == tables.MARK
        assert old.priority == tables.MARK_IP_PRIORITY
        metadata = {f.value for f in old.match if f.name == "metadata"}
        assert metadata == {training_metadata}
        assert old.cookie != new.cookie
        (apply, _goto) = new.instructions
        assert isinstance(apply, ApplyActions)
        assert SetField("ip_dscp", 34) in apply.actions
    unchanged = [old for old, new in zip(before, after, strict=True) if old == new]
    assert all(o.cookie == n.cookie for o, n in zip(before, after, strict=True) if o == n)
    assert len(unchanged) == len(before) - 2
