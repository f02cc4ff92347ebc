"""Discovery frames: what we send is what we read back; anything else reads as None.

Frames from the wire are built here with os-ken's own packet classes (as a
host or another switch would send them), not with the functions under test.
"""

from __future__ import annotations

import random
import struct

import pytest
from os_ken.lib.packet import arp, ether_types, ethernet, ipv4, lldp, packet, tcp, vlan

from controller.openflow.frames import (
    ARP_REPLY,
    ARP_REQUEST,
    LLDP_MAC,
    ArpPacket,
    EthernetSummary,
    arp_reply,
    lldp_frame,
    parse_arp,
    parse_ethernet,
    parse_lldp,
)

HOST_A = 0x0A0000000001
HOST_B = 0x0A0000000002
GATEWAY = 0x02F10000AAAA
IP_A = 0x0A000001  # 10.0.0.1
IP_B = 0x0A000002  # 10.0.0.2


def build(*protocols: object) -> bytes:
    frame = packet.Packet()
    for protocol in protocols:
        frame.add_protocol(protocol)
    frame.serialize()
    return bytes(frame.data)


def arp_request_frame() -> bytes:
    return build(
        ethernet.ethernet(
            dst="ff:ff:ff:ff:ff:ff", src="0a:00:00:00:00:01", ethertype=ether_types.ETH_TYPE_ARP
        ),
        arp.arp(
            opcode=arp.ARP_REQUEST,
            src_mac="0a:00:00:00:00:01",
            src_ip="10.0.0.1",
            dst_mac="00:00:00:00:00:00",
            dst_ip="10.0.0.2",
        ),
    )


def tcp_frame(tagged: bool = False) -> bytes:
    eth_type = ether_types.ETH_TYPE_8021Q if tagged else ether_types.ETH_TYPE_IP
    layers: list[object] = [
        ethernet.ethernet(dst="0a:00:00:00:00:02", src="0a:00:00:00:00:01", ethertype=eth_type)
    ]
    if tagged:
        layers.append(vlan.vlan(vid=10, ethertype=ether_types.ETH_TYPE_IP))
    layers += [
        ipv4.ipv4(src="10.0.0.1", dst="10.0.0.2", proto=6),
        tcp.tcp(src_port=40000, dst_port=4791),
        b"payload",
    ]
    return build(*layers)


# ---- LLDP ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dpid", "port"),
    [(1, 1), (0x0000F1A0B0C0D0E0, 48), ((1 << 64) - 1, 0xFFFFFF00), (0, 0)],
)
def test_lldp_round_trip(dpid: int, port: int) -> None:
    assert parse_lldp(lldp_frame(dpid, port, HOST_A)) == (dpid, port)


def test_lldp_goes_to_the_nearest_bridge_group_from_the_port_mac() -> None:
    summary = parse_ethernet(lldp_frame(7, 3, GATEWAY))
    assert summary == EthernetSummary(GATEWAY, LLDP_MAC, ether_types.ETH_TYPE_LLDP, None, None)


def test_lldp_of_others_is_not_ours() -> None:
    def lldp_with(*tlvs: object) -> bytes:
        eth = ethernet.ethernet(
            dst="01:80:c2:00:00:0e", src="0a:00:00:00:00:01", ethertype=ether_types.ETH_TYPE_LLDP
        )
        return build(eth, lldp.lldp([*tlvs, lldp.End()]))

    chassis_mac = lldp.ChassisID(subtype=lldp.ChassisID.SUB_MAC_ADDRESS, chassis_id=b"\x0a" * 6)
    ours_chassis = lldp.ChassisID(
        subtype=lldp.ChassisID.SUB_LOCALLY_ASSIGNED, chassis_id=b"dpid:0000000000000001"
    )
    port_name = lldp.PortID(subtype=lldp.PortID.SUB_INTERFACE_NAME, port_id=b"eth0")
    port_number = lldp.PortID(subtype=lldp.PortID.SUB_PORT_COMPONENT, port_id=b"\0\0\0\1")
    ttl = lldp.TTL(ttl=120)
    mark = lldp.SystemName(system_name=b"flowlane")
    # a host's lldpd: MAC chassis, interface name
    assert parse_lldp(lldp_with(chassis_mac, port_name, ttl)) is None
    # Ryu-style discovery of another controller: our chassis and port format, no mark
    assert parse_lldp(lldp_with(ours_chassis, port_number, ttl)) is None
    # marked, but with a chassis or port we never write
    assert parse_lldp(lldp_with(chassis_mac, port_number, ttl, mark)) is None
    assert parse_lldp(lldp_with(ours_chassis, port_name, ttl, mark)) is None
    bad_digits = lldp.ChassisID(
        subtype=lldp.ChassisID.SUB_LOCALLY_ASSIGNED, chassis_id=b"dpid:00000000000000zz"
    )
    assert parse_lldp(lldp_with(bad_digits, port_number, ttl, mark)) is None
    # and the well-formed one is read
    assert parse_lldp(lldp_with(ours_chassis, port_number, ttl, mark)) == (1, 1)


def test_lldp_parser_rejects_junk_and_other_frames() -> None:
    frame = lldp_frame(5, 2, HOST_A)
    assert parse_lldp(b"") is None
    assert parse_lldp(b"\xff" * 3) is None
    assert parse_lldp(frame[:30]) is None
    assert parse_lldp(arp_request_frame()) is None
    assert parse_lldp(tcp_frame()) is None


# ---- ARP ----------------------------------------------------------------------


def test_arp_request_is_read_with_its_ethernet_addresses() -> None:
    assert parse_arp(arp_request_frame()) == ArpPacket(
        op=ARP_REQUEST,
        sha=HOST_A,
        spa=IP_A,
        tha=0,
        tpa=IP_B,
        eth_src=HOST_A,
        eth_dst=0xFFFFFFFFFFFF,
    )


def test_proxy_reply_answers_the_asker_for_the_target() -> None:
    request = parse_arp(arp_request_frame())
    assert request is not None
    reply = arp_reply(request, HOST_B)
    assert parse_arp(reply) == ArpPacket(
        op=ARP_REPLY, sha=HOST_B, spa=IP_B, tha=HOST_A, tpa=IP_A, eth_src=HOST_B, eth_dst=HOST_A
    )
    # and os-ken reads it as a host's ARP stack would
    decoded = packet.Packet(reply).get_protocol(arp.arp)
    assert (decoded.opcode, decoded.src_ip, decoded.dst_mac) == (2, "10.0.0.2", "0a:00:00:00:00:01")


def test_arp_parser_rejects_junk_and_other_frames() -> None:
    assert parse_arp(b"") is None
    assert parse_arp(arp_request_frame()[:20]) is None
    assert parse_arp(lldp_frame(1, 1, HOST_A)) is None
    assert parse_arp(tcp_frame()) is None
    ipv6_arp = build(
        ethernet.ethernet(ethertype=ether_types.ETH_TYPE_ARP),
        arp.arp(proto=ether_types.ETH_TYPE_IPV6, plen=4),
    )
    assert parse_arp(ipv6_arp) is None


# ---- any frame ------------------------------------------------------------------


def test_ethernet_summary_of_ipv4() -> None:
    assert parse_ethernet(tcp_frame()) == EthernetSummary(
        HOST_A, HOST_B, ether_types.ETH_TYPE_IP, IP_A, IP_B
    )


def test_ethernet_summary_looks_past_vlan_tags() -> None:
    assert parse_ethernet(tcp_frame(tagged=True)) == EthernetSummary(
        HOST_A, HOST_B, ether_types.ETH_TYPE_IP, IP_A, IP_B
    )


def test_ethernet_summary_keeps_what_precedes_a_mangled_header() -> None:
    frame = tcp_frame()
    truncated = frame[: 14 + 20 + 5]  # IPv4 header whole, TCP header cut short
    assert parse_ethernet(truncated) == EthernetSummary(
        HOST_A, HOST_B, ether_types.ETH_TYPE_IP, IP_A, IP_B
    )


@pytest.mark.timeout(20)
def test_a_tcp_option_of_length_zero_does_not_hang_the_reader() -> None:
    """os-ken's TCP option parser loops forever on this; the parsers must never reach it."""
    header = struct.pack("!HHIIBBHHH", 40000, 4791, 0, 0, 6 << 4, 0x02, 1000, 0, 0)
    frame = build(
        ethernet.ethernet(dst="0a:00:00:00:00:02", src="0a:00:00:00:00:01"),
        ipv4.ipv4(src="10.0.0.1", dst="10.0.0.2", proto=6),
        header + b"\x2f\x00\x00\x00",
    )
    assert parse_ethernet(frame) == EthernetSummary(
        HOST_A, HOST_B, ether_types.ETH_TYPE_IP, IP_A, IP_B
    )
    assert parse_lldp(frame) is None
    assert parse_arp(frame) is None


def test_ethernet_summary_of_arp_has_no_ipv4_header() -> None:
    assert parse_ethernet(arp_request_frame()) == EthernetSummary(
        HOST_A, 0xFFFFFFFFFFFF, ether_types.ETH_TYPE_ARP, None, None
    )


def test_too_short_for_ethernet() -> None:
    assert parse_ethernet(b"") is None
    assert parse_ethernet(b"\x01" * 13) is None


@pytest.mark.timeout(60)
def test_no_input_makes_a_parser_raise_or_hang() -> None:
    rng = random.Random(1234)
    seeds = [lldp_frame(9, 4, HOST_A), arp_request_frame(), tcp_frame(), tcp_frame(tagged=True)]
    for _ in range(2000):
        if rng.random() < 0.3:
            data = rng.randbytes(rng.randrange(0, 80))
        else:
            mutated = bytearray(rng.choice(seeds))
            for _ in range(rng.randrange(1, 6)):
                mutated[rng.randrange(len(mutated))] = rng.randrange(256)
            data = bytes(mutated[: rng.randrange(len(mutated) + 1)])
        parse_lldp(data)
        parse_arp(data)
        parse_ethernet(data)
