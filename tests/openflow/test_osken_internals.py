"""The contract with os-ken: every message the controller reads or sends, through
``osken_internals`` with its one stand-in datapath.

What comes in is packed here by hand from the OpenFlow 1.3 spec, so an os-ken
whose parser reads a field elsewhere, names it otherwise or needs more of a
datapath fails here; what goes out is read back here with ``struct``, so an
os-ken whose serializer lays a message out otherwise, or reads more than
``ofproto``/``ofproto_parser`` from its datapath (``CodecDatapath`` has slots
for nothing else), fails here too -- not as a switch refusing a batch.
"""

from __future__ import annotations

import ast
import struct
from pathlib import Path

import pytest
from os_ken.ofproto import ofproto_v1_3 as v13
from os_ken.ofproto import ofproto_v1_3_parser as v13_parser

from controller.openflow import messages, wire
from controller.openflow.framing import header
from controller.openflow.installed import installed_entries
from controller.openflow.osken_internals import (
    DATAPATH,
    CodecDatapath,
    ParseError,
    basic_oxm_fields,
    encode,
    parse,
)
from controller.pipeline.flows import (
    ApplyActions,
    FlowEntry,
    MatchField,
    Output,
    Owner,
    make_match,
)
from controller.pipeline.groups import Bucket, GroupEntry, GroupType, MeterEntry
from controller.switch import codec

OFPP_ANY = 0xFFFFFFFF
OFPG_ANY = 0xFFFFFFFF
OFPP_CONTROLLER = 0xFFFFFFFD
NO_BUFFER = 0xFFFFFFFF


def _message(msg_type: int, xid: int, body: bytes) -> bytes:
    return struct.pack("!BBHI", 4, msg_type, 8 + len(body), xid) + body


def _multipart(xid: int, mp_type: int, body: bytes) -> bytes:
    return _message(19, xid, struct.pack("!HH4x", mp_type, 0) + body)  # OFPT_MULTIPART_REPLY


def _port(number: int, name: str, state: int = 0, config: int = 0, speed: int = 0) -> bytes:
    """ofp_port: port_no, pad, hw_addr, pad, name[16], config, state, curr, advertised,
    supported, peer, curr_speed, max_speed."""
    return struct.pack(
        "!I4x6s2x16sIIIIIIII",
        number,
        bytes([2, 0, 0, 0, 0, number]),
        name.encode(),
        config,
        state,
        0,
        0,
        0,
        0,
        speed,
        speed,
    )


def _output(port: int) -> bytes:
    return struct.pack("!HHIH6x", 0, 16, port, 0xFFFF)  # OFPAT_OUTPUT


# ---- what the controller reads -----------------------------------------------------


def test_a_port_description_reply_reads_as_the_switch_codec_needs() -> None:
    body = _port(1, "s1-eth1", speed=1_000_000) + _port(2, "s1-eth2", state=1)  # LINK_DOWN
    part = codec.decode(_multipart(0x21, 13, body))  # OFPMP_PORT_DESC
    assert isinstance(part, codec.Part) and part.xid == 0x21
    ports = codec.own_ports(part.body)  # type: ignore[arg-type]
    assert [(p.number, p.name, p.link_bps, p.up, p.hw_addr) for p in ports] == [
        (1, "s1-eth1", 1_000_000_000, True, 0x020000000001),
        (2, "s1-eth2", None, False, 0x020000000002),
    ]


def test_a_port_status_reads_its_reason_and_port() -> None:
    data = _message(12, 0, struct.pack("!B7x", 2) + _port(3, "s1-eth3", config=1))  # MODIFY
    status = codec.decode(data)
    assert isinstance(status, codec.PortStatus)
    assert (status.reason_text, status.port.number, status.port.name) == (
        "modified",
        3,
        "s1-eth3",
    )
    assert not status.port.up  # OFPPC_PORT_DOWN


def test_port_stats_read_their_port_and_bytes_sent() -> None:
    stats = struct.pack("!I4x" + "Q" * 12 + "II", 4, 0, 0, 0, 123_456, *(0,) * 8, 0, 0)
    (stat,) = parse(_multipart(5, 4, stats)).body  # OFPMP_PORT_STATS
    assert (stat.port_no, stat.tx_bytes) == (4, 123_456)


def test_a_group_description_reads_back_as_the_planned_group() -> None:
    buckets = b"".join(
        struct.pack("!HHII4x", 16 + 16, weight, watch, OFPG_ANY) + _output(watch)
        for weight, watch in ((3, 1), (1, 2))
    )
    desc = struct.pack("!HBxI", 8 + len(buckets), 1, 77) + buckets  # OFPGT_SELECT
    (entry,) = parse(_multipart(6, 7, desc)).body  # OFPMP_GROUP_DESC
    assert messages.installed_group(entry) == GroupEntry(
        GroupType.SELECT,
        (Bucket((Output(1),), 1, 3), Bucket((Output(2),), 2, 1)),
        77,
    )


def test_a_meter_configuration_reads_back_as_the_planned_meter() -> None:
    band = struct.pack("!HHII4x", 1, 16, 250, 25)  # OFPMBT_DROP
    config = struct.pack("!HHI", 8 + len(band), 0b0110, 9) + band  # PKTPS | BURST
    (entry,) = parse(_multipart(7, 10, config)).body  # OFPMP_METER_CONFIG
    assert messages.installed_meter(entry) == MeterEntry(9, 250, 25)


def test_a_packet_in_gives_its_port_and_frame() -> None:
    # ofp_match: OXM type, length 4 + one in_port field (OXM header + 4 bytes), padded to 8
    match = struct.pack("!HHII4x", 1, 4 + 8, 0x80000004, 6)
    frame = b"\x01\x80\xc2\x00\x00\x0e" + bytes(54)
    head = struct.pack("!IHBBQ", NO_BUFFER, len(frame), 0, 0, 0)  # buffer, len, reason, table
    data = _message(10, 0, head + match + bytes(2) + frame)  # OFPT_PACKET_IN
    assert messages.packet_in_summary(parse(data)) == (6, frame)


def test_the_oxm_table_names_the_fields_the_audit_decodes() -> None:
    fields = basic_oxm_fields()
    assert {0: "in_port", 5: "eth_type", 10: "ip_proto", 12: "ipv4_dst", 14: "tcp_dst"}.items() <= (
        fields.items()
    )
    assert {2: "metadata", 8: "ip_dscp", 26: "ipv6_src"}.items() <= fields.items()


def test_what_os_ken_cannot_read_is_an_error_not_none() -> None:
    with pytest.raises(ParseError):
        parse(b"\x04\x13")
    with pytest.raises(ParseError):  # a port-description reply cut inside its port
        parse(_multipart(1, 13, _port(1, "s1-eth1")[:20]))


# ---- what the controller sends -----------------------------------------------------

FLOW = FlowEntry(
    2,
    300,
    make_match(
        MatchField("eth_type", 0x0800), MatchField("tcp_dst", 5001), MatchField("ip_proto", 6)
    ),
    (ApplyActions((Output(3),)),),
    Owner.POLICY,
)


def _flow_mod(data: bytes) -> tuple[int, int, int, int]:
    """(cookie, table_id, command, priority) of an ofp_flow_mod."""
    cookie, _mask, table, command, _idle, _hard, priority = struct.unpack_from("!QQBBHHH", data, 8)
    return cookie, table, command, priority


def test_flow_mods_are_laid_out_as_the_spec_says() -> None:
    add = wire.flow_add(FLOW)
    assert header(add)[:3] == (4, 14, len(add))  # OFPT_FLOW_MOD
    assert _flow_mod(add) == (FLOW.cookie, 2, 0, 300)  # OFPFC_ADD
    assert installed_entries([_as_stats(add)], skipped_table=99)[0].flow.key == FLOW.key
    strict = wire.flow_delete(FLOW.key)
    assert _flow_mod(strict)[1:] == (2, 4, 300)  # OFPFC_DELETE_STRICT
    by_cookie = encode(messages.flow_delete_by_cookie(DATAPATH, 5, 0xC0FFEE))
    cookie, mask = struct.unpack_from("!QQ", by_cookie, 8)
    assert (cookie, mask, by_cookie[24], by_cookie[25]) == (0xC0FFEE, 2**64 - 1, 5, 3)


def _as_stats(flow_mod: bytes) -> bytes:
    """The flow-stats entry a switch would report for ``flow_mod`` (its match and
    instructions as sent), to check the match bytes with the audit's own decoder."""
    match_length = struct.unpack_from("!H", flow_mod, 50)[0]
    rest = flow_mod[48:]
    cookie, _mask, table, _command, idle, hard, priority = struct.unpack_from(
        "!QQBBHHH", flow_mod, 8
    )
    head = struct.pack(
        "!HBxIIHHHH4xQQQ", 48 + len(rest), table, 0, 0, priority, idle, hard, 0, cookie, 0, 0
    )
    assert match_length <= len(rest)
    return head + rest


def test_group_and_meter_mods_are_laid_out_as_the_spec_says() -> None:
    group = GroupEntry(GroupType.SELECT, (Bucket((Output(1),), 1, 2),), 40)
    for build, command in ((messages.group_add, 0), (messages.group_modify, 1)):
        data = encode(build(DATAPATH, group))
        assert header(data)[1:3] == (15, len(data))  # OFPT_GROUP_MOD
        assert struct.unpack_from("!HBxI", data, 8) == (command, 1, 40)
        length, weight, watch = struct.unpack_from("!HHI", data, 16)
        assert (length, weight, watch) == (32, 2, 1)
    delete = encode(messages.group_delete(DATAPATH, 40))
    assert struct.unpack_from("!HBxI", delete, 8) == (2, 0, 40)
    meter = MeterEntry(3, 100, 10)
    for build, command in ((messages.meter_add, 0), (messages.meter_modify, 1)):
        data = encode(build(DATAPATH, meter))
        assert header(data)[1:3] == (29, len(data))  # OFPT_METER_MOD
        assert struct.unpack_from("!HHI", data, 8) == (command, 0b0110, 3)
        assert struct.unpack_from("!HHII", data, 16) == (1, 16, 100, 10)


@pytest.mark.parametrize(
    ("request_bytes", "mp_type", "table"),
    [
        (codec.PORT_DESC, 13, None),
        (codec.FLOWS, 1, 0xFF),
        (codec.COUNT_FLOWS, 1, 3),
        (codec.GROUPS, 7, None),
        (codec.METERS, 10, None),
        (codec.PORT_STATS, 4, None),
    ],
)
def test_requests_are_multipart_requests_of_their_type(
    request_bytes: bytes, mp_type: int, table: int | None
) -> None:
    assert header(request_bytes)[:3] == (4, 18, len(request_bytes))  # OFPT_MULTIPART_REQUEST
    assert struct.unpack_from("!H", request_bytes, 8)[0] == mp_type
    if table is not None:
        assert request_bytes[16] == table
    if mp_type == 4:
        assert struct.unpack_from("!I", request_bytes, 16)[0] == OFPP_ANY
    if mp_type == 10:
        assert struct.unpack_from("!I", request_bytes, 16)[0] == v13.OFPM_ALL


def test_a_barrier_and_a_packet_out() -> None:
    assert _message(20, 0, b"") == wire.BARRIER
    frame = bytes(range(60))
    out = encode(messages.packet_out(DATAPATH, [1, 2], frame), 0)
    buffer_id, in_port, actions_length = struct.unpack_from("!IIH", out, 8)
    assert (header(out)[1], buffer_id, in_port, actions_length) == (
        13,
        NO_BUFFER,
        OFPP_CONTROLLER,
        32,
    )
    assert out[24:56] == _output(1) + _output(2)
    assert out[56:] == frame


def test_the_xid_is_written_into_the_bytes_not_the_message() -> None:
    msg = v13_parser.OFPBarrierRequest(DATAPATH)
    assert header(encode(msg, 0x1234)) == (4, 20, 8, 0x1234)
    assert header(encode(msg, 0xFFFFFFFF))[3] == 0xFFFFFFFF
    assert header(encode(msg))[3] == 0
    request = v13_parser.OFPPortStatsRequest(DATAPATH, 0, v13.OFPP_ANY)
    one, two = encode(request, 7), encode(request, 8)
    assert header(one)[3] == 7 and header(two)[3] == 8 and one[8:] == two[8:]


def test_a_datapath_naming_a_switch_encodes_the_same_bytes() -> None:
    """The hub's ``Connection.datapath()`` is a ``CodecDatapath`` of the switch's id."""
    assert encode(messages.flow_add(CodecDatapath(0xAB), FLOW), 5) == encode(
        messages.flow_add(DATAPATH, FLOW), 5
    )
    assert parse(_message(21, 3, b""), CodecDatapath(0xAB)).datapath.id == 0xAB


# ---- nothing else touches os-ken's internals --------------------------------------


def test_only_osken_internals_parses_serializes_or_stands_in_for_a_datapath() -> None:
    """No other module calls os-ken's ``ofproto_parser.msg`` or a message's ``serialize``,
    reads a private os-ken name or makes its own stand-in datapath."""
    package = Path(__file__).resolve().parents[2] / "controller"
    found: list[str] = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "osken_internals.py":
            continue
        tree = ast.parse(path.read_text(), str(path))
        where = path.relative_to(package.parent)
        osken: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("os_ken"):
                if node.module != "os_ken.lib.packet":  # packets: os-ken's documented library
                    osken |= {alias.asname or alias.name for alias in node.names}
                if node.module == "os_ken.ofproto" and any(
                    alias.name == "ofproto_parser" for alias in node.names
                ):
                    found.append(f"{where}:{node.lineno}: imports os_ken.ofproto.ofproto_parser")
            elif isinstance(node, ast.Import):
                found += [
                    f"{where}:{node.lineno}: imports {alias.name}"
                    for alias in node.names
                    if alias.name.startswith("os_ken")
                ]
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                private = node.attr.startswith("_") and not node.attr.startswith("__")
                if node.value.id in osken and private:
                    found.append(f"{where}:{node.lineno}: {node.value.id}.{node.attr}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "serialize"
                and path.name != "frames.py"  # packets: os-ken's documented library
            ):
                found.append(f"{where}:{node.lineno}: calls .serialize()")
            if isinstance(node, ast.keyword) and node.arg == "ofproto_parser":
                found.append(f"{where}:{node.lineno}: builds a stand-in datapath")
    assert not found, "os-ken internals outside osken_internals.py:\n" + "\n".join(found)
