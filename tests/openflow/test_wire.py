"""Cached encodings are os-ken's bytes for the same entry; the xid is written into a copy."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofproto
from os_ken.ofproto import ofproto_v1_3_parser as parser

from controller.openflow import messages, wire
from controller.openflow.framing import with_xid
from controller.openflow.osken_internals import DATAPATH, encode
from controller.pipeline.planner import plan_switch
from controller.policy.load import load_policy_file

REPO = Path(__file__).resolve().parents[2]
PORTS = {"s1-eth1": 1, "s1-eth2": 2}


def decoded(raw: bytes) -> Any:
    """A flow-mod read back from its bytes, as the switch reads it."""
    version, kind, length, xid = struct.unpack_from("!BBHI", raw)
    assert (kind, length) == (ofproto.OFPT_FLOW_MOD, len(raw))
    return parser.OFPFlowMod.parser(DATAPATH, version, kind, length, xid, raw)


def test_a_cached_flow_add_is_the_flow_mod_os_ken_builds() -> None:
    policy = load_policy_file(REPO / "policies" / "default.yaml")
    for flow in plan_switch(policy, PORTS).flows:
        raw = wire.flow_add(flow)
        assert raw == encode(messages.flow_add(DATAPATH, flow))
        mod = decoded(raw)
        assert mod.command == ofproto.OFPFC_ADD
        assert (mod.cookie, mod.priority, mod.table_id) == (
            flow.cookie,
            flow.priority,
            flow.table_id,
        )
        assert messages.decode_match(mod.match) == flow.match


def test_a_cached_delete_is_strict_on_the_key() -> None:
    policy = load_policy_file(REPO / "policies" / "default.yaml")
    flow = plan_switch(policy, PORTS).flows[-1]
    mod = decoded(wire.flow_delete(flow.key))
    assert mod.command == ofproto.OFPFC_DELETE_STRICT
    assert (mod.table_id, mod.priority) == (flow.table_id, flow.priority)
    assert messages.decode_match(mod.match) == flow.match


def test_an_entry_is_encoded_once() -> None:
    policy = load_policy_file(REPO / "policies" / "default.yaml")
    flow = plan_switch(policy, PORTS).flows[0]
    assert wire.flow_add(flow) is wire.flow_add(flow)


def test_the_xid_is_written_into_a_copy() -> None:
    policy = load_policy_file(REPO / "policies" / "default.yaml")
    raw = wire.flow_add(plan_switch(policy, PORTS).flows[0])
    stamped = with_xid(raw, 0xDEADBEEF)
    assert struct.unpack_from("!I", stamped, 4) == (0xDEADBEEF,)
    assert stamped[:4] == raw[:4] and stamped[8:] == raw[8:]
    assert struct.unpack_from("!I", raw, 4) == (0,)  # the cached encoding is untouched
