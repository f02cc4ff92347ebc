"""Planner flows survive the trip through os-ken's OpenFlow 1.3 encoding unchanged.

The diff compares what the planner wants with what a switch reports; that
only works if a match encoded by us and decoded from a reply is the same
canonical value.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from os_ken.ofproto import ofproto_v1_3 as ofproto
from os_ken.ofproto import ofproto_v1_3_parser as parser

from controller.openflow import messages
from controller.pipeline.planner import plan_switch
from controller.policy.load import load_policy_file

REPO = Path(__file__).resolve().parents[2]


def fake_datapath() -> SimpleNamespace:
    return SimpleNamespace(ofproto=ofproto, ofproto_parser=parser, id=1)


def roundtrip_match(match: object) -> object:
    buffer = bytearray()
    match.serialize(buffer, 0)  # type: ignore[attr-defined]
    return parser.OFPMatch.parser(bytes(buffer), 0)


def test_every_planned_match_decodes_to_itself() -> None:
    for policy_file in sorted((REPO / "policies").rglob("*.yaml")):
        policy = load_policy_file(policy_file)
        for flow in plan_switch(policy, {"s1-eth1": 1}).flows:
            encoded = messages.ofp_match(parser, flow.match)
            assert messages.decode_match(roundtrip_match(encoded)) == flow.match, flow


def test_flow_add_carries_cookie_priority_table_and_instructions() -> None:
    policy = load_policy_file(REPO / "policies" / "default.yaml")
    datapath = fake_datapath()
    for flow in plan_switch(policy, {}).flows:
        mod = messages.flow_add(datapath, flow)
        assert mod.command == ofproto.OFPFC_ADD
        assert (mod.cookie, mod.priority, mod.table_id) == (
            flow.cookie,
            flow.priority,
            flow.table_id,
        )
        assert len(mod.instructions) == len(flow.instructions)
        mod.serialize()  # raises if os-ken cannot encode what we built


def test_marking_flows_set_dscp_and_queue() -> None:
    policy = load_policy_file(REPO / "policies" / "default.yaml")
    marks = [flow for flow in plan_switch(policy, {}).flows if flow.table_id == 1]
    mod = messages.flow_add(fake_datapath(), marks[0])
    actions = mod.instructions[0].actions
    assert isinstance(actions[0], parser.OFPActionSetField)
    assert actions[0].key == "ip_dscp" and actions[0].value == 46
    assert isinstance(actions[1], parser.OFPActionSetQueue) and actions[1].queue_id == 0


def test_delete_is_strict_on_the_same_key() -> None:
    policy = load_policy_file(REPO / "policies" / "default.yaml")
    flow = plan_switch(policy, {}).flows[0]
    mod = messages.flow_delete(fake_datapath(), flow.key)
    assert mod.command == ofproto.OFPFC_DELETE_STRICT
    assert (mod.table_id, mod.priority) == (flow.table_id, flow.priority)
    assert messages.decode_match(roundtrip_match(mod.match)) == flow.match


def test_installed_flow_from_stats_reply() -> None:
    policy = load_policy_file(REPO / "policies" / "default.yaml")
    flow = plan_switch(policy, {}).flows[3]
    stats = SimpleNamespace(
        table_id=flow.table_id,
        priority=flow.priority,
        cookie=flow.cookie,
        match=roundtrip_match(messages.ofp_match(parser, flow.match)),
    )
    installed = messages.installed_flow(stats)
    assert installed.key == flow.key and installed.cookie == flow.cookie
