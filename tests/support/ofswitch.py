"""A simulated OpenFlow 1.3 switch that speaks bytes, for the in-process controller tests.

The per-switch controller logic is a pure step whose commands carry encoded
OpenFlow messages.  ``OfSwitch.receive`` takes exactly those bytes, applies
them as Open vSwitch would (flow, group and meter tables, barriers, roles,
multipart requests) and returns the encoded messages the switch sends back,
so a test puts both the controller's encoders and its decoders under test
without OVS.

Requests are decoded with os-ken's parser (``osken_internals.parse``, the
controller's own) where it has one (flow-mods, echo)
and with ``struct`` where it has none (group-mods, meter-mods, multipart
requests, roles); replies are packed with ``struct`` and os-ken's ``serialize``
helpers, laid out as in OpenFlow 1.3 (the tests decode them with os-ken and
with flowlane's own raw decoders).

OVS behaviour kept because the controller relies on it:
  * an error carries the failing message's xid and its first 64 bytes, and a
    failing message changes nothing;
  * messages apply in order, so a barrier's reply follows every earlier
    message's effect or error;
  * a flow naming a missing group or meter is refused; deleting a group or a
    meter deletes the flows that use it;
  * ADD replaces an entry of the same (table, priority, match) and resets its
    counters; MODIFY keeps them (unless ``OFPFF_RESET_COUNTS``) and the cookie;
  * a match is stored in canonical form (bits outside a mask cleared, a full
    mask dropped, a zero mask dropped) and must carry its prerequisites;
  * a multipart reply is split into parts of at most 65 535 bytes, every part
    but the last flagged ``OFPMPF_REPLY_MORE``.

Usage::

    switch = OfSwitch(0x11, [1, 2, PortSpec(5, "s11-eth5")])
    batch = with_xid(wire.flow_add(entry), 7) + with_xid(wire.BARRIER, 8)
    replies = switch.receive(batch)
    assert [parse(r).msg_type for r in replies] == [v13.OFPT_BARRIER_REPLY]
    assert not diff_flows(switch.flows(), plan.flows).add

Not modelled: timeouts and flow expiry, FLOW_REMOVED, the learn action
(``inject`` adds the entries it would learn), CHECK_OVERLAP, queues, table
features, meters dropping anything.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, NamedTuple

from os_ken.ofproto import ofproto_v1_3 as v13
from os_ken.ofproto import ofproto_v1_3_parser as v13_parser

from controller.openflow import messages
from controller.openflow.installed import _key as flowlane_key
from controller.openflow.installed import installed_entries
from controller.openflow.osken_internals import parse
from controller.openflow.stats import FlowCounters
from controller.pipeline.flows import (
    Action,
    ApplyActions,
    FlowEntry,
    FlowKey,
    GotoTable,
    InstalledFlow,
    Instruction,
    Learn,
    Meter,
    Owner,
    Resubmit,
    WriteMetadata,
    cookie_owner,
)
from controller.pipeline.groups import GroupEntry, MeterEntry
from controller.pipeline.simulate import Verdict, run_packet

OFP_VERSION = v13.OFP_VERSION
HEADER = struct.Struct("!BBHI")
MAX_MESSAGE = 0xFFFF
ERROR_DATA_BYTES = 64
"""OVS quotes at most this much of the failing message in an error."""

OXM_BASIC = v13.OFPXMC_OPENFLOW_BASIC
OXM_EXPERIMENTER = 0xFFFF

_FLOW_COMMANDS = {
    v13.OFPFC_ADD: "ADD",
    v13.OFPFC_MODIFY: "MODIFY",
    v13.OFPFC_MODIFY_STRICT: "MODIFY_STRICT",
    v13.OFPFC_DELETE: "DELETE",
    v13.OFPFC_DELETE_STRICT: "DELETE_STRICT",
}
_GROUP_COMMANDS = {v13.OFPGC_ADD: "ADD", v13.OFPGC_MODIFY: "MODIFY", v13.OFPGC_DELETE: "DELETE"}
_METER_COMMANDS = {v13.OFPMC_ADD: "ADD", v13.OFPMC_MODIFY: "MODIFY", v13.OFPMC_DELETE: "DELETE"}

STATS_KINDS = {
    "desc": v13.OFPMP_DESC,
    "flow": v13.OFPMP_FLOW,
    "port_stats": v13.OFPMP_PORT_STATS,
    "group_desc": v13.OFPMP_GROUP_DESC,
    "meter_config": v13.OFPMP_METER_CONFIG,
    "port_desc": v13.OFPMP_PORT_DESC,
}
"""``fail_stats`` names for the multipart types the switch answers."""

# OXM basic field number -> the (eth_type values, ip_proto value) it requires, as OVS checks.
_IPV4, _IPV6, _ARP = (0x0800,), (0x86DD,), (0x0806,)
_IP = (0x0800, 0x86DD)
_PREREQS: dict[int, tuple[tuple[int, ...], int | None]] = {
    8: (_IP, None),  # ip_dscp
    9: (_IP, None),  # ip_ecn
    10: (_IP, None),  # ip_proto
    11: (_IPV4, None),  # ipv4_src
    12: (_IPV4, None),  # ipv4_dst
    13: (_IP, 6),  # tcp_src
    14: (_IP, 6),  # tcp_dst
    15: (_IP, 17),  # udp_src
    16: (_IP, 17),  # udp_dst
    19: (_IPV4, 1),  # icmpv4_type
    20: (_IPV4, 1),  # icmpv4_code
    21: (_ARP, None),  # arp_op
    22: (_ARP, None),  # arp_spa
    23: (_ARP, None),  # arp_tpa
    26: (_IPV6, None),  # ipv6_src
    27: (_IPV6, None),  # ipv6_dst
    29: (_IPV6, 58),  # icmpv6_type
    30: (_IPV6, 58),  # icmpv6_code
}
_ETH_TYPE, _IP_PROTO = 5, 10


def split_messages(data: bytes) -> list[bytes]:
    """Whole OpenFlow messages of ``data``, by their headers' lengths."""
    out: list[bytes] = []
    offset = 0
    while offset < len(data):
        if len(data) - offset < HEADER.size:
            raise ValueError(f"{len(data) - offset} trailing bytes are not a whole header")
        length = HEADER.unpack_from(data, offset)[2]
        if length < HEADER.size or offset + length > len(data):
            raise ValueError(f"message at byte {offset} claims length {length}")
        out.append(data[offset : offset + length])
        offset += length
    return out


def _message(msg_type: int, xid: int, body: bytes) -> bytes:
    return HEADER.pack(OFP_VERSION, msg_type, HEADER.size + len(body), xid) + body


def _pad8(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 8)


# ---- matches as OXM fields --------------------------------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class Oxm:
    """One OXM field in canonical form: value bits outside the mask cleared, a full mask None."""

    oxm_class: int
    field: int
    value: bytes
    mask: bytes | None = None

    def encode(self) -> bytes:
        payload = self.value + (self.mask or b"")
        header = (
            (self.oxm_class << 16)
            | (self.field << 9)
            | ((self.mask is not None) << 8)
            | len(payload)
        )
        return struct.pack("!I", header) + payload


OxmMatch = tuple[Oxm, ...]


class MatchError(ValueError):
    """A match OVS would refuse (bad length, or a field without its prerequisites)."""


def parse_oxms(oxms: bytes) -> OxmMatch:
    """The canonical fields of a match's OXM bytes (sorted by class and field)."""
    fields: dict[tuple[int, int], Oxm] = {}
    position = 0
    while position + 4 <= len(oxms):
        (header,) = struct.unpack_from("!I", oxms, position)
        oxm_class, number, masked, length = (
            header >> 16,
            (header >> 9) & 0x7F,
            header & 0x100,
            header & 0xFF,
        )
        payload = oxms[position + 4 : position + 4 + length]
        if len(payload) != length:
            raise MatchError(f"OXM field at byte {position} runs past the match")
        position += 4 + length
        if masked and oxm_class != OXM_EXPERIMENTER:
            if length % 2:
                raise MatchError(f"masked OXM field {number} has odd length {length}")
            half = length // 2
            value, mask = int.from_bytes(payload[:half]), int.from_bytes(payload[half:])
            full = (1 << (8 * half)) - 1
            if mask == 0:
                continue
            canonical = Oxm(
                oxm_class,
                number,
                (value & mask).to_bytes(half),
                None if mask == full else mask.to_bytes(half),
            )
        else:
            canonical = Oxm(oxm_class, number, payload)
        if (oxm_class, number) in fields:
            raise MatchError(f"OXM field {number} appears twice")  # OVS: OFPBMC_DUP_FIELD
        fields[(oxm_class, number)] = canonical
    if position != len(oxms):
        raise MatchError("OXM fields do not fill the match")
    return tuple(sorted(fields.values()))


def _basic(match: OxmMatch, number: int) -> int | None:
    for item in match:
        if item.oxm_class == OXM_BASIC and item.field == number and item.mask is None:
            return int.from_bytes(item.value)
    return None


def check_prerequisites(match: OxmMatch) -> None:
    eth_type, ip_proto = _basic(match, _ETH_TYPE), _basic(match, _IP_PROTO)
    for item in match:
        if item.oxm_class != OXM_BASIC or item.field not in _PREREQS:
            continue
        types, proto = _PREREQS[item.field]
        if eth_type not in types or (proto is not None and ip_proto != proto):
            raise MatchError(f"OXM field {item.field} lacks its prerequisites")


def encode_match(match: OxmMatch) -> bytes:
    """An ``ofp_match`` (OXM type) with its padding, as a switch writes it in a reply."""
    oxms = b"".join(item.encode() for item in match)
    return _pad8(struct.pack("!HH", v13.OFPMT_OXM, 4 + len(oxms)) + oxms)


def covers(loose: OxmMatch, entry: OxmMatch) -> bool:
    """Whether ``entry`` is at least as specific as ``loose`` (non-strict flow-mod matching)."""
    have = {(item.oxm_class, item.field): item for item in entry}
    for want in loose:
        got = have.get((want.oxm_class, want.field))
        if got is None:
            return False
        size = len(want.value)
        full = (1 << (8 * size)) - 1
        want_mask = full if want.mask is None else int.from_bytes(want.mask)
        got_mask = full if got.mask is None else int.from_bytes(got.mask)
        if len(got.value) != size or got_mask & want_mask != want_mask:
            return False
        if int.from_bytes(got.value) & want_mask != int.from_bytes(want.value) & want_mask:
            return False
    return True


# ---- records for the tests ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PortSpec:
    """A port as the test creates it; ``curr_speed_kbps`` is OpenFlow's unit."""

    number: int
    name: str
    hw_addr: int = 0
    curr_speed_kbps: int = 10_000_000
    up: bool = True


@dataclass
class _Port:
    spec: PortSpec
    config: int = 0
    state: int = 0
    tx_bytes: int = 0
    rx_bytes: int = 0
    tx_packets: int = 0
    rx_packets: int = 0
    created: float = 0.0

    def desc(self) -> bytes:
        spec = self.spec
        return struct.pack(
            v13.OFP_PORT_PACK_STR,
            spec.number,
            spec.hw_addr.to_bytes(6),
            spec.name.encode()[:15],
            self.config,
            self.state,
            0,
            0,
            0,
            0,
            spec.curr_speed_kbps,
            spec.curr_speed_kbps,
        )


class Message(NamedTuple):
    """A message the switch received, as fault predicates see it."""

    type: int
    xid: int
    data: bytes
    multipart_type: int | None
    """The multipart request's type (``OFPMP_*``), None for other messages."""


class ModRecord(NamedTuple):
    """A flow-, group- or meter-mod the switch received, in order (applied or refused)."""

    kind: str
    """``FLOW_MOD``, ``GROUP_MOD`` or ``METER_MOD``."""
    summary: tuple[Any, ...]
    """FLOW_MOD: (command, FlowKey as flowlane decodes it, cookie); GROUP_MOD and METER_MOD:
    (command, id). Equal summaries mean the same change sent twice."""
    xid: int
    error: tuple[int, int] | None
    """(type, code) of the error it was answered with; None when applied."""
    conn: int = 0
    """The connection (controller) it came on."""


class PacketOutRecord(NamedTuple):
    xid: int
    in_port: int
    outputs: tuple[int, ...]
    data: bytes


@dataclass
class _Reject:
    predicate: Callable[[Message], bool]
    error_type: int
    code: int
    times: int


class OpenFlowError(Exception):
    """Refuse the message being applied with an OFPT_ERROR (type, code)."""

    def __init__(self, error_type: int, code: int, why: str = "") -> None:
        super().__init__(f"error type {error_type} code {code}: {why}")
        self.error_type, self.code = error_type, code


@dataclass
class _Flow:
    table_id: int
    priority: int
    match: OxmMatch
    cookie: int
    idle_timeout: int
    hard_timeout: int
    flags: int
    instructions: bytes
    parsed: list[Any]
    created: float
    packet_count: int = 0
    byte_count: int = 0

    @property
    def ident(self) -> tuple[int, int, OxmMatch]:
        return self.table_id, self.priority, self.match

    def uses_group(self, group_id: int) -> bool:
        return any(
            isinstance(action, v13_parser.OFPActionGroup) and action.group_id == group_id
            for action in _actions_of(self.parsed)
        )

    def outputs_to(self, port: int) -> bool:
        return any(
            isinstance(action, v13_parser.OFPActionOutput) and action.port == port
            for action in _actions_of(self.parsed)
        )

    def uses_meter(self, meter_id: int) -> bool:
        return any(
            isinstance(inst, v13_parser.OFPInstructionMeter) and inst.meter_id == meter_id
            for inst in self.parsed
        )

    def stats(self, now: float) -> bytes:
        age = max(0.0, now - self.created)
        seconds = int(age)
        tail = encode_match(self.match) + self.instructions
        return (
            struct.pack(
                v13.OFP_FLOW_STATS_0_PACK_STR,
                struct.calcsize(v13.OFP_FLOW_STATS_0_PACK_STR) + len(tail),
                self.table_id,
                seconds,
                int((age - seconds) * 1e9),
                self.priority,
                self.idle_timeout,
                self.hard_timeout,
                self.flags,
                self.cookie,
                self.packet_count,
                self.byte_count,
            )
            + tail
        )


def _actions_of(instructions: Iterable[Any]) -> Iterator[Any]:
    for inst in instructions:
        if isinstance(inst, v13_parser.OFPInstructionActions):
            yield from inst.actions


@dataclass
class _Group:
    type: int
    buckets: bytes

    def desc(self, group_id: int) -> bytes:
        return struct.pack("!HBxI", 8 + len(self.buckets), self.type, group_id) + self.buckets


@dataclass
class _Meter:
    flags: int
    bands: bytes

    def config(self, meter_id: int) -> bytes:
        return struct.pack("!HHI", 8 + len(self.bands), self.flags, meter_id) + self.bands


# ---- the switch -------------------------------------------------------------------------------


PortLike = PortSpec | int


class OfSwitch:
    """One OpenFlow 1.3 switch: tables, ports and roles, driven by encoded messages."""

    def __init__(
        self,
        dpid: int,
        ports: Sequence[PortLike] = (),
        n_tables: int = 254,
        bridge_name: str | None = None,
    ) -> None:
        self.dpid = dpid
        self.n_tables = n_tables
        self.clock = 0.0
        """Seconds on the switch's own clock: entries' durations; the test advances it."""
        self._flows: dict[tuple[int, int, OxmMatch], _Flow] = {}
        """By (table, priority, match): what makes two entries the same one."""
        self._groups: dict[int, _Group] = {}
        self._meters: dict[int, _Meter] = {}
        self._ports: dict[int, _Port] = {}
        for port in ports:
            self._add_port(port)
        local = PortSpec(v13.OFPP_LOCAL, bridge_name or f"br{dpid:x}", curr_speed_kbps=0)
        self._local = _Port(local)
        self.roles: dict[int, int] = {}
        """Role of each connection (controller) that asked for one; others are EQUAL."""
        self.generation_id: int | None = None
        self.packet_in_masks: dict[int, tuple[int, int]] = {}
        """(master/equal, slave) packet-in masks a connection set (OFPT_SET_ASYNC)."""
        self.mods_received: list[ModRecord] = []
        self.packet_outs: list[PacketOutRecord] = []
        self.messages_received: list[Message] = []
        self._rejects: list[_Reject] = []
        self._barriers_to_drop = 0
        self._holding = False
        self._held: list[bytes] = []

    # ---- the wire ----

    @property
    def role(self) -> int:
        """The role of connection 0 (the only one of most tests)."""
        return int(self.roles.get(0, v13.OFPCR_ROLE_EQUAL))

    def receive(self, data: bytes, conn: int = 0) -> list[bytes]:
        """Apply one or several concatenated messages in order; the encoded answers, in order
        (none while ``hold`` is on: they wait for ``release``).  ``conn`` names the
        connection they came on: roles are per connection, as in Open vSwitch."""
        replies: list[bytes] = []
        for raw in split_messages(bytes(data)):
            replies.extend(self._one(raw, record=True, conn=conn))
        if self._holding:
            self._held.extend(replies)
            return []
        return replies

    def inject(self, data: bytes) -> None:
        """Apply messages as someone else would (another controller, or OVS's learn action):
        not recorded, answers dropped, faults and role ignored; one the switch would refuse
        raises ``OpenFlowError`` (a broken test setup)."""
        for raw in split_messages(bytes(data)):
            self._apply(raw, self._summary_message(raw))

    def hello(self) -> bytes:
        return _message(v13.OFPT_HELLO, 0, b"")

    # ---- fault knobs ----

    def reject(
        self,
        what: int | Callable[[Message], bool],
        error_type: int,
        code: int,
        times: int = 1,
    ) -> None:
        """Answer the next ``times`` messages of type ``what`` (an ``OFPT_*``), or matching the
        predicate, with this error instead of applying them."""
        predicate = what if callable(what) else (lambda msg, kind=what: msg.type == kind)
        self._rejects.append(_Reject(predicate, error_type, code, times))

    def fail_stats(
        self,
        kind: str | int,
        times: int = 1,
        error_type: int = v13.OFPET_BAD_REQUEST,
        code: int = v13.OFPBRC_BAD_MULTIPART,
    ) -> None:
        """The next ``times`` multipart requests of ``kind`` (a ``STATS_KINDS`` name or an
        ``OFPMP_*``) are answered with an error."""
        mp_type = STATS_KINDS[kind] if isinstance(kind, str) else kind
        self.reject(
            lambda msg: msg.type == v13.OFPT_MULTIPART_REQUEST and msg.multipart_type == mp_type,
            error_type,
            code,
            times,
        )

    def drop_barriers(self, n: int = 1) -> None:
        """Never answer the next ``n`` barrier requests (what was sent before them applies)."""
        self._barriers_to_drop += n

    def hold(self) -> None:
        """Queue the answers to what ``receive`` gets from now on, until ``release``."""
        self._holding = True

    def release(self) -> list[bytes]:
        """The answers queued since ``hold``, in order; answers flow again."""
        held, self._held, self._holding = self._held, [], False
        return held

    # ---- ports ----

    def port_down(self, number: int) -> bytes:
        """Carrier lost: the PORT_STATUS (MODIFY) the switch sends."""
        port = self._ports[number]
        port.state = (port.state | v13.OFPPS_LINK_DOWN) & ~v13.OFPPS_LIVE
        return self._port_status(v13.OFPPR_MODIFY, port)

    def port_up(self, number: int) -> bytes:
        port = self._ports[number]
        port.state = (port.state & ~v13.OFPPS_LINK_DOWN) | v13.OFPPS_LIVE
        return self._port_status(v13.OFPPR_MODIFY, port)

    def add_port(self, port: PortLike) -> bytes:
        return self._port_status(v13.OFPPR_ADD, self._add_port(port))

    def delete_port(self, number: int) -> bytes:
        return self._port_status(v13.OFPPR_DELETE, self._ports.pop(number))

    def set_port_counters(
        self,
        number: int,
        *,
        tx_bytes: int | None = None,
        rx_bytes: int | None = None,
        tx_packets: int | None = None,
        rx_packets: int | None = None,
    ) -> None:
        port = self._ports[number]
        port.tx_bytes = port.tx_bytes if tx_bytes is None else tx_bytes
        port.rx_bytes = port.rx_bytes if rx_bytes is None else rx_bytes
        port.tx_packets = port.tx_packets if tx_packets is None else tx_packets
        port.rx_packets = port.rx_packets if rx_packets is None else rx_packets

    def ports(self) -> list[PortSpec]:
        """The switch's own ports now (``up`` as port_down/port_up left it)."""
        live = self.live_ports()
        return [
            dataclasses.replace(self._ports[number].spec, up=number in live)
            for number in sorted(self._ports)
        ]

    def live_ports(self) -> frozenset[int]:
        return frozenset(
            number
            for number, port in self._ports.items()
            if not port.state & v13.OFPPS_LINK_DOWN and not port.config & v13.OFPPC_PORT_DOWN
        )

    # ---- counters and clock ----

    def advance(self, seconds: float) -> None:
        self.clock += seconds

    def set_flow_counters(
        self,
        which: FlowEntry | FlowKey | Callable[[InstalledFlow], bool],
        packets: int,
        bytes: int,
        duration_s: float | None = None,
    ) -> int:
        """Set the counters (and age) of the entries ``which`` selects; how many it set.

        A FlowEntry or FlowKey selects by flowlane's key; a predicate gets each entry as
        flowlane decodes it. Raises LookupError when nothing matches (a test's typo).
        """
        chosen: Callable[[InstalledFlow], bool]
        if isinstance(which, FlowEntry | FlowKey):
            key = which.key if isinstance(which, FlowEntry) else which
            chosen = lambda flow: flow.key == key  # noqa: E731 - one expression, one use
        else:
            chosen = which
        count = 0
        for flow in self._flows.values():
            if chosen(self._installed(flow)):
                flow.packet_count, flow.byte_count = packets, bytes
                if duration_s is not None:
                    flow.created = self.clock - duration_s
                count += 1
        if not count:
            raise LookupError("no entry of the switch is selected")
        return count

    def packet_in(
        self,
        in_port: int,
        data: bytes,
        reason: int = v13.OFPR_ACTION,
        table_id: int = 0,
        cookie: int = 0,
    ) -> bytes:
        """The PACKET_IN the switch sends for ``data`` arriving on ``in_port`` (xid 0)."""
        match = bytearray()
        v13_parser.OFPMatch(in_port=in_port).serialize(match, 0)
        head = struct.pack(
            v13.OFP_PACKET_IN_PACK_STR, v13.OFP_NO_BUFFER, len(data), reason, table_id, cookie
        )
        return _message(v13.OFPT_PACKET_IN, 0, head + bytes(match) + b"\0\0" + bytes(data))

    def wants_packet_in(self, conn: int, reason: int = v13.OFPR_ACTION) -> bool:
        """Whether connection ``conn`` is sent a packet-in (Open vSwitch's defaults: all
        reasons to a master or equal, none to a slave, unless it set its own masks)."""
        slave = self.roles.get(conn) == v13.OFPCR_ROLE_SLAVE
        masks = self.packet_in_masks.get(conn, (0b111, 0))
        return bool(masks[1 if slave else 0] & (1 << reason))

    # ---- introspection ----

    def flow_counters(self, table_id: int | None = None) -> list[FlowCounters]:
        """Every entry as flowlane's audit decodes the switch's flow-stats reply."""
        bodies = [self._flow_stats_body(table_id)]
        return installed_entries(bodies, skipped_table=-1)

    def flows(self, table_id: int | None = None) -> list[InstalledFlow]:
        """Every entry as flowlane reads it back: what ``diff_flows`` compares with a plan."""
        return [counted.flow for counted in self.flow_counters(table_id)]

    def entries(self) -> list[FlowEntry]:
        """Every entry flowlane can model, rebuilt as a planner ``FlowEntry`` (instructions
        decoded from the bytes): for ``lookup``. An entry of flowlane's own whose rebuilt
        cookie equals its installed one round-tripped exactly."""
        rebuilt: list[FlowEntry] = []
        for flow in self._flows.values():
            installed = self._installed(flow)
            instructions = _decode_instructions(flow.parsed)
            if installed.opaque or instructions is None:
                continue
            owner = cookie_owner(flow.cookie) or Owner.PIPELINE
            rebuilt.append(
                FlowEntry(flow.table_id, flow.priority, installed.key.match, instructions, owner)
            )
        return rebuilt

    def groups(self) -> dict[int, GroupEntry | None]:
        """Groups by id as flowlane decodes a group-desc reply (None: not a group flowlane
        makes)."""
        return {
            int(desc.group_id): messages.installed_group(desc)
            for desc in self._parsed_parts(v13.OFPMP_GROUP_DESC)
        }

    def meters(self) -> dict[int, MeterEntry | None]:
        """Meters by id as flowlane decodes a meter-config reply (None: not flowlane's shape)."""
        return {
            int(config.meter_id): messages.installed_meter(config)
            for config in self._parsed_parts(v13.OFPMP_METER_CONFIG)
        }

    def lookup(
        self, packet: Mapping[str, int], live_ports: frozenset[int] | None = None
    ) -> Verdict:
        """Which class, queue and output ``packet`` gets here (controller.pipeline.simulate),
        with the switch's groups and (unless given) its live ports."""
        groups = {gid: group for gid, group in self.groups().items() if group is not None}
        live = self.live_ports() if live_ports is None else live_ports
        return run_packet(self.entries(), packet, groups, live)

    def mods(self, kind: str | None = None) -> list[ModRecord]:
        return [mod for mod in self.mods_received if kind is None or mod.kind == kind]

    # ---- applying one message ----

    def _summary_message(self, raw: bytes) -> Message:
        _, msg_type, _, xid = HEADER.unpack_from(raw, 0)
        mp_type = None
        if msg_type == v13.OFPT_MULTIPART_REQUEST and len(raw) >= 12:
            (mp_type,) = struct.unpack_from("!H", raw, 8)
        return Message(msg_type, xid, raw, mp_type)

    def _one(self, raw: bytes, record: bool, conn: int = 0) -> list[bytes]:
        message = self._summary_message(raw)
        self.messages_received.append(message)
        error: tuple[int, int] | None = None
        replies: list[bytes] = []
        rejected = self._rejected(message)
        try:
            if HEADER.unpack_from(raw, 0)[0] != OFP_VERSION:
                raise OpenFlowError(v13.OFPET_BAD_REQUEST, v13.OFPBRC_BAD_VERSION)
            if rejected is not None:
                raise OpenFlowError(*rejected, "rejected by the test")
            if self.roles.get(conn) == v13.OFPCR_ROLE_SLAVE and message.type in (
                v13.OFPT_FLOW_MOD,
                v13.OFPT_GROUP_MOD,
                v13.OFPT_METER_MOD,
                v13.OFPT_PACKET_OUT,
            ):
                raise OpenFlowError(v13.OFPET_BAD_REQUEST, v13.OFPBRC_IS_SLAVE)
            replies = self._apply(raw, message, conn)
        except OpenFlowError as exc:
            error = (exc.error_type, exc.code)
            replies = [self._error(message, exc.error_type, exc.code)]
        if record and message.type in _MOD_KINDS:
            self.mods_received.append(
                ModRecord(_MOD_KINDS[message.type], _mod_summary(raw), message.xid, error, conn)
            )
        return replies

    def _rejected(self, message: Message) -> tuple[int, int] | None:
        for rule in self._rejects:
            if rule.times > 0 and rule.predicate(message):
                rule.times -= 1
                return rule.error_type, rule.code
        return None

    def _error(self, message: Message, error_type: int, code: int) -> bytes:
        body = struct.pack("!HH", error_type, code) + message.data[:ERROR_DATA_BYTES]
        return _message(v13.OFPT_ERROR, message.xid, body)

    def _apply(self, raw: bytes, message: Message, conn: int = 0) -> list[bytes]:
        kind, xid = message.type, message.xid
        if kind == v13.OFPT_FLOW_MOD:
            self._flow_mod(raw)
        elif kind == v13.OFPT_GROUP_MOD:
            self._group_mod(raw)
        elif kind == v13.OFPT_METER_MOD:
            self._meter_mod(raw)
        elif kind == v13.OFPT_BARRIER_REQUEST:
            if self._barriers_to_drop:
                self._barriers_to_drop -= 1
                return []
            return [_message(v13.OFPT_BARRIER_REPLY, xid, b"")]
        elif kind == v13.OFPT_ECHO_REQUEST:
            return [_message(v13.OFPT_ECHO_REPLY, xid, raw[HEADER.size :])]
        elif kind == v13.OFPT_HELLO or kind == v13.OFPT_SET_CONFIG:
            return []
        elif kind == v13.OFPT_FEATURES_REQUEST:
            body = struct.pack(
                v13.OFP_SWITCH_FEATURES_PACK_STR, self.dpid, 0, self.n_tables, 0, 0x4F, 0
            )
            return [_message(v13.OFPT_FEATURES_REPLY, xid, body)]
        elif kind == v13.OFPT_PACKET_OUT:
            self._packet_out(raw, xid)
        elif kind == v13.OFPT_ROLE_REQUEST:
            return [self._role(raw, xid, conn)]
        elif kind == v13.OFPT_SET_ASYNC:
            self.packet_in_masks[conn] = struct.unpack_from("!II", raw, 8)
        elif kind == v13.OFPT_MULTIPART_REQUEST:
            return self._multipart(raw, xid)
        else:
            raise OpenFlowError(v13.OFPET_BAD_REQUEST, v13.OFPBRC_BAD_TYPE)
        return []

    # ---- flows ----

    def _flow_mod(self, raw: bytes) -> None:
        try:
            msg = parse(raw)
        except Exception as exc:  # ParseError, or whatever os-ken's classes raise on odd values
            raise OpenFlowError(v13.OFPET_BAD_REQUEST, v13.OFPBRC_BAD_LEN, repr(exc)) from exc
        command = msg.command
        if command not in _FLOW_COMMANDS:
            raise OpenFlowError(v13.OFPET_FLOW_MOD_FAILED, v13.OFPFMFC_BAD_COMMAND)
        match_length = struct.unpack_from("!H", raw, 50)[0]
        try:
            match = parse_oxms(raw[52 : 48 + match_length])
            check_prerequisites(match)
        except MatchError as exc:
            raise OpenFlowError(v13.OFPET_BAD_MATCH, v13.OFPBMC_BAD_PREREQ, str(exc)) from exc
        instructions = raw[48 + match_length + (-match_length % 8) :]
        if command in (v13.OFPFC_DELETE, v13.OFPFC_DELETE_STRICT):
            strict = command == v13.OFPFC_DELETE_STRICT
            doomed = self._select(msg, match, strict)
            for flow in doomed:
                del self._flows[flow.ident]
            return
        if msg.table_id >= self.n_tables:
            raise OpenFlowError(v13.OFPET_FLOW_MOD_FAILED, v13.OFPFMFC_BAD_TABLE_ID)
        self._check_instructions(msg.table_id, msg.instructions)
        if command == v13.OFPFC_ADD:
            added = _Flow(
                msg.table_id,
                msg.priority,
                match,
                msg.cookie,
                msg.idle_timeout,
                msg.hard_timeout,
                msg.flags,
                instructions,
                list(msg.instructions),
                self.clock,
            )
            # A replaced entry goes with its counters and age (OpenFlow 1.3, 6.4).
            self._flows.pop(added.ident, None)
            self._flows[added.ident] = added
            return
        for flow in self._select(msg, match, command == v13.OFPFC_MODIFY_STRICT, filters=False):
            flow.instructions, flow.parsed = instructions, list(msg.instructions)
            if msg.flags & v13.OFPFF_RESET_COUNTS:
                flow.packet_count = flow.byte_count = 0

    def _select(self, msg: Any, match: OxmMatch, strict: bool, filters: bool = True) -> list[_Flow]:
        """The entries a MODIFY/DELETE(_STRICT) or flow-stats request names (OpenFlow 1.3
        6.4): table (or all), cookie under its mask, out_port/out_group (deletes and stats)."""
        candidates: Iterable[_Flow] = self._flows.values()
        if strict and msg.table_id != v13.OFPTT_ALL:  # one key at most: no scan of the table
            exact = self._flows.get((msg.table_id, msg.priority, match))
            candidates = () if exact is None else (exact,)
        chosen: list[_Flow] = []
        for flow in candidates:
            if msg.table_id != v13.OFPTT_ALL and flow.table_id != msg.table_id:
                continue
            if msg.cookie_mask and (flow.cookie ^ msg.cookie) & msg.cookie_mask:
                continue
            if strict:
                if (flow.priority, flow.match) != (msg.priority, match):
                    continue
            elif not covers(match, flow.match):
                continue
            if filters and msg.out_port != v13.OFPP_ANY and not flow.outputs_to(msg.out_port):
                continue
            if filters and msg.out_group != v13.OFPG_ANY and not flow.uses_group(msg.out_group):
                continue
            chosen.append(flow)
        return chosen

    def _check_instructions(self, table_id: int, instructions: Sequence[Any]) -> None:
        """What OVS refuses in a new entry's instructions."""
        for inst in instructions:
            if isinstance(inst, v13_parser.OFPInstructionGotoTable) and not (
                table_id < inst.table_id < self.n_tables
            ):
                raise OpenFlowError(v13.OFPET_BAD_INSTRUCTION, v13.OFPBIC_BAD_TABLE_ID)
            if (
                isinstance(inst, v13_parser.OFPInstructionMeter)
                and inst.meter_id not in self._meters
            ):
                raise OpenFlowError(v13.OFPET_METER_MOD_FAILED, v13.OFPMMFC_INVALID_METER)
        for action in _actions_of(instructions):
            if (
                isinstance(action, v13_parser.OFPActionGroup)
                and action.group_id not in self._groups
            ):
                raise OpenFlowError(v13.OFPET_BAD_ACTION, v13.OFPBAC_BAD_OUT_GROUP)

    def _drop_flows(self, doomed: Callable[[_Flow], bool]) -> None:
        self._flows = {ident: flow for ident, flow in self._flows.items() if not doomed(flow)}

    def _installed(self, flow: _Flow) -> InstalledFlow:
        oxms = b"".join(item.encode() for item in flow.match)
        key, opaque = flowlane_key(flow.table_id, flow.priority, oxms)
        return InstalledFlow(key, flow.cookie, opaque)

    # ---- groups and meters ----

    def _group_mod(self, raw: bytes) -> None:
        command, group_type, group_id = struct.unpack_from("!HBxI", raw, 8)
        buckets = raw[16:]
        if command == v13.OFPGC_DELETE:
            doomed = set(self._groups) if group_id == v13.OFPG_ALL else {group_id}
            for gid in doomed & set(self._groups):
                del self._groups[gid]
                self._drop_flows(functools.partial(_Flow.uses_group, group_id=gid))
            return
        if command not in (v13.OFPGC_ADD, v13.OFPGC_MODIFY):
            raise OpenFlowError(v13.OFPET_GROUP_MOD_FAILED, v13.OFPGMFC_BAD_COMMAND)
        if group_id > v13.OFPG_MAX:
            raise OpenFlowError(v13.OFPET_GROUP_MOD_FAILED, v13.OFPGMFC_INVALID_GROUP)
        if group_type not in (v13.OFPGT_ALL, v13.OFPGT_SELECT, v13.OFPGT_INDIRECT, v13.OFPGT_FF):
            raise OpenFlowError(v13.OFPET_GROUP_MOD_FAILED, v13.OFPGMFC_BAD_TYPE)
        if command == v13.OFPGC_ADD and group_id in self._groups:
            raise OpenFlowError(v13.OFPET_GROUP_MOD_FAILED, v13.OFPGMFC_GROUP_EXISTS)
        if command == v13.OFPGC_MODIFY and group_id not in self._groups:
            raise OpenFlowError(v13.OFPET_GROUP_MOD_FAILED, v13.OFPGMFC_UNKNOWN_GROUP)
        self._groups[group_id] = _Group(group_type, buckets)

    def _meter_mod(self, raw: bytes) -> None:
        command, flags, meter_id = struct.unpack_from("!HHI", raw, 8)
        bands = raw[16:]
        if command == v13.OFPMC_DELETE:
            doomed = set(self._meters) if meter_id == v13.OFPM_ALL else {meter_id}
            for mid in doomed & set(self._meters):
                del self._meters[mid]
                self._drop_flows(functools.partial(_Flow.uses_meter, meter_id=mid))
            return
        if command not in (v13.OFPMC_ADD, v13.OFPMC_MODIFY):
            raise OpenFlowError(v13.OFPET_METER_MOD_FAILED, v13.OFPMMFC_BAD_COMMAND)
        if meter_id == 0 or meter_id > v13.OFPM_MAX:
            raise OpenFlowError(v13.OFPET_METER_MOD_FAILED, v13.OFPMMFC_INVALID_METER)
        if command == v13.OFPMC_ADD and meter_id in self._meters:
            raise OpenFlowError(v13.OFPET_METER_MOD_FAILED, v13.OFPMMFC_METER_EXISTS)
        if command == v13.OFPMC_MODIFY and meter_id not in self._meters:
            raise OpenFlowError(v13.OFPET_METER_MOD_FAILED, v13.OFPMMFC_UNKNOWN_METER)
        self._meters[meter_id] = _Meter(flags, bands)

    # ---- packet-out and roles ----

    def _packet_out(self, raw: bytes, xid: int) -> None:
        _buffer, in_port, actions_length = struct.unpack_from(v13.OFP_PACKET_OUT_PACK_STR, raw, 8)
        offset, end = v13.OFP_PACKET_OUT_SIZE, v13.OFP_PACKET_OUT_SIZE + actions_length
        outputs: list[int] = []
        while offset < end:
            action = v13_parser.OFPAction.parser(raw, offset)
            if isinstance(action, v13_parser.OFPActionOutput):
                outputs.append(action.port)
            offset += action.len
        self.packet_outs.append(PacketOutRecord(xid, in_port, tuple(outputs), raw[end:]))

    def _role(self, raw: bytes, xid: int, conn: int = 0) -> bytes:
        role, generation = struct.unpack_from(v13.OFP_ROLE_REQUEST_PACK_STR, raw, 8)
        if role not in (
            v13.OFPCR_ROLE_NOCHANGE,
            v13.OFPCR_ROLE_EQUAL,
            v13.OFPCR_ROLE_MASTER,
            v13.OFPCR_ROLE_SLAVE,
        ):
            raise OpenFlowError(v13.OFPET_ROLE_REQUEST_FAILED, v13.OFPRRFC_BAD_ROLE)
        if role in (v13.OFPCR_ROLE_MASTER, v13.OFPCR_ROLE_SLAVE):
            # Generation ids compare as a wrapping 64-bit sequence (OpenFlow 1.3, 6.3.5).
            if self.generation_id is not None:
                distance = (generation - self.generation_id) & 0xFFFFFFFFFFFFFFFF
                if distance >= 1 << 63:
                    raise OpenFlowError(v13.OFPET_ROLE_REQUEST_FAILED, v13.OFPRRFC_STALE)
            self.generation_id = generation
        if role == v13.OFPCR_ROLE_MASTER:
            # One master: the previous one becomes a slave (OpenFlow 1.3, 6.3.5).
            for other, held in self.roles.items():
                if other != conn and held == v13.OFPCR_ROLE_MASTER:
                    self.roles[other] = v13.OFPCR_ROLE_SLAVE
        if role != v13.OFPCR_ROLE_NOCHANGE:
            self.roles[conn] = role
        reply_generation = 0xFFFFFFFFFFFFFFFF if self.generation_id is None else self.generation_id
        current = self.roles.get(conn, v13.OFPCR_ROLE_EQUAL)
        body = struct.pack(v13.OFP_ROLE_REQUEST_PACK_STR, current, reply_generation)
        return _message(v13.OFPT_ROLE_REPLY, xid, body)

    # ---- multipart ----

    def _multipart(self, raw: bytes, xid: int) -> list[bytes]:
        (mp_type,) = struct.unpack_from("!H", raw, 8)
        body = raw[16:]
        if mp_type == v13.OFPMP_FLOW:
            return self._parts(xid, mp_type, self._flow_stats_entries(raw))
        if mp_type == v13.OFPMP_GROUP_DESC:
            items = [self._groups[gid].desc(gid) for gid in sorted(self._groups)]
        elif mp_type == v13.OFPMP_METER_CONFIG:
            (wanted,) = struct.unpack_from("!I", body, 0)
            items = [
                self._meters[mid].config(mid)
                for mid in sorted(self._meters)
                if wanted == v13.OFPM_ALL or wanted == mid
            ]
        elif mp_type == v13.OFPMP_PORT_DESC:
            items = [self._ports[n].desc() for n in sorted(self._ports)] + [self._local.desc()]
        elif mp_type == v13.OFPMP_PORT_STATS:
            (wanted,) = struct.unpack_from("!I", body, 0)
            ports = [*(self._ports[n] for n in sorted(self._ports)), self._local]
            items = [
                self._port_stats(port)
                for port in ports
                if wanted == v13.OFPP_ANY or wanted == port.spec.number
            ]
        elif mp_type == v13.OFPMP_DESC:
            items = [
                struct.pack(
                    v13.OFP_DESC_PACK_STR,
                    b"flowlane tests",
                    b"OfSwitch",
                    b"simulated",
                    b"None",
                    f"dpid {self.dpid:016x}".encode(),
                )
            ]
        else:
            raise OpenFlowError(v13.OFPET_BAD_REQUEST, v13.OFPBRC_BAD_MULTIPART)
        return self._parts(xid, mp_type, items)

    def _flow_stats_entries(self, raw: bytes) -> list[bytes]:
        table_id, out_port, out_group, cookie, cookie_mask = struct.unpack_from(
            v13.OFP_FLOW_STATS_REQUEST_0_PACK_STR, raw, 16
        )
        (match_length,) = struct.unpack_from("!H", raw, 50)
        try:
            match = parse_oxms(raw[52 : 48 + match_length])
        except MatchError as exc:
            raise OpenFlowError(v13.OFPET_BAD_MATCH, v13.OFPBMC_BAD_LEN, str(exc)) from exc
        request = SimpleNamespace(
            table_id=table_id,
            out_port=out_port,
            out_group=out_group,
            cookie=cookie,
            cookie_mask=cookie_mask,
        )
        return [flow.stats(self.clock) for flow in self._select(request, match, strict=False)]

    def _flow_stats_body(self, table_id: int | None) -> bytes:
        return b"".join(
            flow.stats(self.clock)
            for flow in self._flows.values()
            if table_id is None or flow.table_id == table_id
        )

    def _parts(self, xid: int, mp_type: int, items: Sequence[bytes]) -> list[bytes]:
        """A multipart reply in parts of at most 65 535 bytes, as OVS splits one."""
        limit = MAX_MESSAGE - v13.OFP_MULTIPART_REPLY_SIZE
        bodies: list[bytes] = []
        current = b""
        for item in items:
            if current and len(current) + len(item) > limit:
                bodies.append(current)
                current = b""
            current += item
        bodies.append(current)
        return [
            _message(
                v13.OFPT_MULTIPART_REPLY,
                xid,
                struct.pack(
                    "!HH4x", mp_type, v13.OFPMPF_REPLY_MORE if index < len(bodies) - 1 else 0
                )
                + body,
            )
            for index, body in enumerate(bodies)
        ]

    def _parsed_parts(self, mp_type: int) -> list[Any]:
        """The body of this switch's own reply to a request of ``mp_type``, parsed by os-ken."""
        request = struct.pack("!HH4x", mp_type, 0)
        if mp_type == v13.OFPMP_METER_CONFIG:
            request += struct.pack("!I4x", v13.OFPM_ALL)
        body: list[Any] = []
        for part in self._multipart(_message(v13.OFPT_MULTIPART_REQUEST, 0, request), 0):
            body.extend(parse(part).body)
        return body

    def _port_stats(self, port: _Port) -> bytes:
        age = max(0.0, self.clock - port.created)
        return struct.pack(
            v13.OFP_PORT_STATS_PACK_STR,
            port.spec.number,
            port.rx_packets,
            port.tx_packets,
            port.rx_bytes,
            port.tx_bytes,
            *([0] * 8),
            int(age),
            int((age - int(age)) * 1e9),
        )

    def _add_port(self, port: PortLike) -> _Port:
        spec = port if isinstance(port, PortSpec) else PortSpec(port, f"s{self.dpid}-eth{port}")
        if spec.number in self._ports:
            raise ValueError(f"port {spec.number} exists")
        state = v13.OFPPS_LIVE if spec.up else v13.OFPPS_LINK_DOWN
        self._ports[spec.number] = added = _Port(spec, state=state, created=self.clock)
        return added

    def _port_status(self, reason: int, port: _Port) -> bytes:
        body = struct.pack("!B7x", reason) + port.desc()
        return _message(v13.OFPT_PORT_STATUS, 0, body)


_MOD_KINDS = {
    v13.OFPT_FLOW_MOD: "FLOW_MOD",
    v13.OFPT_GROUP_MOD: "GROUP_MOD",
    v13.OFPT_METER_MOD: "METER_MOD",
}


def _mod_summary(raw: bytes) -> tuple[Any, ...]:
    """What a mod changes, independent of its xid (see ``ModRecord.summary``)."""
    msg_type = raw[1]
    if msg_type == v13.OFPT_FLOW_MOD and len(raw) >= 56:
        cookie, _mask, table_id, command, _idle, _hard, priority = struct.unpack_from(
            "!QQBBHHH", raw, 8
        )
        (match_length,) = struct.unpack_from("!H", raw, 50)
        key, _opaque = flowlane_key(table_id, priority, raw[52 : 48 + match_length])
        return (_FLOW_COMMANDS.get(command, command), key, cookie)
    if msg_type == v13.OFPT_GROUP_MOD and len(raw) >= 16:
        command, _type, group_id = struct.unpack_from("!HBxI", raw, 8)
        return (_GROUP_COMMANDS.get(command, command), group_id)
    if msg_type == v13.OFPT_METER_MOD and len(raw) >= 16:
        command, _flags, meter_id = struct.unpack_from("!HHI", raw, 8)
        return (_METER_COMMANDS.get(command, command), meter_id)
    return ("TRUNCATED", len(raw))


# ---- instructions back to planner values ------------------------------------------------------


def _decode_learn(action: Any) -> Learn | None:
    immediate = {spec.dst[0]: spec.src for spec in action.specs if isinstance(spec.src, int)}
    eth_type, ip_proto = immediate.get("eth_type_nxm"), immediate.get("ip_proto_nxm")
    if eth_type is None or ip_proto is None:
        return None
    return Learn(
        action.table_id, eth_type, ip_proto, action.idle_timeout, action.cookie, action.priority
    )


def _decode_actions(actions: Iterable[Any]) -> tuple[Action, ...] | None:
    decoded: list[Action] = []
    for action in actions:
        one: Action | None
        if isinstance(action, v13_parser.NXActionLearn):
            one = _decode_learn(action)
        elif isinstance(action, v13_parser.NXActionResubmitTable):
            one = Resubmit(action.table_id)
        else:
            one = messages._decode_action(action)
        if one is None:
            return None
        decoded.append(one)
    return tuple(decoded)


def _decode_instructions(parsed: Iterable[Any]) -> tuple[Instruction, ...] | None:
    """Planner instructions of an entry, in the order it was sent; None for one flowlane does
    not make."""
    decoded: list[Instruction] = []
    for inst in parsed:
        if isinstance(inst, v13_parser.OFPInstructionMeter):
            decoded.append(Meter(inst.meter_id))
        elif isinstance(inst, v13_parser.OFPInstructionGotoTable):
            decoded.append(GotoTable(inst.table_id))
        elif isinstance(inst, v13_parser.OFPInstructionWriteMetadata):
            decoded.append(WriteMetadata(inst.metadata, inst.metadata_mask))
        elif (
            isinstance(inst, v13_parser.OFPInstructionActions)
            and inst.type == v13.OFPIT_APPLY_ACTIONS
        ):
            actions = _decode_actions(inst.actions)
            if actions is None:
                return None
            decoded.append(ApplyActions(actions))
        else:
            return None
    return tuple(decoded)
