"""The simulated byte-level switch against flowlane's own encoders and decoders.

Every message here is encoded by flowlane (``wire``, ``messages``) or os-ken,
and every answer is read back by flowlane's decoders (``installed_entries``,
``installed_group``, ``installed_meter``, ``decode_count_replies``,
``port_state``) or os-ken's parser, as the controller reads a real switch.
"""

from __future__ import annotations

import copy
import itertools
import struct
from typing import Any

import pytest
from os_ken.ofproto import ofproto_v1_3 as v13
from os_ken.ofproto import ofproto_v1_3_parser as v13_parser

from controller.flowid import ETH_TYPE_IPV4, IP_PROTO_TCP, FlowId
from controller.openflow import messages, wire
from controller.openflow.flowstats import decode_count_replies, multipart_body
from controller.openflow.framing import with_xid
from controller.openflow.installed import installed_entries
from controller.openflow.osken_internals import CodecDatapath, encode, parse
from controller.pipeline import tables
from controller.pipeline.desired import DesiredState, FabricInputs, desired_state
from controller.pipeline.diff import diff_flows
from controller.pipeline.flows import (
    ApplyActions,
    FlowEntry,
    GotoTable,
    Group,
    MatchField,
    Meter,
    Output,
    Owner,
    make_match,
)
from controller.pipeline.groups import Bucket, GroupEntry, GroupType, MeterEntry
from controller.pipeline.simulate import run_packet
from controller.policy.load import parse_policy
from controller.switch.codec import OFPP_MAX, port_state
from tests.support.leaf_spine import DOCUMENT, HOST_PORT, leaf_spine
from tests.support.ofswitch import OfSwitch, PortSpec, split_messages

DP = CodecDatapath(11)


class Sender:
    """Stamps xids as the switch actor will: one counter, every message its own xid."""

    def __init__(self) -> None:
        self._xids = itertools.count(1)
        self.last = 0

    def __call__(self, message: Any) -> bytes:
        self.last = next(self._xids)
        data = message if isinstance(message, bytes) else encode(message)
        return with_xid(data, self.last)


def fabric_plan() -> DesiredState:
    document = copy.deepcopy(DOCUMENT)
    document["forwarding"] = "fabric"
    policy = parse_policy(document, source="test")
    ports = {"s11-eth1": 1, "s11-eth2": 2, "s11-eth5": HOST_PORT}
    inputs = FabricInputs(leaf_spine(), frozenset({HOST_PORT}))
    return desired_state(policy, 11, ports, fabric=inputs)


def install(switch: OfSwitch, send: Sender, want: DesiredState) -> list[bytes]:
    """Meters, groups, flows then a barrier, in one write, as the switch step's sync sends them."""
    batch = b"".join(
        [
            *(send(messages.meter_add(DP, meter)) for meter in want.meters),
            *(send(messages.group_add(DP, group)) for group in want.groups),
            *(send(wire.flow_add(flow)) for flow in want.flows),
            send(wire.BARRIER),
        ]
    )
    return switch.receive(batch)


def parsed(replies: list[bytes]) -> list[Any]:
    return [parse(reply) for reply in replies]


def body_of(replies: list[bytes]) -> list[Any]:
    return [item for msg in parsed(replies) for item in msg.body]


def planned_switch() -> tuple[OfSwitch, Sender, DesiredState]:
    switch, send, want = OfSwitch(11, [1, 2, HOST_PORT]), Sender(), fabric_plan()
    [reply] = install(switch, send, want)
    assert (parse(reply).msg_type, parse(reply).xid) == (v13.OFPT_BARRIER_REPLY, send.last)
    return switch, send, want


def tcp_entry(index: int, table: int = tables.COUNT) -> FlowEntry:
    match = make_match(
        MatchField("eth_type", ETH_TYPE_IPV4),
        MatchField("ip_proto", IP_PROTO_TCP),
        MatchField("ipv4_src", 0x0A000000 + index),
        MatchField("ipv4_dst", 0x0A010000 + index),
        MatchField("tcp_src", 10_000 + index % 50_000),
        MatchField("tcp_dst", 5201),
    )
    return FlowEntry(table, 1, match, (), Owner.LEARNED)


def error_of(reply: bytes) -> tuple[int, int, int, bytes]:
    msg = parse(reply)
    assert msg.msg_type == v13.OFPT_ERROR
    return msg.xid, msg.type, msg.code, bytes(msg.data)


# ---- a planned switch, round trip ------------------------------------------------------------


def test_a_planned_fabric_switch_reads_back_as_its_plan_through_flowlanes_decoders() -> None:
    switch, send, want = planned_switch()
    assert want.groups and want.meters, "the fabric plan exercises groups and meters"

    flow_parts = switch.receive(send(messages.flow_stats_request(DP)))
    assert {parse(part).xid for part in flow_parts} == {send.last}
    counted = installed_entries([multipart_body(part) for part in flow_parts], tables.COUNT)
    installed = [entry.flow for entry in counted]
    assert diff_flows(installed, want.flows).empty
    assert sorted((f.key, f.cookie) for f in installed) == sorted(
        (f.key, f.cookie) for f in want.flows
    )
    assert not any(flow.opaque for flow in installed)

    groups = body_of(switch.receive(send(messages.group_desc_request(DP))))
    assert {g.group_id: messages.installed_group(g) for g in groups} == {
        g.group_id: g for g in want.groups
    }
    meters = body_of(switch.receive(send(messages.meter_config_request(DP))))
    assert {m.meter_id: messages.installed_meter(m) for m in meters} == {
        m.meter_id: m for m in want.meters
    }

    assert switch.groups() == {g.group_id: g for g in want.groups}
    assert switch.meters() == {m.meter_id: m for m in want.meters}
    assert sorted(switch.flows(), key=lambda f: f.key) == sorted(installed, key=lambda f: f.key)


def test_entries_rebuilt_from_the_bytes_carry_the_planned_cookies() -> None:
    """The instruction decoder is exact: every rebuilt entry hashes to its planned cookie."""
    switch, _, want = planned_switch()
    assert sorted(e.cookie for e in switch.entries()) == sorted(f.cookie for f in want.flows)


def test_lookup_on_the_switch_agrees_with_the_plan() -> None:
    switch, _, want = planned_switch()
    groups = {group.group_id: group for group in want.groups}
    remote = {
        "in_port": HOST_PORT,
        "eth_type": ETH_TYPE_IPV4,
        "eth_src": 0x02000000000B,
        "eth_dst": 0x02000000000C,
        "ip_proto": 17,
        "ipv4_src": 0x0A00000B,
        "ipv4_dst": 0x0A00000C,
        "udp_src": 1234,
        "udp_dst": 4791,
    }
    verdict = switch.lookup(remote)
    assert verdict == run_packet(want.flows, remote, groups, frozenset({1, 2, HOST_PORT}))
    assert verdict.outputs and set(verdict.outputs) <= {1, 2}
    switch.port_down(verdict.outputs[0])
    assert switch.lookup(remote).outputs not in ((), verdict.outputs)


def test_mods_received_name_each_change_once() -> None:
    switch, send, want = planned_switch()
    mods = switch.mods_received
    assert len(mods) == len(want.flows) + len(want.groups) + len(want.meters)
    assert len({mod.summary for mod in mods}) == len(mods)
    assert all(mod.error is None for mod in mods)
    flow_adds = [mod.summary for mod in switch.mods("FLOW_MOD")]
    assert flow_adds == [("ADD", flow.key, flow.cookie) for flow in want.flows]
    switch.receive(send(wire.flow_add(want.flows[0])))
    summaries = [mod.summary for mod in switch.mods_received]
    assert len(summaries) - len(set(summaries)) == 1


# ---- flow-mod semantics ---------------------------------------------------------------------


def entry(table: int, priority: int, port: int, *fields: MatchField) -> FlowEntry:
    return FlowEntry(
        table, priority, make_match(*fields), (ApplyActions((Output(port),)),), Owner.POLICY
    )


IPV4 = MatchField("eth_type", ETH_TYPE_IPV4)


def test_add_replaces_the_same_key_and_resets_counters_modify_keeps_them() -> None:
    switch, send = OfSwitch(1, [1, 2]), Sender()
    first = entry(0, 10, 1, IPV4)
    switch.receive(send(wire.flow_add(first)))
    switch.set_flow_counters(first, packets=5, bytes=500, duration_s=3.0)
    switch.advance(1.5)
    [counted] = switch.flow_counters()
    assert (counted.packets, counted.bytes) == (5, 500)

    modify = messages.flow_add(DP, entry(0, 10, 2, IPV4))
    modify.command = v13.OFPFC_MODIFY_STRICT
    switch.receive(send(modify))
    [counted] = switch.flow_counters()
    assert (counted.flow.cookie, counted.packets) == (first.cookie, 5), "modify keeps both"
    [rebuilt] = switch.entries()
    assert rebuilt.instructions == (ApplyActions((Output(2),)),)

    second = entry(0, 10, 2, IPV4)
    switch.receive(send(wire.flow_add(second)))
    [counted] = switch.flow_counters()
    assert (counted.flow.cookie, counted.packets, counted.bytes) == (second.cookie, 0, 0)


def test_durations_follow_the_switch_clock() -> None:
    switch, send = OfSwitch(1), Sender()
    flows = [tcp_entry(i) for i in range(3)]
    switch.receive(b"".join(send(wire.flow_add(flow)) for flow in flows))
    switch.advance(2.25)
    switch.set_flow_counters(flows[1], packets=7, bytes=7_000, duration_s=0.5)
    request = v13_parser.OFPFlowStatsRequest(
        DP, 0, tables.COUNT, v13.OFPP_ANY, v13.OFPG_ANY, 0, 0, v13_parser.OFPMatch()
    )
    parts = switch.receive(send(request))
    samples = decode_count_replies(multipart_body(part) for part in parts)
    ages = {sample.flow: (sample.bytes, sample.age_s) for sample, _ in samples}
    flow = FlowId(ETH_TYPE_IPV4, IP_PROTO_TCP, 0x0A000001, 0x0A010001, 10_001, 5201)
    assert ages[flow] == (7_000, 0.5)
    assert sorted(duration for _, duration in ages.values()) == [0.5, 2.25, 2.25]


def test_delete_strict_by_cookie_by_out_port_and_over_all_tables() -> None:
    switch, send = OfSwitch(1, [1, 2]), Sender()
    a = entry(0, 10, 1, IPV4, MatchField("ip_dscp", 10))
    b = entry(0, 20, 2, IPV4)
    c = entry(1, 10, 1, IPV4)
    d = entry(2, 10, 2)
    switch.receive(b"".join(send(wire.flow_add(f)) for f in (a, b, c, d)))

    switch.receive(send(wire.flow_delete(FlowKey_of(b))))
    assert keys(switch) == {a.key, c.key, d.key}
    switch.receive(send(messages.flow_delete_by_cookie(DP, 1, a.cookie)))
    assert keys(switch) == {a.key, c.key, d.key}, "the cookie is in table 0, not 1"
    switch.receive(send(messages.flow_delete_by_cookie(DP, 0, a.cookie)))
    assert keys(switch) == {c.key, d.key}

    by_port = v13_parser.OFPFlowMod(
        DP, table_id=v13.OFPTT_ALL, command=v13.OFPFC_DELETE, out_port=1, out_group=v13.OFPG_ANY
    )
    switch.receive(send(by_port))
    assert keys(switch) == {d.key}
    loose = v13_parser.OFPFlowMod(
        DP,
        table_id=v13.OFPTT_ALL,
        command=v13.OFPFC_DELETE,
        out_port=v13.OFPP_ANY,
        out_group=v13.OFPG_ANY,
        match=v13_parser.OFPMatch(eth_type=ETH_TYPE_IPV4),
    )
    switch.receive(send(loose))
    assert keys(switch) == {d.key}, "a loose match removes only entries at least as specific"
    everything = v13_parser.OFPFlowMod(
        DP,
        table_id=v13.OFPTT_ALL,
        command=v13.OFPFC_DELETE,
        out_port=v13.OFPP_ANY,
        out_group=v13.OFPG_ANY,
    )
    switch.receive(send(everything))
    assert switch.flows() == []


def FlowKey_of(flow: FlowEntry) -> Any:  # noqa: N802 - reads as the type it returns
    return flow.key


def keys(switch: OfSwitch) -> set[Any]:
    return {flow.key for flow in switch.flows()}


def test_flow_stats_filter_by_table() -> None:
    switch, send = OfSwitch(1, [1]), Sender()
    switch.receive(b"".join(send(wire.flow_add(f)) for f in (entry(0, 1, 1), entry(1, 1, 1))))
    request = v13_parser.OFPFlowStatsRequest(
        DP, 0, 1, v13.OFPP_ANY, v13.OFPG_ANY, 0, 0, v13_parser.OFPMatch()
    )
    [part] = switch.receive(send(request))
    assert [stat.table_id for stat in parse(part).body] == [1]


def test_a_match_without_its_prerequisites_is_refused() -> None:
    switch, send = OfSwitch(1, [1]), Sender()
    bad = v13_parser.OFPFlowMod(DP, match=v13_parser.OFPMatch(tcp_dst=22), instructions=[])
    [reply] = switch.receive(send(bad))
    assert error_of(reply)[:3] == (send.last, v13.OFPET_BAD_MATCH, v13.OFPBMC_BAD_PREREQ)
    assert switch.flows() == []


def test_goto_backwards_and_bad_tables_are_refused() -> None:
    switch, send = OfSwitch(1, [1], n_tables=4), Sender()
    back = FlowEntry(2, 1, (), (GotoTable(1),), Owner.PIPELINE)
    beyond = FlowEntry(4, 1, (), (), Owner.PIPELINE)
    replies = switch.receive(send(wire.flow_add(back)) + send(wire.flow_add(beyond)))
    assert [error_of(r)[1:3] for r in replies] == [
        (v13.OFPET_BAD_INSTRUCTION, v13.OFPBIC_BAD_TABLE_ID),
        (v13.OFPET_FLOW_MOD_FAILED, v13.OFPFMFC_BAD_TABLE_ID),
    ]


# ---- groups and meters ------------------------------------------------------------------------


GROUP = GroupEntry(GroupType.SELECT, (Bucket((Output(1),), 1), Bucket((Output(2),), 2)))
METER = MeterEntry(7, 1000, 100)


def test_adding_an_existing_group_is_an_error_with_the_xid_and_the_first_bytes() -> None:
    switch, send = OfSwitch(1, [1, 2]), Sender()
    assert switch.receive(send(messages.group_add(DP, GROUP))) == []
    buckets = tuple(Bucket((Output(port),), port) for port in (1, 2, 3, 4))
    duplicate = send(messages.group_add(DP, GroupEntry(GroupType.SELECT, buckets, GROUP.group_id)))
    assert len(duplicate) > 64, "long enough to show the quote is cut"
    [reply] = switch.receive(duplicate)
    xid, kind, code, data = error_of(reply)
    assert (xid, kind, code) == (send.last, v13.OFPET_GROUP_MOD_FAILED, v13.OFPGMFC_GROUP_EXISTS)
    assert data == duplicate[:64]
    assert switch.groups() == {GROUP.group_id: GROUP}, "a failed message changes nothing"
    assert switch.mods_received[-1].error == (v13.OFPET_GROUP_MOD_FAILED, 0)


def test_group_modify_and_delete() -> None:
    switch, send = OfSwitch(1, [1, 2]), Sender()
    [reply] = switch.receive(send(messages.group_modify(DP, GROUP)))
    assert error_of(reply)[2] == v13.OFPGMFC_UNKNOWN_GROUP
    switch.receive(send(messages.group_add(DP, GROUP)))
    changed = GroupEntry(GroupType.SELECT, (Bucket((Output(2),), 5),), GROUP.group_id)
    assert switch.receive(send(messages.group_modify(DP, changed))) == []
    assert switch.groups() == {GROUP.group_id: changed}
    user = FlowEntry(0, 1, (), (ApplyActions((Group(GROUP.group_id),)),), Owner.FORWARDING)
    switch.receive(send(wire.flow_add(user)) + send(wire.flow_add(entry(0, 2, 1, IPV4))))
    switch.receive(send(messages.group_delete(DP, v13.OFPG_ALL)))
    assert switch.groups() == {}
    assert keys(switch) == {entry(0, 2, 1, IPV4).key}, "the group's flows went with it"


def test_a_flow_naming_a_missing_group_or_meter_is_refused_and_the_barrier_follows() -> None:
    switch, send = OfSwitch(1, [1]), Sender()
    grouped = FlowEntry(0, 1, (), (ApplyActions((Group(99),)),), Owner.FORWARDING)
    metered = FlowEntry(0, 2, (), (Meter(3), ApplyActions((Output(1),))), Owner.FORWARDING)
    batch = send(wire.flow_add(grouped))
    first = send.last
    batch += send(wire.flow_add(metered)) + send(wire.BARRIER)
    replies = switch.receive(batch)
    assert [parse(r).msg_type for r in replies] == [
        v13.OFPT_ERROR,
        v13.OFPT_ERROR,
        v13.OFPT_BARRIER_REPLY,
    ]
    assert error_of(replies[0])[:3] == (first, v13.OFPET_BAD_ACTION, v13.OFPBAC_BAD_OUT_GROUP)
    assert error_of(replies[1])[:3] == (
        first + 1,
        v13.OFPET_METER_MOD_FAILED,
        v13.OFPMMFC_INVALID_METER,
    )
    assert switch.flows() == []


def test_meter_errors_and_delete_with_its_flows() -> None:
    switch, send = OfSwitch(1, [1]), Sender()
    [reply] = switch.receive(send(messages.meter_modify(DP, METER)))
    assert error_of(reply)[1:3] == (v13.OFPET_METER_MOD_FAILED, v13.OFPMMFC_UNKNOWN_METER)
    switch.receive(send(messages.meter_add(DP, METER)))
    [reply] = switch.receive(send(messages.meter_add(DP, METER)))
    assert error_of(reply)[1:3] == (v13.OFPET_METER_MOD_FAILED, v13.OFPMMFC_METER_EXISTS)
    faster = MeterEntry(7, 2000, 100)
    switch.receive(send(messages.meter_modify(DP, faster)))
    assert switch.meters() == {7: faster}
    metered = FlowEntry(0, 2, (), (Meter(7), ApplyActions((Output(1),))), Owner.FORWARDING)
    switch.receive(send(wire.flow_add(metered)))
    assert keys(switch) == {metered.key}
    switch.receive(send(messages.meter_delete(DP, 7)))
    assert (switch.meters(), switch.flows()) == ({}, [])


# ---- barriers, holding, faults -----------------------------------------------------------------


def test_dropped_barriers_are_never_answered_but_their_messages_apply() -> None:
    switch, send = OfSwitch(1, [1]), Sender()
    switch.drop_barriers(1)
    assert switch.receive(send(wire.flow_add(entry(0, 1, 1))) + send(wire.BARRIER)) == []
    assert len(switch.flows()) == 1
    [reply] = switch.receive(send(wire.BARRIER))
    assert (parse(reply).msg_type, parse(reply).xid) == (v13.OFPT_BARRIER_REPLY, send.last)


def test_hold_queues_answers_until_release_in_order() -> None:
    switch, send = OfSwitch(1, [1, 2]), Sender()
    switch.hold()
    assert switch.receive(send(messages.group_modify(DP, GROUP)) + send(wire.BARRIER)) == []
    assert switch.receive(send(v13_parser.OFPEchoRequest(DP, data=b"hi"))) == []
    status = switch.port_down(2)
    assert parse(status).msg_type == v13.OFPT_PORT_STATUS, "unsolicited messages are not held"
    held = switch.release()
    assert [(parse(r).msg_type, parse(r).xid) for r in held] == [
        (v13.OFPT_ERROR, 1),
        (v13.OFPT_BARRIER_REPLY, 2),
        (v13.OFPT_ECHO_REPLY, 3),
    ]
    assert parse(held[2]).data == b"hi"
    assert switch.receive(send(wire.BARRIER)) != []


def test_reject_and_fail_stats() -> None:
    switch, send = OfSwitch(1, [1]), Sender()
    switch.reject(v13.OFPT_FLOW_MOD, v13.OFPET_FLOW_MOD_FAILED, v13.OFPFMFC_TABLE_FULL)
    [reply] = switch.receive(send(wire.flow_add(entry(0, 1, 1))))
    assert error_of(reply)[2] == v13.OFPFMFC_TABLE_FULL
    assert switch.flows() == []
    assert switch.receive(send(wire.flow_add(entry(0, 1, 1)))) == [], "times=1"

    switch.fail_stats("flow")
    [reply] = switch.receive(send(messages.flow_stats_request(DP)))
    assert error_of(reply)[:3] == (send.last, v13.OFPET_BAD_REQUEST, v13.OFPBRC_BAD_MULTIPART)
    [part] = switch.receive(send(messages.flow_stats_request(DP)))
    assert len(parse(part).body) == 1


def test_a_large_flow_table_comes_in_parts_that_flowlanes_decoders_read_whole() -> None:
    switch, send = OfSwitch(1), Sender()
    flows = [tcp_entry(i) for i in range(2_000)]
    planned = [entry(0, 10 + i, 1, IPV4) for i in range(20)]
    switch.receive(b"".join(send(wire.flow_add(flow)) for flow in (*flows, *planned)))
    parts = switch.receive(send(messages.flow_stats_request(DP)))
    assert len(parts) >= 3
    heads = [struct.unpack_from("!BBHIHH", part) for part in parts]
    assert all(
        length == len(part) <= 0xFFFF for (_, _, length, *_), part in zip(heads, parts, strict=True)
    )
    assert {xid for (_, _, _, xid, _, _) in heads} == {send.last}
    assert [flags for *_, flags in heads] == [v13.OFPMPF_REPLY_MORE] * (len(parts) - 1) + [0]
    assert sum(len(parse(part).body) for part in parts) == 2_020

    bodies = [multipart_body(part) for part in parts]
    assert {e.flow.key for e in installed_entries(bodies, tables.COUNT)} == {f.key for f in planned}
    samples = decode_count_replies(bodies)
    assert len(samples) == 2_000
    assert {cookie for _, cookie in samples} == {flow.cookie for flow in flows}


# ---- ports, packets, roles, the rest -------------------------------------------------------------


def test_port_desc_stats_and_status_decode_as_the_switch_codec_reads_them() -> None:
    spine = PortSpec(1, "s11-eth1", hw_addr=0x020000000101, curr_speed_kbps=1_000_000)
    switch, send = OfSwitch(11, [spine, 2]), Sender()
    descs = body_of(switch.receive(send(v13_parser.OFPPortDescStatsRequest(DP, 0))))
    states = [port_state(desc) for desc in descs if desc.port_no <= OFPP_MAX]
    assert [(s.number, s.name, s.link_bps, s.up) for s in states] == [
        (1, "s11-eth1", 1_000_000_000, True),
        (2, "s11-eth2", 10_000_000_000, True),
    ]
    assert states[0].hw_addr == 0x020000000101
    assert any(desc.port_no == v13.OFPP_LOCAL for desc in descs), "OVS lists its LOCAL port"

    down = parse(switch.port_down(1))
    assert (down.msg_type, down.reason, down.desc.port_no) == (
        v13.OFPT_PORT_STATUS,
        v13.OFPPR_MODIFY,
        1,
    )
    assert not port_state(down.desc).up
    assert port_state(parse(switch.port_up(1)).desc).up
    added = parse(switch.add_port(PortSpec(9, "s11-eth9")))
    assert (added.reason, added.desc.name) == (v13.OFPPR_ADD, b"s11-eth9")
    gone = parse(switch.delete_port(2))
    assert (gone.reason, gone.desc.port_no) == (v13.OFPPR_DELETE, 2)

    switch.set_port_counters(1, tx_bytes=12_345, rx_bytes=678)
    request = v13_parser.OFPPortStatsRequest(DP, 0, v13.OFPP_ANY)
    stats = {s.port_no: (s.tx_bytes, s.rx_bytes) for s in body_of(switch.receive(send(request)))}
    assert stats[1] == (12_345, 678)
    assert set(stats) == {1, 9, v13.OFPP_LOCAL}


def test_packet_in_and_packet_out() -> None:
    switch, send = OfSwitch(1, [1, 2]), Sender()
    frame = bytes(range(60))
    packet_in = parse(switch.packet_in(2, frame))
    assert messages.packet_in_summary(packet_in) == (2, frame)
    assert switch.receive(send(messages.packet_out(DP, [1, 2], frame, in_port=2))) == []
    [out] = switch.packet_outs
    assert (out.xid, out.in_port, out.outputs, out.data) == (send.last, 2, (1, 2), frame)


def test_roles_refuse_a_stale_generation_and_a_slaves_mods() -> None:
    switch, send = OfSwitch(1, [1]), Sender()
    [reply] = switch.receive(send(v13_parser.OFPRoleRequest(DP, v13.OFPCR_ROLE_MASTER, 5)))
    answer = parse(reply)
    assert (answer.msg_type, answer.role, answer.generation_id) == (
        v13.OFPT_ROLE_REPLY,
        v13.OFPCR_ROLE_MASTER,
        5,
    )
    [reply] = switch.receive(send(v13_parser.OFPRoleRequest(DP, v13.OFPCR_ROLE_MASTER, 4)))
    assert error_of(reply)[:3] == (
        send.last,
        v13.OFPET_ROLE_REQUEST_FAILED,
        v13.OFPRRFC_STALE,
    )
    assert switch.role == v13.OFPCR_ROLE_MASTER
    switch.receive(send(v13_parser.OFPRoleRequest(DP, v13.OFPCR_ROLE_SLAVE, 6)))
    [reply] = switch.receive(send(wire.flow_add(entry(0, 1, 1))))
    assert error_of(reply)[1:3] == (v13.OFPET_BAD_REQUEST, v13.OFPBRC_IS_SLAVE)
    assert switch.flows() == []
    [reply] = switch.receive(send(v13_parser.OFPRoleRequest(DP, v13.OFPCR_ROLE_NOCHANGE, 0)))
    assert (parse(reply).role, parse(reply).generation_id) == (v13.OFPCR_ROLE_SLAVE, 6)


def test_unknown_requests_are_bad_type_and_messages_split_by_length() -> None:
    switch, send = OfSwitch(1), Sender()
    unknown = send(v13_parser.OFPGetAsyncRequest(DP))
    echo = send(v13_parser.OFPEchoRequest(DP, data=b"x"))
    replies = switch.receive(unknown + echo)
    assert error_of(replies[0])[:3] == (1, v13.OFPET_BAD_REQUEST, v13.OFPBRC_BAD_TYPE)
    assert parse(replies[1]).msg_type == v13.OFPT_ECHO_REPLY
    assert split_messages(unknown + echo) == [unknown, echo]
    with pytest.raises(ValueError, match="claims length"):
        switch.receive(echo[:-1])


def test_injected_foreign_entries_are_read_back_and_removed_as_the_audit_does() -> None:
    """What someone else installed: not in ``mods_received``; an entry using a field flowlane
    does not model reads back opaque, and goes by its cookie."""
    switch, send = OfSwitch(1, [1]), Sender()
    normal = v13_parser.OFPFlowMod(
        DP,
        cookie=0,
        priority=0,
        instructions=[
            v13_parser.OFPInstructionActions(
                v13.OFPIT_APPLY_ACTIONS, [v13_parser.OFPActionOutput(v13.OFPP_NORMAL)]
            )
        ],
    )
    odd = v13_parser.OFPFlowMod(
        DP, cookie=0xABC, priority=5, match=v13_parser.OFPMatch(vlan_vid=0x1000 | 7, vlan_pcp=3)
    )
    switch.inject(encode(normal) + encode(odd))
    assert switch.mods_received == []
    flows = {flow.cookie: flow for flow in switch.flows()}
    assert not flows[0].opaque
    assert flows[0xABC].opaque
    diff = diff_flows(switch.flows(), [])
    assert diff.delete == (flows[0].key,)
    assert diff.delete_by_cookie == ((0, 0xABC),)
    batch = b"".join(send(wire.flow_delete(key)) for key in diff.delete) + b"".join(
        send(messages.flow_delete_by_cookie(DP, table, cookie))
        for table, cookie in diff.delete_by_cookie
    )
    assert switch.receive(batch + send(wire.BARRIER)) != []
    assert switch.flows() == []
    assert [mod.summary[0] for mod in switch.mods_received] == ["DELETE_STRICT", "DELETE"]


def test_set_flow_counters_by_predicate_and_a_typo_is_loud() -> None:
    switch, send = OfSwitch(1, [1]), Sender()
    flows = [entry(0, 10, 1, IPV4), entry(1, 10, 1, IPV4)]
    switch.receive(b"".join(send(wire.flow_add(flow)) for flow in flows))
    assert switch.set_flow_counters(lambda flow: flow.key.table_id == 1, 3, 300) == 1
    assert {(c.flow.key.table_id, c.packets, c.bytes) for c in switch.flow_counters()} == {
        (0, 0, 0),
        (1, 3, 300),
    }
    with pytest.raises(LookupError):
        switch.set_flow_counters(entry(2, 10, 1), 1, 1)


def test_features_reply_and_hello() -> None:
    switch = OfSwitch(0xABCDEF, [1], n_tables=254)
    [reply] = switch.receive(with_xid(encode(v13_parser.OFPFeaturesRequest(DP)), 77))
    features = parse(reply)
    assert (features.xid, features.datapath_id, features.n_tables) == (77, 0xABCDEF, 254)
    assert parse(switch.hello()).msg_type == v13.OFPT_HELLO
    assert switch.receive(switch.hello()) == []
