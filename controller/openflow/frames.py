"""Build and read the frames fabric discovery sends and receives: LLDP, ARP, any Ethernet.

Pure byte-in, byte-out codecs over ``os_ken.lib.packet``, with no I/O, so
link discovery and proxy ARP can be tested without a switch.  MACs and IPv4
addresses are ints, as in the planner.  Every parser returns None instead of
raising: packet-ins carry whatever the wire carried, and one malformed frame
must never stop the handler that reads them.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass
from typing import Any

from os_ken.lib.packet import arp, ether_types, ethernet, ipv4, lldp, packet, vlan

LLDP_MAC = 0x0180C200000E
"""Nearest-bridge group address: no standard bridge forwards it, so a frame seen on a
port came straight from the switch at the other end of that link."""

LLDP_TTL_S = 120
SYSTEM_NAME = b"flowlane"
"""The mark that tells our probes from LLDP that hosts or other switches send."""

_CHASSIS_PREFIX = b"dpid:"
_PORT_STRUCT = struct.Struct("!I")

ARP_REQUEST = arp.ARP_REQUEST
ARP_REPLY = arp.ARP_REPLY


def mac_text(mac: int) -> str:
    """os-ken wants MACs as text."""
    return ":".join(f"{byte:02x}" for byte in (mac & 0xFFFFFFFFFFFF).to_bytes(6, "big"))


def mac_int(text: str) -> int:
    return int(text.replace(":", ""), 16)


def _ipv4_text(address: int) -> str:
    return str(ipaddress.IPv4Address(address))


def _ipv4_int(text: str) -> int:
    return int(ipaddress.IPv4Address(text))


_WALKED = (ethernet.ethernet, vlan.vlan, vlan.svlan, lldp.lldp, arp.arp, ipv4.ipv4)
"""Headers the parsers need; the walk stops before transport headers.  Besides saving
time, that keeps clear of os-ken's TCP option parser, which loops forever on an option
of length 0: one crafted packet-in would otherwise hang the thread reading it."""


def _layers(data: bytes) -> list[Any]:
    """The headers os-ken can read from the front of ``data``, outermost first, up to IPv4.

    A layer that fails to parse ends the walk but keeps the layers before
    it: a mangled header must not hide the addresses in front of it.
    os-ken's own parsers assert and raise on short input.
    """
    layers: list[Any] = []
    rest: Any = bytes(data)
    cls: Any = ethernet.ethernet
    while cls in _WALKED and rest:
        try:
            header, cls, rest = cls.parser(rest)
        except Exception:
            break
        if header is None:
            break
        layers.append(header)
    return layers


def _first(layers: list[Any], kind: type) -> Any | None:
    return next((layer for layer in layers if isinstance(layer, kind)), None)


def lldp_frame(dpid: int, port: int, src_mac: int) -> bytes:
    """An LLDP probe that names the switch and port it leaves from.

    The switch on the other end hands it back in a packet-in with its own
    dpid and in-port: that pair of ends is one directed link.  Chassis id
    ``dpid:%016x`` (locally assigned) and a 4-byte port component follow the
    convention Ryu's topology discovery uses; the system name marks it ours.
    """
    frame = packet.Packet()
    frame.add_protocol(
        ethernet.ethernet(
            dst=mac_text(LLDP_MAC), src=mac_text(src_mac), ethertype=ether_types.ETH_TYPE_LLDP
        )
    )
    frame.add_protocol(
        lldp.lldp(
            [
                lldp.ChassisID(
                    subtype=lldp.ChassisID.SUB_LOCALLY_ASSIGNED,
                    chassis_id=_CHASSIS_PREFIX + f"{dpid:016x}".encode(),
                ),
                lldp.PortID(
                    subtype=lldp.PortID.SUB_PORT_COMPONENT, port_id=_PORT_STRUCT.pack(port)
                ),
                lldp.TTL(ttl=LLDP_TTL_S),
                lldp.SystemName(system_name=SYSTEM_NAME),
                lldp.End(),
            ]
        )
    )
    frame.serialize()
    return bytes(frame.data)


def parse_lldp(data: bytes) -> tuple[int, int] | None:
    """(dpid, port) of a flowlane LLDP probe; None for anything else."""
    pdu = _first(_layers(data), lldp.lldp)
    if pdu is None:
        return None
    chassis = port = None
    marked = False
    for tlv in pdu.tlvs:
        if isinstance(tlv, lldp.ChassisID):
            if tlv.subtype == lldp.ChassisID.SUB_LOCALLY_ASSIGNED:
                chassis = tlv.chassis_id
        elif isinstance(tlv, lldp.PortID):
            if tlv.subtype == lldp.PortID.SUB_PORT_COMPONENT:
                port = tlv.port_id
        elif isinstance(tlv, lldp.SystemName):
            marked = tlv.system_name == SYSTEM_NAME
    if not marked or chassis is None or port is None or len(port) != _PORT_STRUCT.size:
        return None
    if not chassis.startswith(_CHASSIS_PREFIX):
        return None
    digits = chassis[len(_CHASSIS_PREFIX) :]
    if len(digits) != 16:
        return None
    try:
        dpid = int(digits.decode("ascii"), 16)
    except ValueError:
        return None
    return dpid, _PORT_STRUCT.unpack(port)[0]


@dataclass(frozen=True, slots=True)
class ArpPacket:
    """An ARP for IPv4 over Ethernet, with the Ethernet addresses it travelled under."""

    op: int
    sha: int
    spa: int
    tha: int
    tpa: int
    eth_src: int
    eth_dst: int


def parse_arp(data: bytes) -> ArpPacket | None:
    """The ARP in a frame; None for other frames and for ARP of other protocols."""
    layers = _layers(data)
    eth, body = _first(layers, ethernet.ethernet), _first(layers, arp.arp)
    if eth is None or body is None:
        return None
    if (body.hwtype, body.proto, body.hlen, body.plen) != (
        arp.ARP_HW_TYPE_ETHERNET,
        ether_types.ETH_TYPE_IP,
        6,
        4,
    ):
        return None
    try:
        return ArpPacket(
            op=body.opcode,
            sha=mac_int(body.src_mac),
            spa=_ipv4_int(body.src_ip),
            tha=mac_int(body.dst_mac),
            tpa=_ipv4_int(body.dst_ip),
            eth_src=mac_int(eth.src),
            eth_dst=mac_int(eth.dst),
        )
    except ValueError:
        return None


def arp_reply(request: ArpPacket, answer_mac: int) -> bytes:
    """The reply a host with ``answer_mac`` would send to ``request``'s sender (proxy ARP).

    Answering at the edge keeps ARP broadcasts off a fabric that has no
    spanning tree to stop them looping.
    """
    frame = packet.Packet()
    frame.add_protocol(
        ethernet.ethernet(
            dst=mac_text(request.sha),
            src=mac_text(answer_mac),
            ethertype=ether_types.ETH_TYPE_ARP,
        )
    )
    frame.add_protocol(
        arp.arp(
            opcode=ARP_REPLY,
            src_mac=mac_text(answer_mac),
            src_ip=_ipv4_text(request.tpa),
            dst_mac=mac_text(request.sha),
            dst_ip=_ipv4_text(request.spa),
        )
    )
    frame.serialize()
    return bytes(frame.data)


@dataclass(frozen=True, slots=True)
class EthernetSummary:
    """What host learning needs from any frame: who sent it, to whom, and its IPv4 ends.

    ``eth_type`` is the innermost one (after any 802.1Q tags); the IPv4
    addresses are None unless the frame carries IPv4.
    """

    eth_src: int
    eth_dst: int
    eth_type: int
    ipv4_src: int | None
    ipv4_dst: int | None


def parse_ethernet(data: bytes) -> EthernetSummary | None:
    layers = _layers(data)
    eth = _first(layers, ethernet.ethernet)
    if eth is None:
        return None
    eth_type = eth.ethertype
    for tag in layers:
        if isinstance(tag, vlan.vlan):
            eth_type = tag.ethertype
    ipv4_src = ipv4_dst = None
    header = _first(layers, ipv4.ipv4)
    if header is not None and eth_type == ether_types.ETH_TYPE_IP:
        ipv4_src, ipv4_dst = _ipv4_int(header.src), _ipv4_int(header.dst)
    return EthernetSummary(mac_int(eth.src), mac_int(eth.dst), eth_type, ipv4_src, ipv4_dst)
