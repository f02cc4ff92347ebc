"""A software OpenFlow 1.3 pipeline for the planner's flows.

It lets the unit tests ask the question that matters — "which class, DSCP,
queue and output does this packet get?" — of a plan or of a simulated
switch after a diff, without OVS.  Lookup follows OpenFlow: highest priority
wins; two different entries tied at the top priority are a planning bug and
raise rather than pick one silently.

Groups are simulated too, so fabric tests can ask where a packet leaves a
switch and whether it avoids a dead port: a ``select`` group applies one
live bucket chosen by a hash of the packet's 5-tuple (see ``select_bucket``),
an ``all`` group every live bucket, a ``fast failover`` group the first live
one.  Meters never drop here; the verdict lists the ones a packet passed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from controller.pipeline.diff import FlowDiff
from controller.pipeline.flows import (
    Action,
    ApplyActions,
    FlowEntry,
    FlowKey,
    GotoTable,
    Group,
    InstalledFlow,
    Meter,
    Output,
    SetField,
    SetQueue,
    WriteMetadata,
)
from controller.pipeline.groups import Bucket, GroupEntry, GroupType

MAX_HOPS = 16


class AmbiguousLookupError(RuntimeError):
    """Two different entries of equal priority match one packet."""


class TableMissError(RuntimeError):
    """No entry matched: OpenFlow 1.3 would drop the packet."""


class UnknownGroupError(RuntimeError):
    """An entry sends to a group the switch does not have (OpenFlow refuses such a flow)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the pipeline did to a packet."""

    packet: Mapping[str, int]
    metadata: int
    queue_id: int | None
    outputs: tuple[int, ...]
    trace: tuple[FlowKey, ...]
    meters: tuple[int, ...] = ()
    """Meters the packet went through, in order (a meter drops nothing in simulation)."""


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


HASH_FIELDS = (
    "eth_type",
    "ip_proto",
    "ipv4_src",
    "ipv4_dst",
    "ipv6_src",
    "ipv6_dst",
    "tcp_src",
    "tcp_dst",
    "udp_src",
    "udp_dst",
)
"""What a select group hashes: the 5-tuple (addresses, protocol, L4 ports) of the packet."""

_NO_GROUPS: Mapping[int, GroupEntry] = MappingProxyType({})


def flow_hash(packet: Mapping[str, int]) -> int:
    """A stable hash of the packet's 5-tuple; packets without one (ARP) hash their MACs.

    blake2b of the values, not Python's ``hash``: it must not change between
    runs, so a test that finds a flow on one uplink finds it there again.  It
    is not OVS's ``dp_hash``; tests may rely on "one flow, one bucket" and
    "different flows spread", never on which bucket a given flow takes on OVS.
    """
    names = [name for name in HASH_FIELDS if name in packet]
    if set(names) <= {"eth_type"}:
        names = [*names, *(name for name in ("eth_src", "eth_dst") if name in packet)]
    key = repr(tuple((name, packet[name]) for name in names)).encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")


def _live(bucket: Bucket, live_ports: frozenset[int] | None) -> bool:
    return live_ports is None or bucket.watch_port is None or bucket.watch_port in live_ports


def select_bucket(
    group: GroupEntry, packet: Mapping[str, int], live_ports: frozenset[int] | None = None
) -> tuple[Bucket, ...]:
    """The buckets a group applies to this packet: none when no bucket is live.

    ``select``: one live bucket, ``flow_hash(packet)`` modulo the live
    buckets' total weight, so a flow sticks to one bucket while the live set
    stays the same and a dead port's share moves to the others.
    """
    live = tuple(bucket for bucket in group.buckets if _live(bucket, live_ports))
    if not live:
        return ()
    if group.type is GroupType.ALL:
        return live
    if group.type is GroupType.FAST_FAILOVER:
        return live[:1]
    point = flow_hash(packet) % sum(max(1, bucket.weight) for bucket in live)
    for bucket in live:
        point -= max(1, bucket.weight)
        if point < 0:
            return (bucket,)
    raise AssertionError("unreachable: the point is below the total weight")


def run_packet(
    entries: Iterable[FlowEntry],
    packet: Mapping[str, int],
    groups: Mapping[int, GroupEntry] = _NO_GROUPS,
    live_ports: frozenset[int] | None = None,
) -> Verdict:
    """Push one packet (a dict of OXM field values) through the pipeline from table 0.

    ``groups`` are the switch's groups by id; ``live_ports`` the ports whose
    link is up (None: all), which decides the live buckets of a group.
    """
    flows = tuple(entries)
    fields = dict(packet)
    metadata = 0
    queue_id: int | None = None
    outputs: list[int] = []
    meters: list[int] = []
    trace: list[FlowKey] = []
    table_id: int | None = 0

    def apply(actions: tuple[Action, ...], depth: int = 0) -> None:
        nonlocal queue_id
        for action in actions:
            if isinstance(action, SetField):
                fields[action.field] = action.value
            elif isinstance(action, SetQueue):
                queue_id = action.queue_id
            elif isinstance(action, Output):
                outputs.append(action.port)
            elif isinstance(action, Group):
                group = groups.get(action.group_id)
                if group is None:
                    raise UnknownGroupError(f"group {action.group_id:#x} is not installed")
                if depth >= MAX_HOPS:
                    raise RuntimeError("groups chain in a loop")
                for bucket in select_bucket(group, fields, live_ports):
                    # Each bucket acts on its own copy of the packet (OpenFlow clones it).
                    before = dict(fields)
                    apply(bucket.actions, depth + 1)
                    fields.clear()
                    fields.update(before)

    while table_id is not None:
        if len(trace) >= MAX_HOPS:
            raise RuntimeError("pipeline loops")
        entry = lookup(flows, table_id, fields, metadata)
        trace.append(entry.key)
        table_id = None
        for instruction in entry.instructions:
            if isinstance(instruction, Meter):
                meters.append(instruction.meter_id)
            elif isinstance(instruction, ApplyActions):
                apply(instruction.actions)
            elif isinstance(instruction, WriteMetadata):
                metadata = (metadata & ~instruction.mask) | (instruction.value & instruction.mask)
            elif isinstance(instruction, GotoTable):
                if instruction.table_id <= entry.table_id:
                    raise RuntimeError(f"goto_table {instruction.table_id} goes backwards")
                table_id = instruction.table_id
    return Verdict(fields, metadata, queue_id, tuple(outputs), tuple(trace), tuple(meters))


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
