"""Planner flows survive the trip through os-ken's OpenFlow 1.3 encoding unchanged.

The diff compares what the planner wants with what a switch reports; that
only works if a match encoded by us and decoded from a reply is the same
canonical value.
"""

from __future__ import annotations

import struct
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from os_ken import utils
from os_ken.ofproto import ofproto_v1_3 as ofproto
from os_ken.ofproto import ofproto_v1_3_parser as parser

from controller.openflow import messages
from controller.openflow.osken_internals import CodecDatapath
from controller.pipeline import tables
from controller.pipeline.flows import (
    ApplyActions,
    FlowEntry,
    GotoTable,
    Group,
    MatchField,
    Meter,
    Output,
    Owner,
    SetField,
    make_match,
)
from controller.pipeline.groups import Bucket, GroupEntry, GroupType, MeterEntry, diff_groups
from controller.pipeline.planner import plan_switch
from controller.policy.load import load_policy_file

REPO = Path(__file__).resolve().parents[2]


def fake_datapath() -> CodecDatapath:
    return CodecDatapath(1)


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


# ---- groups, meters, packets (fabric forwarding) ---------------------------------


def wire(msg: object) -> bytes:
    """The bytes os-ken sends for ``msg``."""
    msg.serialize()  # type: ignore[attr-defined]
    return bytes(msg.buf)  # type: ignore[attr-defined]


def read_list(item_parser: Any, buf: bytes, offset: int) -> list[Any]:
    """A switch's reading of a list of buckets, actions, instructions or bands."""
    items = []
    while offset < len(buf):
        item = item_parser(buf, offset)
        items.append(item)
        offset += item.len
    return items


def reparse(msg: object) -> SimpleNamespace:
    """Read ``msg`` back from its bytes as a switch would (os-ken parses only what switches
    send, so the fixed parts are unpacked here and the lists with os-ken's own parsers)."""
    buf = wire(msg)
    body = ofproto.OFP_HEADER_SIZE
    if isinstance(msg, parser.OFPGroupMod):
        command, type_, group_id = struct.unpack_from(ofproto.OFP_GROUP_MOD_PACK_STR, buf, body)
        buckets = read_list(parser.OFPBucket.parser, buf, ofproto.OFP_GROUP_MOD_SIZE)
        return SimpleNamespace(command=command, type=type_, group_id=group_id, buckets=buckets)
    if isinstance(msg, parser.OFPMeterMod):
        command, flags, meter_id = struct.unpack_from(ofproto.OFP_METER_MOD_PACK_STR, buf, body)
        bands = read_list(parser.OFPMeterBandHeader.parser, buf, ofproto.OFP_METER_MOD_SIZE)
        return SimpleNamespace(command=command, flags=flags, meter_id=meter_id, bands=bands)
    if isinstance(msg, parser.OFPPacketOut):
        buffer_id, in_port, actions_len = struct.unpack_from(
            ofproto.OFP_PACKET_OUT_PACK_STR, buf, body
        )
        end = ofproto.OFP_PACKET_OUT_SIZE + actions_len
        actions = read_list(parser.OFPAction.parser, buf[:end], ofproto.OFP_PACKET_OUT_SIZE)
        return SimpleNamespace(
            buffer_id=buffer_id, in_port=in_port, actions=actions, data=buf[end:]
        )
    if isinstance(msg, parser.OFPFlowMod):
        match_at = ofproto.OFP_FLOW_MOD_SIZE - ofproto.OFP_MATCH_SIZE
        match = parser.OFPMatch.parser(buf, match_at)
        start = match_at + utils.round_up(match.length, 8)
        return SimpleNamespace(
            match=match, instructions=read_list(parser.OFPInstruction.parser, buf, start)
        )
    raise TypeError(type(msg))


SPREAD = GroupEntry(
    GroupType.SELECT,
    (Bucket((Output(1),), watch_port=1), Bucket((Output(2),), watch_port=2, weight=3)),
)


def as_desc(mod: object) -> object:
    """The group-desc entry a switch would report for a group it took from ``mod``."""
    return SimpleNamespace(
        type=mod.type,  # type: ignore[attr-defined]
        group_id=mod.group_id,  # type: ignore[attr-defined]
        buckets=mod.buckets,  # type: ignore[attr-defined]
    )


def test_select_group_add_encodes_watched_weighted_buckets() -> None:
    mod = reparse(messages.group_add(fake_datapath(), SPREAD))
    assert (mod.command, mod.type, mod.group_id) == (
        ofproto.OFPGC_ADD,
        ofproto.OFPGT_SELECT,
        SPREAD.group_id,
    )
    assert [(b.weight, b.watch_port, b.watch_group) for b in mod.buckets] == [
        (1, 1, ofproto.OFPG_ANY),
        (3, 2, ofproto.OFPG_ANY),
    ]
    assert [[a.port for a in b.actions] for b in mod.buckets] == [[1], [2]]


def test_group_round_trips_to_an_equal_entry_so_the_diff_is_empty() -> None:
    chained = GroupEntry(
        GroupType.ALL,
        (
            Bucket((Output(3),)),
            Bucket((SetField("eth_dst", 0x0A0000000002), Group(SPREAD.group_id))),
        ),
    )
    for group in (SPREAD, chained):
        mod = reparse(messages.group_modify(fake_datapath(), group))
        assert mod.command == ofproto.OFPGC_MODIFY
        installed = messages.installed_group(as_desc(mod))
        assert installed == group
    planned = [SPREAD, chained]
    installed_map = {
        g.group_id: messages.installed_group(
            as_desc(reparse(messages.group_add(fake_datapath(), g)))
        )
        for g in planned
    }
    assert diff_groups(installed_map, planned).empty  # type: ignore[arg-type]


def test_non_select_buckets_carry_no_weight() -> None:
    group = GroupEntry(GroupType.ALL, (Bucket((Output(1),)), Bucket((Output(2),))))
    mod = reparse(messages.group_add(fake_datapath(), group))
    assert [(b.weight, b.watch_port) for b in mod.buckets] == [(0, ofproto.OFPP_ANY)] * 2
    assert messages.installed_group(as_desc(mod)) == group


def test_foreign_groups_do_not_decode() -> None:
    def desc(type_: int, group_id: int, *buckets: object) -> SimpleNamespace:
        return SimpleNamespace(type=type_, group_id=group_id, buckets=list(buckets))

    plain = parser.OFPBucket(1, 1, ofproto.OFPG_ANY, [parser.OFPActionOutput(1)])
    assert messages.installed_group(desc(ofproto.OFPGT_SELECT, 9, plain)) is not None
    # indirect groups, group id 0, watched groups, actions the planner never writes
    assert messages.installed_group(desc(ofproto.OFPGT_INDIRECT, 9, plain)) is None
    assert messages.installed_group(desc(ofproto.OFPGT_SELECT, 0, plain)) is None
    watched = parser.OFPBucket(1, 1, 7, [parser.OFPActionOutput(1)])
    assert messages.installed_group(desc(ofproto.OFPGT_FF, 9, watched)) is None
    popping = parser.OFPBucket(1, 1, ofproto.OFPG_ANY, [parser.OFPActionPopVlan()])
    assert messages.installed_group(desc(ofproto.OFPGT_SELECT, 9, popping)) is None


def test_group_delete_names_only_the_id() -> None:
    mod = reparse(messages.group_delete(fake_datapath(), 0x1234))
    assert (mod.command, mod.group_id, mod.buckets) == (ofproto.OFPGC_DELETE, 0x1234, [])


def test_group_desc_request_serializes() -> None:
    request = messages.group_desc_request(fake_datapath())
    buf = wire(request)
    assert struct.unpack_from("!H", buf, ofproto.OFP_HEADER_SIZE)[0] == ofproto.OFPMP_GROUP_DESC


def test_flow_with_meter_and_group_puts_the_meter_first() -> None:
    flow = FlowEntry(
        tables.FORWARD,
        100,
        make_match(MatchField("eth_type", 0x800), MatchField("ipv4_dst", 0x0A000002)),
        (GotoTable(tables.COUNT), ApplyActions((Group(SPREAD.group_id),)), Meter(5)),
        Owner.FORWARDING,
    )
    mod = reparse(messages.flow_add(fake_datapath(), flow))
    assert [type(i) for i in mod.instructions] == [
        parser.OFPInstructionMeter,
        parser.OFPInstructionActions,
        parser.OFPInstructionGotoTable,
    ]
    assert mod.instructions[0].meter_id == 5
    (action,) = mod.instructions[1].actions
    assert isinstance(action, parser.OFPActionGroup) and action.group_id == SPREAD.group_id


def test_meter_round_trips_to_an_equal_entry() -> None:
    meter = MeterEntry(meter_id=3, rate_pps=200, burst=20)
    for build in (messages.meter_add, messages.meter_modify):
        mod = reparse(build(fake_datapath(), meter))
        assert mod.flags == ofproto.OFPMF_PKTPS | ofproto.OFPMF_BURST
        (band,) = mod.bands
        assert isinstance(band, parser.OFPMeterBandDrop)
        config = SimpleNamespace(flags=mod.flags, meter_id=mod.meter_id, bands=mod.bands)
        assert messages.installed_meter(config) == meter
    assert reparse(messages.meter_add(fake_datapath(), meter)).command == ofproto.OFPMC_ADD
    assert reparse(messages.meter_modify(fake_datapath(), meter)).command == ofproto.OFPMC_MODIFY
    deleted = reparse(messages.meter_delete(fake_datapath(), 3))
    assert (deleted.command, deleted.meter_id) == (ofproto.OFPMC_DELETE, 3)


def test_foreign_meters_do_not_decode() -> None:
    drop = parser.OFPMeterBandDrop(100, 10)
    pktps_burst = ofproto.OFPMF_PKTPS | ofproto.OFPMF_BURST

    def config(flags: int, *bands: object) -> SimpleNamespace:
        return SimpleNamespace(flags=flags, meter_id=1, bands=list(bands))

    assert messages.installed_meter(config(pktps_burst | ofproto.OFPMF_STATS, drop)) == MeterEntry(
        1, 100, 10
    )
    assert messages.installed_meter(config(ofproto.OFPMF_KBPS | ofproto.OFPMF_BURST, drop)) is None
    assert messages.installed_meter(config(pktps_burst, drop, drop)) is None
    assert messages.installed_meter(config(pktps_burst, parser.OFPMeterBandDscpRemark())) is None
    assert messages.installed_meter(config(pktps_burst)) is None


def test_meter_config_request_asks_for_all() -> None:
    buf = wire(messages.meter_config_request(fake_datapath()))
    kind = struct.unpack_from("!H", buf, ofproto.OFP_HEADER_SIZE)[0]
    asked = struct.unpack_from("!I", buf, ofproto.OFP_MULTIPART_REQUEST_SIZE)[0]
    assert (kind, asked) == (ofproto.OFPMP_METER_CONFIG, ofproto.OFPM_ALL)


def test_packet_out_carries_the_frame_to_every_port() -> None:
    frame = bytes(range(64))
    out = reparse(messages.packet_out(fake_datapath(), [1, 4], frame))
    assert (out.buffer_id, out.in_port) == (ofproto.OFP_NO_BUFFER, ofproto.OFPP_CONTROLLER)
    assert [a.port for a in out.actions] == [1, 4]
    assert bytes(out.data) == frame
    from_port = reparse(messages.packet_out(fake_datapath(), [2], frame, in_port=3))
    assert from_port.in_port == 3


def test_packet_in_summary_reads_port_and_frame() -> None:
    frame = b"\x01\x02\x03\x04"
    match = bytearray()
    length = parser.OFPMatch(in_port=7).serialize(match, 0)
    body = (
        struct.pack(ofproto.OFP_PACKET_IN_PACK_STR, ofproto.OFP_NO_BUFFER, len(frame), 1, 0, 0)
        + bytes(match[: utils.round_up(length, 8)])
        + b"\0\0"
        + frame
    )
    header = struct.pack(
        ofproto.OFP_HEADER_PACK_STR,
        ofproto.OFP_VERSION,
        ofproto.OFPT_PACKET_IN,
        ofproto.OFP_HEADER_SIZE + len(body),
        9,
    )
    buf = header + body
    msg = parser.msg_parser(
        fake_datapath(), ofproto.OFP_VERSION, ofproto.OFPT_PACKET_IN, len(buf), 9, buf
    )
    assert messages.packet_in_summary(msg) == (7, frame)
