"""Flow-stats replies as a switch sends them, for the decoders' tests.

Laid out with os-ken's own pack strings, so a test compares a decoder with
os-ken's parse of exactly the bytes an OVS switch would send.
"""

from __future__ import annotations

import random
import struct
from typing import Any

from os_ken.lib.pack_utils import msg_pack_into
from os_ken.ofproto import ofproto_v1_3 as v13
from os_ken.ofproto import ofproto_v1_3_parser as v13_parser

MAX_BODY = 0xFFFF - v13.OFP_MULTIPART_REPLY_SIZE


def instruction(index: int) -> Any:
    """Alternately a goto and an apply-actions (DSCP and output), to give entries a tail."""
    if index % 2:
        return v13_parser.OFPInstructionGotoTable(2)
    actions = [v13_parser.OFPActionSetField(ip_dscp=26), v13_parser.OFPActionOutput(3)]
    return v13_parser.OFPInstructionActions(v13.OFPIT_APPLY_ACTIONS, actions)


def entry(
    match: Any,
    rng: random.Random,
    *,
    table: int,
    instructions: int = 0,
    priority: int | None = None,
    cookie: int | None = None,
) -> bytes:
    """One ofp_flow_stats; counters, ages and (unless given) priority and cookie random."""
    tail = bytearray()
    match_length = match.serialize(tail, 0)
    for index in range(instructions):
        instruction(index).serialize(tail, len(tail))
    assert match_length <= len(tail)
    packed = bytearray()
    msg_pack_into(
        v13.OFP_FLOW_STATS_0_PACK_STR,
        packed,
        0,
        v13.OFP_FLOW_STATS_0_SIZE + len(tail),
        table,
        rng.randrange(1 << 32),
        rng.randrange(1_000_000_000),
        rng.randrange(1 << 16) if priority is None else priority,
        10,
        0,
        0,
        rng.choice([0, 1 << 40, rng.randrange(1 << 64)]) if cookie is None else cookie,
        rng.randrange(1 << 64),
        rng.choice([0, rng.randrange(1 << 64)]),
    )
    return bytes(packed + tail)


def reply(body: bytes, more: bool = False, xid: int = 0x55) -> bytes:
    """A whole multipart flow-stats reply message around ``body``."""
    flags = v13.OFPMPF_REPLY_MORE if more else 0
    header = struct.pack("!BBHIHH4x", 4, v13.OFPT_MULTIPART_REPLY, 16 + len(body), xid, 1, flags)
    return header + body


def parts(entries: list[bytes], limit: int = MAX_BODY) -> list[bytes]:
    """Reply bodies of at most ``limit`` bytes, as a switch splits a big table into parts."""
    bodies, current = [], b""
    for item in entries:
        if len(current) + len(item) > limit:
            bodies.append(current)
            current = b""
        current += item
    return [*bodies, current]
