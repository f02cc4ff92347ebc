"""OpenFlow 1.3 messages a switch sends, packed by hand for the step's unit tests."""

from __future__ import annotations

import struct

from os_ken.ofproto import ofproto_v1_3 as v13


def message(msg_type: int, xid: int, body: bytes) -> bytes:
    return struct.pack("!BBHI", 4, msg_type, 8 + len(body), xid) + body


def multipart(xid: int, mp_type: int, body: bytes = b"", more: bool = False) -> bytes:
    flags = v13.OFPMPF_REPLY_MORE if more else 0
    return message(v13.OFPT_MULTIPART_REPLY, xid, struct.pack("!HH4x", mp_type, flags) + body)


def port(number: int, name: str, speed_kbps: int = 10_000_000, down: bool = False) -> bytes:
    return struct.pack(
        v13.OFP_PORT_PACK_STR,
        number,
        bytes.fromhex(f"0000000000{number:02x}"),
        name.encode(),
        0,
        v13.OFPPS_LINK_DOWN if down else 0,
        0,
        0,
        0,
        0,
        speed_kbps,
        speed_kbps,
    )


def port_status(reason: int, desc: bytes) -> bytes:
    return message(v13.OFPT_PORT_STATUS, 0, struct.pack("!B7x", reason) + desc)


def error(xid: int, err_type: int = v13.OFPET_BAD_REQUEST, code: int = 1) -> bytes:
    return message(v13.OFPT_ERROR, xid, struct.pack("!HH", err_type, code) + b"\0" * 8)


def barrier_reply(xid: int) -> bytes:
    return message(v13.OFPT_BARRIER_REPLY, xid, b"")


def port_stats(number: int, tx_bytes: int) -> bytes:
    return struct.pack(v13.OFP_PORT_STATS_PACK_STR, number, 0, 0, 0, tx_bytes, *(0,) * 10)
