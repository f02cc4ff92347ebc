"""A switch's installed entries, read straight from the raw flow-stats reply for the audit.

The audit reads every table of every switch every few seconds to repair
drift. os-ken turns each entry into an ``OFPFlowStats`` of match, instruction
and action objects, about 70 µs an entry: on a 400-entry pipeline about 30 ms
of CPU per switch per audit, held in one piece, so a policy change that
arrived meanwhile waited for it. The diff needs only an entry's key (table,
priority, match), its cookie, and for the class counters its packet and byte
counts; a pipeline's matches are the same bytes audit after audit, so each
distinct match is decoded once.

The result is what ``messages.installed_flow`` makes of os-ken's parse of
the same bytes: the same canonical match, and the same opaque entry (removed
by its cookie) for a match using a field flowlane does not model.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable
from typing import Final

from os_ken.ofproto import ofproto_v1_3 as v13
from os_ken.ofproto import oxm_fields

from controller.openflow.flowstats import FlowStatsError
from controller.openflow.stats import FlowCounters
from controller.pipeline.flows import FIELD_BITS, FlowKey, InstalledFlow, MatchField, make_match

_HEAD: Final = struct.Struct(">HBxIIHHHH4xQQQHH")
"""ofp_flow_stats up to and with its match header: length, table_id, duration (2),
priority, idle and hard timeouts, flags, cookie, packet_count, byte_count, match type
and match length."""
_LENGTH, _TABLE, _PRIORITY, _COOKIE, _PACKETS, _BYTES, _MATCH_TYPE, _MATCH_LENGTH = (
    0,
    1,
    4,
    8,
    9,
    10,
    11,
    12,
)
_MATCH_AT: Final = 48
"""Where an entry's match starts; its OXM fields start 4 bytes later."""
_OXM_HEAD: Final = struct.Struct(">I")

_BASIC_FIELDS: Final = {
    field.oxm_field: field.name
    for field in v13.oxm_types
    if isinstance(field, oxm_fields.OpenFlowBasic) and field.name in FIELD_BITS
}
"""OXM field number (OpenFlow basic class) → name, for the fields a plan can hold."""


@functools.lru_cache(maxsize=65_536)
def _key(table_id: int, priority: int, oxms: bytes) -> tuple[FlowKey, bool]:
    """An entry's key and whether it is opaque, from its OXM fields' bytes."""
    fields: list[MatchField] = []
    position = 0
    while position + 4 <= len(oxms):
        (header,) = _OXM_HEAD.unpack_from(oxms, position)
        length = header & 0xFF
        value = oxms[position + 4 : position + 4 + length]
        position += 4 + length
        name = _BASIC_FIELDS.get((header >> 9) & 0x7F) if header >> 16 == 0x8000 else None
        if name is None or len(value) != length:
            return FlowKey(table_id, priority, ()), True
        if header & 0x100:
            half = length // 2
            fields.append(
                MatchField(
                    name, int.from_bytes(value[:half], "big"), int.from_bytes(value[half:], "big")
                )
            )
        else:
            fields.append(MatchField(name, int.from_bytes(value, "big")))
    if position != len(oxms):
        return FlowKey(table_id, priority, ()), True
    try:
        return FlowKey(table_id, priority, make_match(*fields)), False
    except ValueError:  # one field twice with different values: not a match we write
        return FlowKey(table_id, priority, ()), True


def installed_entries(
    bodies: Iterable[bytes | bytearray | memoryview], skipped_table: int
) -> list[FlowCounters]:
    """Every entry of a raw flow-stats reply but those of ``skipped_table``, in order.

    The counting table is skipped: it holds one learned entry per live flow,
    which OVS owns and the diff ignores.
    """
    entries: list[FlowCounters] = []
    for body in bodies:
        buf = bytes(body)
        offset, end = 0, len(buf)
        while offset < end:
            if offset + _HEAD.size > end:
                raise FlowStatsError(f"flow-stats entry at byte {offset} is truncated")
            head = _HEAD.unpack_from(buf, offset)
            length = head[_LENGTH]
            if length < _HEAD.size or offset + length > end:
                raise FlowStatsError(f"flow-stats entry at byte {offset} has length {length}")
            if head[_TABLE] != skipped_table:
                match_length = head[_MATCH_LENGTH]
                if (
                    head[_MATCH_TYPE] != v13.OFPMT_OXM
                    or not 4 <= match_length <= length - _MATCH_AT
                ):
                    key, opaque = FlowKey(head[_TABLE], head[_PRIORITY], ()), True
                else:
                    oxms = buf[offset + _MATCH_AT + 4 : offset + _MATCH_AT + match_length]
                    key, opaque = _key(head[_TABLE], head[_PRIORITY], oxms)
                flow = InstalledFlow(key, head[_COOKIE], opaque)
                entries.append(FlowCounters(flow, head[_PACKETS], head[_BYTES]))
            offset += length
    return entries
