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
from collections.abc import Iterable
from typing import Final

from controller.openflow.flowstats import entries, oxm_fields
from controller.openflow.osken_internals import basic_oxm_fields
from controller.openflow.stats import FlowCounters
from controller.pipeline.flows import FIELD_BITS, FlowKey, InstalledFlow, MatchField, make_match

_BASIC_FIELDS: Final = {
    number: name for number, name in basic_oxm_fields().items() if name in FIELD_BITS
}
"""OXM field number (OpenFlow basic class) → name, for the fields a plan can hold."""


@functools.lru_cache(maxsize=65_536)
def _key(table_id: int, priority: int, oxms: bytes | None) -> tuple[FlowKey, bool]:
    """An entry's key and whether it is opaque, from its OXM fields' bytes."""
    opaque = FlowKey(table_id, priority, ()), True
    tlvs = oxm_fields(oxms) if oxms is not None else None
    if tlvs is None:
        return opaque
    fields: list[MatchField] = []
    for basic, masked, value in tlvs:
        name = _BASIC_FIELDS.get(basic) if basic is not None else None
        if name is None:
            return opaque
        if masked:
            half = len(value) // 2
            fields.append(
                MatchField(
                    name, int.from_bytes(value[:half], "big"), int.from_bytes(value[half:], "big")
                )
            )
        else:
            fields.append(MatchField(name, int.from_bytes(value, "big")))
    try:
        return FlowKey(table_id, priority, make_match(*fields)), False
    except ValueError:  # one field twice with different values: not a match we write
        return opaque


def installed_entries(
    bodies: Iterable[bytes | bytearray | memoryview], skipped_table: int
) -> list[FlowCounters]:
    """Every entry of a raw flow-stats reply but those of ``skipped_table``, in order.

    The counting table is skipped: it holds one learned entry per live flow,
    which OVS owns and the diff ignores.
    """
    installed: list[FlowCounters] = []
    for body in bodies:
        for (_, table, _, _, priority, cookie, packets, octets, _, _), oxms in entries(body):
            if table != skipped_table:
                key, opaque = _key(table, priority, oxms)
                installed.append(FlowCounters(InstalledFlow(key, cookie, opaque), packets, octets))
    return installed
