"""Switch-independent description of OpenFlow entries.

The planner speaks in these plain values; only ``controller.openflow`` turns
them into os-ken messages.  That keeps planning pure and lets tests run
packets through a simulated table without a switch.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import IntEnum
from typing import ClassVar

OFPP_NORMAL = 0xFFFFFFFA
OFPP_CONTROLLER = 0xFFFFFFFD
OFPP_IN_PORT = 0xFFFFFFF8

FIELD_BITS = {
    "in_port": 32,
    "metadata": 64,
    "eth_type": 16,
    "vlan_vid": 13,
    "ip_dscp": 6,
    "ip_proto": 8,
    "ipv4_src": 32,
    "ipv4_dst": 32,
    "tcp_src": 16,
    "tcp_dst": 16,
    "udp_src": 16,
    "udp_dst": 16,
    "ipv6_src": 128,
    "ipv6_dst": 128,
    "eth_src": 48,
    "eth_dst": 48,
    "arp_op": 16,
    "arp_spa": 32,
    "arp_tpa": 32,
    "icmpv4_type": 8,
    "icmpv4_code": 8,
    "icmpv6_type": 8,
    "icmpv6_code": 8,
}
"""Fields flowlane can read back from a switch; an entry using another field is kept opaque."""


@dataclass(frozen=True, slots=True, order=True)
class MatchField:
    """One OXM field; ``mask`` is None for an exact match."""

    name: str
    value: int
    mask: int | None = None

    def covers(self, packet_value: int) -> bool:
        if self.mask is None:
            return packet_value == self.value
        return packet_value & self.mask == self.value


Match = tuple[MatchField, ...]


def make_match(*fields: MatchField) -> Match:
    """Canonical form, as a switch reports it back: sorted, masked bits cleared, full masks dropped.

    Two matches that select the same packets compare equal, which the diff
    against a switch's flow table relies on.
    """
    canonical: dict[str, MatchField] = {}
    for item in fields:
        full = (1 << FIELD_BITS[item.name]) - 1
        if item.mask is None or item.mask & full == full:
            normal = MatchField(item.name, item.value & full)
        elif item.mask & full == 0:
            continue
        else:
            normal = MatchField(item.name, item.value & item.mask, item.mask & full)
        if item.name in canonical and canonical[item.name] != normal:
            raise ValueError(f"conflicting values for match field {item.name}")
        canonical[item.name] = normal
    return tuple(sorted(canonical.values()))


class Owner(IntEnum):
    """Who installed an entry; kept in the cookie so a change removes exactly its own."""

    PIPELINE = 1
    POLICY = 2
    FORWARDING = 3
    LEARNED = 4
    """Counting entries OVS learns itself (table COUNT); never planned, never diffed."""
    DETECTOR = 5
    """Exact-match overrides of detected elephants."""
    JOB = 6
    """Entries of registered jobs (their endpoints' flows)."""
    PLACEMENT = 7
    """Exact-match paths of placed elephants (fabric forwarding)."""
    DISCOVERY = 8
    """Entries sending LLDP and ARP to the controller (fabric forwarding)."""


COOKIE_TAG = 0xF1
"""Top cookie byte of every flowlane entry, to tell them from anyone else's."""


@dataclass(frozen=True, slots=True)
class SetField:
    field: str
    value: int


@dataclass(frozen=True, slots=True)
class SetQueue:
    queue_id: int


@dataclass(frozen=True, slots=True)
class Output:
    port: int


@dataclass(frozen=True, slots=True)
class Learn:
    """Nicira ``learn``: OVS adds an exact 5-tuple entry for this packet to ``table_id``.

    That entry counts the flow's bytes with no packet-in and no controller
    round trip; it expires after ``idle_timeout`` seconds without packets.
    """

    table_id: int
    eth_type: int
    ip_proto: int
    idle_timeout: int
    cookie: int
    priority: int = 1


@dataclass(frozen=True, slots=True)
class Resubmit:
    """Nicira ``resubmit(,table)``: look the packet up in ``table_id`` (to count it), then
    carry on with this entry's instructions."""

    table_id: int


@dataclass(frozen=True, slots=True)
class Group:
    """Hand the packet to group ``group_id`` (a select group spreads flows over its buckets)."""

    group_id: int


Action = SetField | SetQueue | Output | Learn | Resubmit | Group


@dataclass(frozen=True, slots=True)
class ApplyActions:
    actions: tuple[Action, ...]


@dataclass(frozen=True, slots=True)
class WriteMetadata:
    value: int
    mask: int


@dataclass(frozen=True, slots=True)
class GotoTable:
    table_id: int


@dataclass(frozen=True, slots=True)
class Meter:
    """Send the packet through meter ``meter_id`` first (rate-limits packet-ins)."""

    meter_id: int


Instruction = Meter | ApplyActions | WriteMetadata | GotoTable


@dataclass(frozen=True, slots=True)
class FlowEntry:
    """A flow as planned. Its cookie is derived from its content.

    A content cookie makes the diff exact without parsing instructions back
    from the switch: same key and same cookie means nothing to do.
    """

    table_id: int
    priority: int
    match: Match
    instructions: tuple[Instruction, ...]
    owner: Owner
    cookie: int = field(init=False, repr=False, compare=False)
    """Computed once: the diff and the reports read it for every entry of every plan."""
    key: FlowKey = field(init=False, repr=False, compare=False)
    """(table, priority, match), also computed once: the diff hashes it for every entry."""
    opaque: ClassVar[bool] = False
    """A planned entry is one flowlane encodes, so it can stand for itself as installed
    (``InstalledFlow``) once a barrier confirms it, without a copy per entry."""

    def __post_init__(self) -> None:
        digest = hashlib.blake2b(
            repr((self.table_id, self.priority, self.match, self.instructions)).encode(),
            digest_size=6,
        ).digest()
        cookie = (COOKIE_TAG << 56) | (int(self.owner) << 48) | int.from_bytes(digest, "big")
        object.__setattr__(self, "cookie", cookie)
        object.__setattr__(self, "key", FlowKey(self.table_id, self.priority, self.match))


@dataclass(frozen=True, slots=True, order=True)
class FlowKey:
    """What identifies an entry in an OpenFlow table (strict match semantics)."""

    table_id: int
    priority: int
    match: Match
    _hash: int = field(init=False, repr=False, compare=False)
    """A match hashes all its fields; the diff hashes each key several times per sync."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.table_id, self.priority, self.match)))

    def __hash__(self) -> int:
        return self._hash


@dataclass(frozen=True, slots=True)
class InstalledFlow:
    """An entry as read back from a switch: its key and cookie are all the diff needs.

    ``opaque`` marks an entry whose match uses a field flowlane does not
    model; it can only be someone else's and is removed by its cookie.
    """

    key: FlowKey
    cookie: int
    opaque: bool = False


def owner_cookie(owner: Owner, low: int = 0) -> int:
    """A cookie for entries that have no content hash (learned ones), by owner."""
    return (COOKIE_TAG << 56) | (int(owner) << 48) | (low & 0xFFFFFFFFFFFF)


def cookie_owner(cookie: int) -> Owner | None:
    """The owner of a flowlane cookie, or None for an entry someone else installed."""
    if cookie >> 56 != COOKIE_TAG:
        return None
    try:
        return Owner((cookie >> 48) & 0xFF)
    except ValueError:
        return None
