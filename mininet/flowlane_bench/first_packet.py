"""Print the DSCP of the first TCP SYN to a port, seen on a host's interface (stdlib only).

    python -m flowlane_bench.first_packet --port 5201 [--timeout 20]

Runs inside a Mininet host (needs CAP_NET_RAW there); used to check that a
flow's very first packet already carries its class's DSCP.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time

ETH_P_IP = 0x0800


def first_syn(port: int, timeout_s: float) -> dict[str, int] | None:
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(ETH_P_IP)) as sock:
        sock.settimeout(0.5)
        print("capturing", flush=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                frame = sock.recv(65535)
            except TimeoutError:
                continue
            ip = frame[14:]
            if len(ip) < 40 or ip[9] != socket.IPPROTO_TCP:
                continue
            header = (ip[0] & 0x0F) * 4
            dst_port, flags = struct.unpack("!H", ip[header + 2 : header + 4])[0], ip[header + 13]
            if dst_port == port and flags & 0x02 and not flags & 0x10:  # SYN, not SYN-ACK
                return {"dscp": ip[1] >> 2, "port": dst_port}
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--timeout", type=float, default=20.0)
    args = parser.parse_args(argv)
    result = first_syn(args.port, args.timeout)
    print(json.dumps(result))
    return 0 if result is not None else 1


if __name__ == "__main__":
    sys.exit(main())
