"""Counting-table statistics read straight from the raw OpenFlow 1.3 flow-stats reply.

Detection reads every entry of the counting table at every interval.  os-ken
turns each entry into an ``OFPFlowStats`` with an ``OFPMatch`` of parsed OXM
objects and a list of instruction objects, about 30-70 µs per entry; on a
10 000-flow table that is most of a 100 ms interval of controller CPU, spent
on fields detection never reads.  Detection needs four numbers and the
5-tuple of each entry, so this module reads them with ``struct``.

A flow's match is the same bytes at every poll: only its counters and age
move.  So the fixed part of an entry (counters, age, cookie) is read with one
``unpack``, and its match bytes are looked up in a table of flows already
decoded; only a flow seen for the first time is walked TLV by TLV. The
decoded values are exactly what ``FlowId.from_oxm`` gives for os-ken's parse
of the same bytes: same skipped entries, same integers, same ``duration``
float.  No os-ken parse happens first: the hub hands the switch actor the
reply's bytes, and ``multipart_body`` cuts out the part these decoders read.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable, Iterator

from controller.classify.flows import CounterSample
from controller.flowid import FlowId

OFP_VERSION = 4
OFPT_MULTIPART_REPLY = 19
OFPMP_FLOW = 1
OFPMT_OXM = 1
OFPXMC_OPENFLOW_BASIC = 0x8000
MULTIPART_REPLY_HEADER = 16
"""ofp_header (8) + type, flags and 4 bytes of padding: where a reply part's body starts."""

ENTRY_HEAD = struct.Struct(">HBxIIH10xQQQHH")
"""ofp_flow_stats up to and with its match header: length, table_id, duration_sec,
duration_nsec, priority, (timeouts, flags, padding), cookie, packet_count, byte_count,
match type, match length."""
_MATCH_AT = 48
"""Where an entry's match starts; its OXM fields start 4 bytes later."""
_OXM_HEAD = struct.Struct(">I")
_MP_HEAD = struct.Struct(">BBHIHH")

# OXM field (OpenFlow basic class) -> (name, value length); only what a FlowId is made of.
_FIELDS: dict[int, tuple[str, int]] = {
    5: ("eth_type", 2),
    10: ("ip_proto", 1),
    11: ("ipv4_src", 4),
    12: ("ipv4_dst", 4),
    13: ("tcp_src", 2),
    14: ("tcp_dst", 2),
    15: ("udp_src", 2),
    16: ("udp_dst", 2),
    26: ("ipv6_src", 16),
    27: ("ipv6_dst", 16),
}
_UNUSABLE = ("masked", "or of another length")
"""What a field that ``from_oxm`` must reject reads as (os-ken gives a masked one as a
(value, mask) pair, which it rejects too)."""

_MAX_FLOWS = 1 << 18
"""Decoded matches kept (about 40 MB at most), least recently used dropped first; one
cache for every switch (the same bytes are the same flow), thread-safe as lru_cache is."""

Entry = tuple[CounterSample, int]
"""A counting entry's sample and its cookie (who claimed the flow)."""


class FlowStatsError(ValueError):
    """The reply's framing is broken (an entry's length runs past the body)."""


Oxm = tuple[int | None, bool, bytes]
"""One OXM field: its number if of the OpenFlow basic class (None otherwise), whether it is
masked, and its value bytes (value then mask when masked)."""


def oxm_fields(oxms: bytes) -> list[Oxm] | None:
    """A match's OXM fields in order; None when their lengths do not add up to the match."""
    fields: list[Oxm] = []
    position, end = 0, len(oxms)
    while position + 4 <= end:
        (header,) = _OXM_HEAD.unpack_from(oxms, position)
        length = header & 0xFF
        basic = (header >> 9) & 0x7F if header >> 16 == OFPXMC_OPENFLOW_BASIC else None
        fields.append((basic, bool(header & 0x100), oxms[position + 4 : position + 4 + length]))
        position += 4 + length
    return fields if position == end else None


def entries(body: bytes | bytearray | memoryview) -> Iterator[tuple[tuple[int, ...], bytes | None]]:
    """Each entry of one reply body: its head (``ENTRY_HEAD``'s fields) and its OXM fields'
    bytes, None for a match that is not OXM or does not fit its entry."""
    buf = bytes(body)
    head = ENTRY_HEAD.unpack_from
    offset, end = 0, len(buf)
    while offset < end:
        if offset + ENTRY_HEAD.size > end:
            raise FlowStatsError(f"flow-stats entry at byte {offset} is truncated")
        fields = head(buf, offset)
        length, kind, match_length = fields[0], fields[-2], fields[-1]
        if length < ENTRY_HEAD.size or offset + length > end:
            raise FlowStatsError(f"flow-stats entry at byte {offset} has length {length}")
        oxms = None
        if kind == OFPMT_OXM and 4 <= match_length <= length - _MATCH_AT:
            oxms = buf[offset + _MATCH_AT + 4 : offset + _MATCH_AT + match_length]
        yield fields, oxms
        offset += length


@functools.lru_cache(maxsize=_MAX_FLOWS)
def _decode_match(oxms: bytes) -> FlowId | None:
    """The flow one match describes; the last of a repeated field wins, as in os-ken."""
    tlvs = oxm_fields(oxms)
    if tlvs is None:
        return None
    fields: dict[str, object] = {}
    for basic, masked, value in tlvs:
        known = _FIELDS.get(basic) if basic is not None else None
        if known is not None:
            name, size = known
            fields[name] = _UNUSABLE if masked or len(value) != size else int.from_bytes(value)
    return FlowId.from_oxm(fields)


def decode_count_entries(body: bytes | bytearray | memoryview) -> list[Entry]:
    """Every exact TCP/UDP 5-tuple entry of one flow-stats reply body, with its cookie.

    ``body`` is what follows the 16-byte multipart reply header.  Entries that
    are not exact 5-tuples (the learn rule, a table-miss, masked fields) are
    skipped, as ``FlowId.from_oxm`` skips them.
    """
    # The loop runs once per counted flow on every poll: the named tuples are made with
    # tuple.__new__ (their generated __new__ is Python code, a third of the time per entry).
    new = tuple.__new__
    flow_of = _decode_match
    decoded: list[Entry] = []
    append = decoded.append
    for (_, _, seconds, nanoseconds, _, cookie, packets, octets, _, _), oxms in entries(body):
        if oxms is None:
            continue
        flow = flow_of(oxms)
        if flow is not None:
            append(
                (new(CounterSample, (flow, octets, packets, seconds + nanoseconds / 1e9)), cookie)
            )
    return decoded


def decode_count_replies(bodies: Iterable[bytes | bytearray | memoryview]) -> list[Entry]:
    """The entries of every part of one multipart flow-stats reply, in order."""
    entries: list[Entry] = []
    for body in bodies:
        entries.extend(decode_count_entries(body))
    return entries


def multipart_body(message: bytes | bytearray | memoryview) -> memoryview:
    """The body of one whole OpenFlow 1.3 flow-stats reply message (os-ken's ``msg.buf``)."""
    if len(message) < MULTIPART_REPLY_HEADER:
        raise FlowStatsError(f"{len(message)} bytes is shorter than a multipart reply header")
    version, msg_type, length, _xid, mp_type, _flags = _MP_HEAD.unpack_from(message, 0)
    if version != OFP_VERSION or msg_type != OFPT_MULTIPART_REPLY or mp_type != OFPMP_FLOW:
        raise FlowStatsError(
            f"not an OpenFlow 1.3 flow-stats reply (version {version}, type {msg_type},"
            f" multipart type {mp_type})"
        )
    if length > len(message) or length < MULTIPART_REPLY_HEADER:
        raise FlowStatsError(f"message length {length} does not fit {len(message)} bytes")
    return memoryview(message)[MULTIPART_REPLY_HEADER:length]
