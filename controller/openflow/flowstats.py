"""Counting-table statistics read straight from the raw OpenFlow 1.3 flow-stats reply.

Detection reads every entry of the counting table at every interval.  os-ken
turns each entry into an ``OFPFlowStats`` with an ``OFPMatch`` of parsed OXM
objects and a list of instruction objects, about 30-70 µs per entry; on a
10 000-flow table that is most of a 100 ms interval of controller CPU, spent
on fields detection never reads.  Detection needs five numbers and six match
fields per entry, so this module reads them with ``struct`` and nothing else.

Learned entries of one flow family all have the same layout (the same OXM
headers in the same order), so the first entry of a layout is walked TLV by
TLV once, and compiled into one ``struct.Struct`` that reads the whole fixed
part and every match field of an entry in a single call; each later entry is
checked against the layout's OXM headers (one tuple comparison) and falls
back to the walk when it differs.  The decoded values are exactly what
``FlowId.from_oxm`` gives for os-ken's parse of the same bytes: same skipped
entries, same integers, same ``duration`` float.

os-ken parses every reply on its receive thread before any handler sees it,
so the decoder alone would save nothing: ``RawFlowStats`` tells os-ken's
OpenFlow 1.3 parser to leave the body of chosen flow-stats replies (by
datapath and xid) unparsed, and ``deferred_body`` gives a handler that body.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from controller.classify.flows import (
    ETH_TYPE_IPV4,
    ETH_TYPE_IPV6,
    IP_PROTO_TCP,
    IP_PROTO_UDP,
    CounterSample,
    FlowId,
)

OFP_VERSION = 4
OFPT_MULTIPART_REPLY = 19
OFPMP_FLOW = 1
OFPMT_OXM = 1
OFPXMC_OPENFLOW_BASIC = 0x8000
MULTIPART_REPLY_HEADER = 16
"""ofp_header (8) + type, flags and 4 bytes of padding: where a reply part's body starts."""

_FLOW_STATS_FIXED = 48
"""ofp_flow_stats up to its ``match``; the match (type, length, OXMs, padding) follows."""

_FIXED = ">HBxIIHHHH4xQQQHH"
"""The fixed part and the match header: length, table_id, duration_sec, duration_nsec,
priority, idle_timeout, hard_timeout, flags, cookie, packet_count, byte_count,
match type, match length."""

_LENGTH, _DURATION_SEC, _DURATION_NSEC, _COOKIE, _PACKETS, _BYTES = 0, 2, 3, 8, 9, 10
_MATCH_TYPE, _MATCH_LENGTH = 11, 12
_OXM_START = struct.calcsize(_FIXED)
_ENTRY_HEAD = struct.Struct(">H")
_MATCH_HEAD = struct.Struct(">HH")
_OXM_HEAD = struct.Struct(">I")
_MP_HEAD = struct.Struct(">BBHIHH")

# OXM field -> (name, value length, struct code); only what a FlowId is made of.
_FIELDS: dict[int, tuple[str, int, str]] = {
    5: ("eth_type", 2, "H"),
    10: ("ip_proto", 1, "B"),
    11: ("ipv4_src", 4, "I"),
    12: ("ipv4_dst", 4, "I"),
    13: ("tcp_src", 2, "H"),
    14: ("tcp_dst", 2, "H"),
    15: ("udp_src", 2, "H"),
    16: ("udp_dst", 2, "H"),
    26: ("ipv6_src", 16, "16s"),
    27: ("ipv6_dst", 16, "16s"),
}
_ADDRESSES = {ETH_TYPE_IPV4: ("ipv4_src", "ipv4_dst"), ETH_TYPE_IPV6: ("ipv6_src", "ipv6_dst")}
_PORTS = {IP_PROTO_TCP: ("tcp_src", "tcp_dst"), IP_PROTO_UDP: ("udp_src", "udp_dst")}
_UNUSABLE = -1
"""A field that is present but masked or of the wrong length: ``from_oxm`` rejects it."""

_MAX_LAYOUTS = 256
_RECENT_LAYOUTS = 8
"""Layouts one decode tries before walking a match: IPv4/IPv6 times TCP/UDP, and spares."""

Entry = tuple[CounterSample, int]
"""A counting entry's sample and its cookie (who claimed the flow)."""


class FlowStatsError(ValueError):
    """The reply's framing is broken (an entry's length runs past the body)."""


@dataclass(frozen=True, slots=True)
class _Build:
    """How one (eth_type, ip_proto) pair of a layout becomes a FlowId."""

    flow: Callable[[tuple[Any, ...]], tuple[Any, ...]]
    """eth_type, ip_proto, src, dst, src_port, dst_port out of the unpacked entry."""

    ipv6: bool
    """Addresses come as 16 bytes, to be made integers."""


Unpack = Callable[[bytes | bytearray | memoryview, int], tuple[Any, ...]]
Getter = Callable[[tuple[Any, ...]], Any]
_Parts = tuple[Unpack, Getter, tuple[int, ...], int, Getter | None, dict[Any, _Build]]


@dataclass(frozen=True, slots=True)
class _Layout:
    """One match layout compiled: a struct for the whole entry head and how to check it."""

    unpack: Unpack
    size: int
    check: Getter
    """Match type, match length and every OXM header of an unpacked entry."""

    expected: tuple[int, ...]
    kind: Getter | None
    """(eth_type, ip_proto) of an entry; None when the layout cannot hold a 5-tuple."""

    builds: dict[Any, _Build]

    @property
    def parts(self) -> _Parts:
        return self.unpack, self.check, self.expected, self.size, self.kind, self.builds


def _no_entry(body: bytes | bytearray | memoryview, offset: int) -> tuple[Any, ...]:
    raise AssertionError("no layout yet")  # never called: its size exceeds any body


_NO_LAYOUT: _Parts = (_no_entry, itemgetter(0), (), 1 << 62, None, {})


_layouts: dict[tuple[int, ...], _Layout] = {}


def _compile(match_length: int, headers: tuple[int, ...]) -> _Layout:
    """A struct reading the fixed part and every OXM of this layout, values where needed."""
    parts = [_FIXED]
    index = len(struct.unpack(_FIXED, bytes(_OXM_START)))
    header_indices: list[int] = []
    where: dict[str, int] = {}
    for header in headers:
        oxm_class, field, masked, length = (
            header >> 16,
            (header >> 9) & 0x7F,
            header & 0x100,
            header & 0xFF,
        )
        parts.append("I")
        header_indices.append(index)
        index += 1
        known = _FIELDS.get(field) if oxm_class == OFPXMC_OPENFLOW_BASIC else None
        if known is None:
            if length:
                parts.append(f"{length}x")
            continue
        name, size, code = known
        if masked or length != size:
            # os-ken reports a masked field as (value, mask), which from_oxm rejects.
            where[name] = _UNUSABLE
            if length:
                parts.append(f"{length}x")
            continue
        parts.append(code)
        where[name] = index  # a repeated field: the last one wins, as in os-ken's dict
        index += 1
    layout = struct.Struct("".join(parts))
    kind_at = (where.get("eth_type", _UNUSABLE), where.get("ip_proto", _UNUSABLE))
    builds: dict[Any, _Build] = {}
    for eth_type, addresses in _ADDRESSES.items():
        for ip_proto, ports in _PORTS.items():
            positions = [where.get(name, _UNUSABLE) for name in (*addresses, *ports)]
            if _UNUSABLE not in positions and _UNUSABLE not in kind_at:
                builds[(eth_type, ip_proto)] = _Build(
                    itemgetter(*kind_at, *positions), eth_type == ETH_TYPE_IPV6
                )
    return _Layout(
        unpack=layout.unpack_from,
        size=layout.size,
        check=itemgetter(_MATCH_TYPE, _MATCH_LENGTH, *header_indices),
        expected=(OFPMT_OXM, match_length, *headers),
        kind=itemgetter(*kind_at) if builds else None,
        builds=builds,
    )


def _layout_of(body: bytes | bytearray | memoryview, offset: int, length: int) -> _Layout | None:
    """Walk one entry's match TLV by TLV; None when it is not a well-formed OXM match."""
    match_type, match_length = _MATCH_HEAD.unpack_from(body, offset + _FLOW_STATS_FIXED)
    if match_type != OFPMT_OXM or match_length < 4 or _FLOW_STATS_FIXED + match_length > length:
        return None
    position = offset + _OXM_START
    end = offset + _FLOW_STATS_FIXED + match_length
    headers: list[int] = []
    while position + 4 <= end:
        (header,) = _OXM_HEAD.unpack_from(body, position)
        position += 4 + (header & 0xFF)
        headers.append(header)
    if position != end:
        return None
    key = (match_length, *headers)
    layout = _layouts.get(key)
    if layout is None:
        if len(_layouts) >= _MAX_LAYOUTS:
            _layouts.clear()
        layout = _layouts[key] = _compile(match_length, tuple(headers))
    return layout


def decode_count_entries(body: bytes | bytearray | memoryview) -> list[Entry]:
    """Every exact TCP/UDP 5-tuple entry of one flow-stats reply body, with its cookie.

    ``body`` is what follows the 16-byte multipart reply header.  Entries that
    are not exact 5-tuples (the learn rule, a table-miss, masked fields) are
    skipped, as ``FlowId.from_oxm`` skips them.
    """
    # The loop runs once per counted flow on every poll: the current layout's parts are
    # kept in locals, and the named tuples are made with tuple.__new__ (their generated
    # __new__ is Python code, a third of the time per entry).
    new = tuple.__new__
    entries: list[Entry] = []
    append = entries.append
    end = len(body)
    offset = 0
    layout: _Layout | None = None
    recent: list[_Parts] = []
    unpack, check, expected, size, kind, builds = _NO_LAYOUT
    while offset < end:
        values: tuple[Any, ...] | None = None
        if offset + size <= end:
            values = unpack(body, offset)
            if check(values) != expected:
                values = None
        if values is None:
            # Families interleave in a real table (hash order): try the other recent layouts
            # before walking the match.
            for parts in recent:
                if offset + parts[3] <= end:
                    values = parts[0](body, offset)
                    if parts[1](values) == parts[2]:
                        unpack, check, expected, size, kind, builds = parts
                        break
                    values = None
        if values is None:
            if offset + _OXM_START > end:
                raise FlowStatsError(f"flow-stats entry at byte {offset} is truncated")
            (length,) = _ENTRY_HEAD.unpack_from(body, offset)
            if length < _OXM_START or offset + length > end:
                raise FlowStatsError(f"flow-stats entry at byte {offset} has length {length}")
            layout = _layout_of(body, offset, length)
            if layout is None:
                offset += length
                continue
            unpack, check, expected, size, kind, builds = layout.parts
            if len(recent) < _RECENT_LAYOUTS:
                recent.append(layout.parts)
            values = unpack(body, offset)
        length = values[_LENGTH]
        if length < size or offset + length > end:
            raise FlowStatsError(f"flow-stats entry at byte {offset} has length {length}")
        offset += length
        if kind is None:
            continue
        build = builds.get(kind(values))
        if build is None:
            continue
        if build.ipv6:
            eth_type, ip_proto, src, dst, src_port, dst_port = build.flow(values)
            flow = FlowId(
                eth_type,
                ip_proto,
                int.from_bytes(src, "big"),
                int.from_bytes(dst, "big"),
                src_port,
                dst_port,
            )
        else:
            flow = new(FlowId, build.flow(values))
        age = values[_DURATION_SEC] + values[_DURATION_NSEC] / 1e9
        sample = new(CounterSample, (flow, values[_BYTES], values[_PACKETS], age))
        append((sample, values[_COOKIE]))
    return entries


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


# ---- keeping os-ken from parsing what detection decodes itself -------------------------------


class RawFlowStats:
    """Flow-stats replies (datapath, xid) that os-ken must hand over unparsed.

    ``install`` wraps the OpenFlow 1.3 parser's multipart-reply entry point:
    a registered reply becomes an ``OFPFlowStatsReply`` with an empty ``body``
    and its bytes in ``buf``, so the usual ``EventOFPFlowStatsReply`` handler
    still fires and every other reply is parsed as before.  Register the xid
    before sending the request and forget it once the reply is complete.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wanted: set[tuple[int, int]] = set()

    def register(self, dpid: int, xid: int) -> None:
        with self._lock:
            self._wanted.add((dpid, xid))

    def forget(self, dpid: int, xid: int) -> None:
        with self._lock:
            self._wanted.discard((dpid, xid))

    def wanted(self, dpid: int | None, xid: int) -> bool:
        # A set lookup is atomic under the GIL: the receive thread takes no lock per reply.
        return (dpid, xid) in self._wanted

    def install(self) -> None:
        """Route os-ken's multipart-reply parsing through this registry (idempotent)."""
        from os_ken.ofproto import ofproto_v1_3 as v13
        from os_ken.ofproto import ofproto_v1_3_parser as v13_parser

        parsers: dict[int, Any] = v13_parser._MSG_PARSERS
        current = parsers[v13.OFPT_MULTIPART_REPLY]
        original = getattr(current, "flowlane_original", current)

        def parse(
            datapath: Any, version: int, msg_type: int, msg_len: int, xid: int, buf: Any
        ) -> Any:
            if self.wanted(getattr(datapath, "id", None), xid) and len(buf) >= msg_len >= 16:
                mp_type, flags = struct.unpack_from(">HH", buf, 8)
                if mp_type == OFPMP_FLOW:
                    msg = v13_parser.OFPFlowStatsReply(datapath)
                    msg.set_headers(version, msg_type, msg_len, xid)
                    msg.set_buf(buf[:msg_len])
                    msg.type, msg.flags, msg.body = mp_type, flags, []
                    msg.flowlane_raw = True
                    return msg
            return original(datapath, version, msg_type, msg_len, xid, buf)

        parse.flowlane_original = original  # type: ignore[attr-defined]
        parsers[v13.OFPT_MULTIPART_REPLY] = parse


def deferred_body(msg: Any) -> memoryview | None:
    """The raw body of a reply ``RawFlowStats`` kept from os-ken, or None for a parsed one."""
    if not getattr(msg, "flowlane_raw", False):
        return None
    return multipart_body(msg.buf)
