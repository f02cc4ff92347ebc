"""A software OpenFlow 1.3 pipeline for the planner's flows.

It lets the unit tests ask the question that matters — "which class, DSCP,
queue and output does this packet get?" — of a plan or of a simulated
switch after a diff, without OVS.  Lookup follows OpenFlow: highest priority
wins; two different entries tied at the top priority are a planning bug and
raise rather than pick one silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from controller.pipeline.diff import FlowDiff
from controller.pipeline.flows import (
    ApplyActions,
    FlowEntry,
    FlowKey,
    GotoTable,
    InstalledFlow,
    Output,
    SetField,
    SetQueue,
    WriteMetadata,
)

MAX_HOPS = 16


class AmbiguousLookupError(RuntimeError):
    """Two different entries of equal priority match one packet."""


class TableMissError(RuntimeError):
    """No entry matched: OpenFlow 1.3 would drop the packet."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the pipeline did to a packet."""

    packet: Mapping[str, int]
    metadata: int
    queue_id: int | None
    outputs: tuple[int, ...]
    trace: tuple[FlowKey, ...]


def _matches(entry: FlowEntry, packet: Mapping[str, int], metadata: int) -> bool:
    for match_field in entry.match:
        value = metadata if match_field.name == "metadata" else packet.get(match_field.name)
        if value is None or not match_field.covers(value):
            return False
    return True


def lookup(
    entries: Iterable[FlowEntry], table_id: int, packet: Mapping[str, int], metadata: int
) -> FlowEntry:
    candidates = [
        entry
        for entry in entries
        if entry.table_id == table_id and _matches(entry, packet, metadata)
    ]
    if not candidates:
        raise TableMissError(f"table {table_id} has no entry for {dict(packet)}")
    top = max(entry.priority for entry in candidates)
    winners = [entry for entry in candidates if entry.priority == top]
    for other in winners[1:]:
        if other.instructions != winners[0].instructions:
            raise AmbiguousLookupError(
                f"{winners[0].key} and {other.key} both match {dict(packet)}"
            )
    return winners[0]


def run_packet(entries: Iterable[FlowEntry], packet: Mapping[str, int]) -> Verdict:
    """Push one packet (a dict of OXM field values) through the pipeline from table 0."""
    flows = tuple(entries)
    fields = dict(packet)
    metadata = 0
    queue_id: int | None = None
    outputs: list[int] = []
    trace: list[FlowKey] = []
    table_id: int | None = 0
    while table_id is not None:
        if len(trace) >= MAX_HOPS:
            raise RuntimeError("pipeline loops")
        entry = lookup(flows, table_id, fields, metadata)
        trace.append(entry.key)
        table_id = None
        for instruction in entry.instructions:
            if isinstance(instruction, ApplyActions):
                for action in instruction.actions:
                    if isinstance(action, SetField):
                        fields[action.field] = action.value
                    elif isinstance(action, SetQueue):
                        queue_id = action.queue_id
                    elif isinstance(action, Output):
                        outputs.append(action.port)
            elif isinstance(instruction, WriteMetadata):
                metadata = (metadata & ~instruction.mask) | (instruction.value & instruction.mask)
            elif isinstance(instruction, GotoTable):
                if instruction.table_id <= entry.table_id:
                    raise RuntimeError(f"goto_table {instruction.table_id} goes backwards")
                table_id = instruction.table_id
    return Verdict(fields, metadata, queue_id, tuple(outputs), tuple(trace))


@dataclass
class SimulatedSwitch:
    """A flow table that applies a ``FlowDiff`` with OpenFlow ADD / DELETE_STRICT semantics."""

    entries: dict[FlowKey, FlowEntry] = field(default_factory=dict)
    foreign: dict[FlowKey, int] = field(default_factory=dict)

    def install(self, flows: Iterable[FlowEntry]) -> None:
        for flow in flows:
            self.foreign.pop(flow.key, None)
            self.entries[flow.key] = flow

    def add_foreign(self, key: FlowKey, cookie: int) -> None:
        """An entry someone else installed (its instructions are unknown to the model)."""
        self.entries.pop(key, None)
        self.foreign[key] = cookie

    def apply(self, diff: FlowDiff) -> None:
        self.install(diff.add)
        for key in diff.delete:
            self.entries.pop(key, None)
            self.foreign.pop(key, None)
        for table_id, cookie in diff.delete_by_cookie:
            for key in [
                k for k, c in self.foreign.items() if (k.table_id, c) == (table_id, cookie)
            ]:
                del self.foreign[key]

    def dump(self) -> list[InstalledFlow]:
        """What a flow-stats reply would show."""
        return [InstalledFlow(key, flow.cookie) for key, flow in self.entries.items()] + [
            InstalledFlow(key, cookie) for key, cookie in self.foreign.items()
        ]
