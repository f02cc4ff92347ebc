"""A slave keeps only the packet-ins it uses, told from the raw message before any parsing
(``controller.switch.slave.slave_keeps``): LLDP (links) and ARP (hosts, and the ARP flood
each instance sends out of the switches it masters); unknown unicast, which the table-miss
entry punts at up to the punt meter's rate, is only its master's business."""

from __future__ import annotations

import struct

from os_ken.lib.packet import ethernet, ipv4, packet, udp, vlan
from os_ken.ofproto import ofproto_v1_3 as v13
from os_ken.ofproto import ofproto_v1_3_parser as v13_parser

from controller.openflow import frames, messages
from controller.openflow.osken_internals import parse
from controller.switch.slave import slave_keeps
from tests.openflow.fabric_harness import IP_A, IP_UNKNOWN, MAC_A, arp_frame
from tests.support.ofswitch import OfSwitch

SWITCH = OfSwitch(0xC101)


def udp_frame(tag: int | None = None) -> bytes:
    frame = packet.Packet()
    ethertype = 0x8100 if tag is not None else 0x0800
    frame.add_protocol(ethernet.ethernet("00:00:00:00:00:03", "00:00:00:00:00:01", ethertype))
    if tag is not None:
        frame.add_protocol(vlan.vlan(vid=tag, ethertype=0x0800))
    frame.add_protocol(ipv4.ipv4(src="10.0.0.1", dst="10.0.0.3", proto=17))
    frame.add_protocol(udp.udp(src_port=5000, dst_port=7001))
    frame.serialize()
    return bytes(frame.data) + b"\0" * 32


def tagged(frame: bytes, tag: int) -> bytes:
    """``frame`` with an 802.1Q tag inserted after its MACs."""
    return frame[:12] + struct.pack("!HH", 0x8100, tag) + frame[12:]


def long_match_packet_in(data: bytes) -> bytes:
    """A packet-in whose match carries more than the in_port (its length is read, not
    assumed), as Open vSwitch sends with metadata or tunnel fields."""
    match = bytearray()
    v13_parser.OFPMatch(in_port=3, metadata=0x1234, tunnel_id=7).serialize(match, 0)
    head = struct.pack(
        v13.OFP_PACKET_IN_PACK_STR, v13.OFP_NO_BUFFER, len(data), v13.OFPR_ACTION, 4, 9
    )
    body = head + bytes(match) + b"\0\0" + data
    return struct.pack(v13.OFP_HEADER_PACK_STR, 4, v13.OFPT_PACKET_IN, 8 + len(body), 0) + body


LLDP = frames.lldp_frame(0xC201, 2, 0x020000000002)
ARP = arp_frame(1, MAC_A, IP_A, IP_UNKNOWN)


def test_lldp_and_arp_are_kept_unknown_unicast_is_not() -> None:
    assert slave_keeps(SWITCH.packet_in(1, LLDP))
    assert slave_keeps(SWITCH.packet_in(1, ARP))
    assert not slave_keeps(SWITCH.packet_in(1, udp_frame()))


def test_the_match_length_is_read_and_vlan_tags_are_looked_behind() -> None:
    for data, kept in ((LLDP, True), (ARP, True), (udp_frame(), False)):
        message = long_match_packet_in(data)
        # The same frame the full parser finds (what the master hands the fabric owner).
        assert messages.packet_in_summary(parse(message)) == (3, data)
        assert slave_keeps(message) is kept
        assert slave_keeps(SWITCH.packet_in(2, tagged(data, 10))) is kept
    assert not slave_keeps(SWITCH.packet_in(2, udp_frame(tag=5)))


def test_a_message_too_short_to_tell_is_kept_for_the_parser_to_judge() -> None:
    assert slave_keeps(b"\x04\x0a\x00\x10" + b"\0" * 12)
    assert slave_keeps(SWITCH.packet_in(1, b"\0" * 6))
