"""OpenFlow 1.3 bytes in and out of the switch step: no connection, no os-ken Datapath.

Decoding turns one whole message into the little the step needs.  Flow-stats
replies are never handed to os-ken: their bodies stay raw bytes for
flowlane's own decoders (``installed_entries``, ``decode_count_replies``),
which read them about ten times faster.  The other replies (port
descriptions, port status, group descriptions, meter configurations, port
stats) are parsed by os-ken (``osken_internals.parse``, with the one stand-in
datapath every encoding uses too).

Encoding gives each request the xid the step chose: the step owns the
switch's xid counter, so nothing here counts.
"""

from __future__ import annotations

import struct
from collections.abc import Container, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from os_ken.ofproto import ofproto_v1_3 as v13
from os_ken.ofproto import ofproto_v1_3_parser as v13_parser

from controller.openflow import messages, wire
from controller.openflow.flowstats import multipart_body
from controller.openflow.framing import HEADER, header
from controller.openflow.osken_internals import DATAPATH, ParseError, encode, parse
from controller.pipeline import tables
from controller.pipeline.diff import FlowDiff
from controller.pipeline.groups import GroupDiff, MeterEntry
from controller.pipeline.plan import PortState

OFPP_MAX: Final = 0xFFFFFF00
"""Ports above this are reserved (``LOCAL``, ``CONTROLLER``...): not the switch's own."""

_MULTIPART: Final = struct.Struct("!HH")
_ERROR: Final = struct.Struct("!HH")
OFPMPF_REPLY_MORE: Final = 1

# Multipart types the step asks for.
MP_FLOW: Final = v13.OFPMP_FLOW
MP_PORT_STATS: Final = v13.OFPMP_PORT_STATS
MP_GROUP_DESC: Final = v13.OFPMP_GROUP_DESC
MP_METER_CONFIG: Final = v13.OFPMP_METER_CONFIG
MP_PORT_DESC: Final = v13.OFPMP_PORT_DESC

PORT_REASONS: Final = {
    v13.OFPPR_ADD: "added",
    v13.OFPPR_DELETE: "deleted",
    v13.OFPPR_MODIFY: "modified",
}


class CodecError(ValueError):
    """Bytes that are not one whole OpenFlow 1.3 message the step can use."""


# ---- decoding -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """One part of a multipart reply. ``body``: the raw body (flow stats) or os-ken's parsed
    entries (everything else)."""

    xid: int
    mp_type: int
    more: bool
    body: bytes | tuple[Any, ...]


@dataclass(frozen=True)
class ErrorReply:
    xid: int
    type: int
    code: int

    @property
    def text(self) -> str:
        return f"switch error type={self.type} code={self.code} for xid {self.xid:#x}"


@dataclass(frozen=True)
class BarrierReply:
    xid: int


@dataclass(frozen=True)
class PortStatus:
    reason: int
    port: PortState

    @property
    def deleted(self) -> bool:
        return bool(self.reason == v13.OFPPR_DELETE)

    @property
    def reason_text(self) -> str:
        return PORT_REASONS.get(self.reason, str(self.reason))


@dataclass(frozen=True)
class RoleReply:
    xid: int
    role: int
    """``OFPCR_ROLE_*``."""
    generation_id: int


@dataclass(frozen=True)
class Other:
    """A message the step has no use for (packet-in, flow-removed, echo...)."""

    msg_type: int
    xid: int


Decoded = Part | ErrorReply | BarrierReply | PortStatus | RoleReply | Other

_ROLE: Final = struct.Struct("!I4xQ")
ROLES: Final = {"master": v13.OFPCR_ROLE_MASTER, "slave": v13.OFPCR_ROLE_SLAVE}
IS_SLAVE: Final = (v13.OFPET_BAD_REQUEST, v13.OFPBRC_IS_SLAVE)
ROLE_FAILED: Final = v13.OFPET_ROLE_REQUEST_FAILED
STALE: Final = (v13.OFPET_ROLE_REQUEST_FAILED, v13.OFPRRFC_STALE)


def _header(data: bytes) -> tuple[int, int, int, int]:
    if len(data) < HEADER.size:
        raise CodecError(f"{len(data)} bytes is shorter than an OpenFlow header")
    return header(data)


def split(data: bytes) -> Iterator[bytes]:
    """The whole messages of a stream of them (a batch is sent as one write)."""
    offset = 0
    while offset < len(data):
        _, _, length, _ = _header(data[offset:])
        if length < HEADER.size or offset + length > len(data):
            raise CodecError(f"message at byte {offset} has length {length}")
        yield data[offset : offset + length]
        offset += length


def decode(data: bytes) -> Decoded:
    """One whole message, as the step needs it."""
    version, msg_type, length, xid = _header(data)
    if version != v13.OFP_VERSION:
        raise CodecError(f"OpenFlow version {version}, not 1.3")
    if length != len(data):
        raise CodecError(f"message says {length} bytes, has {len(data)}")
    if msg_type == v13.OFPT_BARRIER_REPLY:
        return BarrierReply(xid)
    if msg_type == v13.OFPT_ERROR:
        if length < HEADER.size + _ERROR.size:
            raise CodecError("error message too short")
        err_type, code = _ERROR.unpack_from(data, HEADER.size)
        return ErrorReply(xid, int(err_type), int(code))
    if msg_type == v13.OFPT_MULTIPART_REPLY:
        if length < HEADER.size + _MULTIPART.size:
            raise CodecError("multipart reply too short")
        mp_type, flags = _MULTIPART.unpack_from(data, HEADER.size)
        more = bool(flags & OFPMPF_REPLY_MORE)
        if mp_type == MP_FLOW:
            return Part(xid, mp_type, more, bytes(multipart_body(data)))
        return Part(xid, mp_type, more, tuple(_parse(data).body))
    if msg_type == v13.OFPT_ROLE_REPLY:
        if length < HEADER.size + _ROLE.size:
            raise CodecError("role reply too short")
        role, generation = _ROLE.unpack_from(data, HEADER.size)
        return RoleReply(xid, int(role), int(generation))
    if msg_type == v13.OFPT_PORT_STATUS:
        msg = _parse(data)
        return PortStatus(int(msg.reason), port_state(msg.desc))
    return Other(msg_type, xid)


def _parse(data: bytes) -> Any:
    try:
        return parse(data)
    except ParseError as exc:
        raise CodecError(str(exc)) from exc


def port_state(desc: Any) -> PortState:
    """A port description (reply or port status) as the controller keeps it."""
    return PortState(
        desc.port_no,
        desc.name.decode(errors="replace") if isinstance(desc.name, bytes) else str(desc.name),
        desc.curr_speed * 1000 if desc.curr_speed else None,
        up=not (desc.state & v13.OFPPS_LINK_DOWN) and not (desc.config & v13.OFPPC_PORT_DOWN),
        hw_addr=_mac(desc.hw_addr),
    )


def _mac(value: Any) -> int:
    if isinstance(value, str):
        try:
            return int(value.replace(":", ""), 16)
        except ValueError:
            return 0
    return int(value) if isinstance(value, int) else 0


def own_ports(body: Sequence[Any]) -> tuple[PortState, ...]:
    """The switch's own ports of a port-description reply (reserved ones left out)."""
    return tuple(port_state(port) for port in body if port.port_no <= OFPP_MAX)


# ---- encoding -----------------------------------------------------------------------------


PORT_DESC: Final = encode(v13_parser.OFPPortDescStatsRequest(DATAPATH, 0))
FLOWS: Final = encode(messages.flow_stats_request(DATAPATH))
"""Every table's entries (the counting table's are skipped when decoded)."""
GROUPS: Final = encode(messages.group_desc_request(DATAPATH))
METERS: Final = encode(messages.meter_config_request(DATAPATH))
COUNT_FLOWS: Final = encode(
    v13_parser.OFPFlowStatsRequest(
        DATAPATH, 0, tables.COUNT, v13.OFPP_ANY, v13.OFPG_ANY, 0, 0, v13_parser.OFPMatch()
    )
)
"""The counting table's entries (detection)."""
PORT_STATS: Final = encode(v13_parser.OFPPortStatsRequest(DATAPATH, 0, v13.OFPP_ANY))
BARRIER: Final = wire.BARRIER


def role_request(role: str, generation_id: int) -> bytes:
    """OFPT_ROLE_REQUEST for ``master`` or ``slave`` with this generation id (xid unset)."""
    request = v13_parser.OFPRoleRequest(DATAPATH, ROLES[role], generation_id % 2**64)
    return encode(request)


def batch_messages(
    flows: FlowDiff,
    groups: GroupDiff,
    meters: Sequence[MeterEntry],
    installed_meters: Container[int],
) -> list[bytes]:
    """A sync's messages in the order they must go (xids not set).

    Meters and groups before the flows that use them; flow adds before deletes, so
    traffic never falls through a gap; groups deleted after the flows that used them.
    """
    dp = DATAPATH
    return [
        *(
            encode(
                messages.meter_modify(dp, m)
                if m.meter_id in installed_meters
                else messages.meter_add(dp, m)
            )
            for m in meters
        ),
        *(encode(messages.group_add(dp, g)) for g in groups.add),
        *(encode(messages.group_modify(dp, g)) for g in groups.modify),
        *(wire.flow_add(f) for f in flows.add),
        *(wire.flow_delete(k) for k in flows.delete),
        *(encode(messages.flow_delete_by_cookie(dp, t, c)) for t, c in flows.delete_by_cookie),
        *(encode(messages.group_delete(dp, gid)) for gid in groups.delete),
    ]
