"""Count the broadcast frames one host interface sees, to prove a fabric with loops does not storm.

    fabric_net.py count --interface h1-eth0 --seconds 4   # prints "counting", then one JSON line

Runs inside a Mininet host (standard library only: no tcpdump on these
machines).  A raw packet socket sees every frame the interface sends and
receives; the kernel's packet type says which were broadcast, multicast or
our own.  ARP requests are counted on both sides, so a test can check that
each request reached every other edge port at most once, and IPv4
broadcasts so it can check the flood tree delivers each exactly once.
LLDP (the controller's discovery probes) is counted apart: it is expected
on every port, once per discovery round.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time
from dataclasses import asdict, dataclass, field

ETH_P_ALL = 0x0003
ETH_TYPE_IPV4 = 0x0800
ETH_TYPE_ARP = 0x0806
ETH_TYPE_VLAN = 0x8100
ETH_TYPE_LLDP = 0x88CC
ARP_REQUEST = 1
PACKET_BROADCAST = 1
PACKET_MULTICAST = 2
PACKET_OUTGOING = 4
BROADCAST_MAC = b"\xff" * 6


@dataclass
class FrameCounts:
    """What one interface saw; ``received_*`` excludes the host's own frames."""

    sent_arp_requests: int = 0
    sent_ipv4_broadcasts: int = 0
    received_arp_requests: int = 0
    """Broadcast ARP requests from any other host (flooded by the controller, or a loop)."""
    received_ipv4_broadcasts: int = 0
    received_other_broadcasts: int = 0
    received_multicast: int = 0
    """Multicast frames other than LLDP (IPv6 neighbour discovery and the like)."""
    received_lldp: int = 0
    by_type: dict[str, int] = field(default_factory=dict)
    """Every broadcast or multicast frame received, by EtherType (hex)."""


def classify(counts: FrameCounts, frame: bytes, packet_type: int) -> None:
    """Add one frame (as the packet socket delivered it) to ``counts``."""
    if len(frame) < 14:
        return
    dst = frame[:6]
    eth_type = struct.unpack_from("!H", frame, 12)[0]
    offset = 14
    if eth_type == ETH_TYPE_VLAN and len(frame) >= 18:
        eth_type = struct.unpack_from("!H", frame, 16)[0]
        offset = 18
    is_arp_request = (
        eth_type == ETH_TYPE_ARP
        and len(frame) >= offset + 8
        and struct.unpack_from("!H", frame, offset + 6)[0] == ARP_REQUEST
    )
    if packet_type == PACKET_OUTGOING:
        if dst == BROADCAST_MAC and is_arp_request:
            counts.sent_arp_requests += 1
        elif dst == BROADCAST_MAC and eth_type == ETH_TYPE_IPV4:
            counts.sent_ipv4_broadcasts += 1
        return
    if packet_type not in (PACKET_BROADCAST, PACKET_MULTICAST):
        return
    key = f"0x{eth_type:04x}"
    counts.by_type[key] = counts.by_type.get(key, 0) + 1
    if eth_type == ETH_TYPE_LLDP:
        counts.received_lldp += 1
    elif packet_type == PACKET_MULTICAST:
        counts.received_multicast += 1
    elif is_arp_request:
        counts.received_arp_requests += 1
    elif eth_type == ETH_TYPE_IPV4:
        counts.received_ipv4_broadcasts += 1
    else:
        counts.received_other_broadcasts += 1


def count(interface: str, seconds: float) -> FrameCounts:
    """Count frames on ``interface`` for ``seconds``; says "counting" once the socket is bound."""
    counts = FrameCounts()
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
    sock.bind((interface, 0))
    print("counting", flush=True)
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(min(left, 0.2))
        try:
            frame, address = sock.recvfrom(65535)
        except TimeoutError:
            continue
        classify(counts, frame, address[2])
    sock.close()
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    counter = commands.add_parser("count")
    counter.add_argument("--interface", required=True)
    counter.add_argument("--seconds", type=float, required=True)
    args = parser.parse_args(argv)
    print(json.dumps(asdict(count(args.interface, args.seconds))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
