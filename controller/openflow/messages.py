"""Translate between the planner's plain flow values and os-ken OpenFlow 1.3 objects.

The only place that knows os-ken's message classes besides the app, so the
planner and its tests never import os-ken.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as v13
from os_ken.ofproto import ofproto_v1_3_parser as v13_parser

from controller.pipeline.flows import (
    OFPP_CONTROLLER,
    Action,
    ApplyActions,
    FlowEntry,
    FlowKey,
    GotoTable,
    Group,
    InstalledFlow,
    Instruction,
    Learn,
    Match,
    MatchField,
    Meter,
    Output,
    Resubmit,
    SetField,
    SetQueue,
    WriteMetadata,
    make_match,
)
from controller.pipeline.groups import Bucket, GroupEntry, GroupType, MeterEntry
from controller.policy.match import ETH_TYPE_IPV4, ETH_TYPE_IPV6, IP_PROTO_TCP, IP_PROTO_UDP

_IPV4_FIELDS = {"ipv4_src", "ipv4_dst", "arp_spa", "arp_tpa"}
_IPV6_FIELDS = {"ipv6_src", "ipv6_dst"}
_MAC_FIELDS = {"eth_src", "eth_dst"}


def _encode_value(name: str, value: int) -> Any:
    """os-ken wants addresses as text."""
    if name in _IPV4_FIELDS:
        return str(ipaddress.IPv4Address(value))
    if name in _IPV6_FIELDS:
        return str(ipaddress.IPv6Address(value))
    if name in _MAC_FIELDS:
        return ":".join(f"{byte:02x}" for byte in value.to_bytes(6, "big"))
    return value


def _decode_value(name: str, value: Any) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        if name in _IPV4_FIELDS:
            return int(ipaddress.IPv4Address(value))
        if name in _IPV6_FIELDS:
            return int(ipaddress.IPv6Address(value))
        if name in _MAC_FIELDS:
            return int(value.replace(":", ""), 16)
    raise ValueError(f"cannot decode match field {name}={value!r}")


def ofp_match(parser: Any, match: Match) -> Any:
    fields: dict[str, Any] = {}
    for field in match:
        value = _encode_value(field.name, field.value)
        fields[field.name] = (
            value if field.mask is None else (value, _encode_value(field.name, field.mask))
        )
    return parser.OFPMatch(**fields)


def decode_match(ofp: Any) -> Match:
    """A match from a flow-stats reply, in the planner's canonical form."""
    fields = []
    for name, raw in ofp.items():
        if isinstance(raw, tuple):
            value, mask = raw
            fields.append(MatchField(name, _decode_value(name, value), _decode_value(name, mask)))
        else:
            fields.append(MatchField(name, _decode_value(name, raw)))
    return make_match(*fields)


_LEARN_FIELDS = {
    (ETH_TYPE_IPV4, "addr"): (("ipv4_src_nxm", 32), ("ipv4_dst_nxm", 32)),
    (ETH_TYPE_IPV6, "addr"): (("ipv6_src_nxm", 128), ("ipv6_dst_nxm", 128)),
    (IP_PROTO_TCP, "port"): (("tcp_src_nxm", 16), ("tcp_dst_nxm", 16)),
    (IP_PROTO_UDP, "port"): (("udp_src_nxm", 16), ("udp_dst_nxm", 16)),
}


def _learn(parser: Any, learn: Learn) -> Any:
    """``learn(table=COUNT, eth_type=E, ip_proto=P, <src>, <dst>, <sport>, <dport>)``: an
    exact 5-tuple entry with no actions, only counters."""
    specs = [
        parser.NXFlowSpecMatch(src=learn.eth_type, dst=("eth_type_nxm", 0), n_bits=16),
        parser.NXFlowSpecMatch(src=learn.ip_proto, dst=("ip_proto_nxm", 0), n_bits=8),
    ]
    for field, bits in (
        *_LEARN_FIELDS[(learn.eth_type, "addr")],
        *_LEARN_FIELDS[(learn.ip_proto, "port")],
    ):
        specs.append(parser.NXFlowSpecMatch(src=(field, 0), dst=(field, 0), n_bits=bits))
    return parser.NXActionLearn(
        table_id=learn.table_id,
        specs=specs,
        idle_timeout=learn.idle_timeout,
        priority=learn.priority,
        cookie=learn.cookie,
    )


def _actions(parser: Any, actions: ApplyActions) -> list[Any]:
    encoded: list[Any] = []
    for action in actions.actions:
        if isinstance(action, Learn):
            encoded.append(_learn(parser, action))
        elif isinstance(action, Resubmit):
            encoded.append(parser.NXActionResubmitTable(table_id=action.table_id))
        elif isinstance(action, SetField):
            value = _encode_value(action.field, action.value)
            encoded.append(parser.OFPActionSetField(**{action.field: value}))
        elif isinstance(action, SetQueue):
            encoded.append(parser.OFPActionSetQueue(action.queue_id))
        elif isinstance(action, Output):
            encoded.append(parser.OFPActionOutput(action.port, 0xFFFF))
        elif isinstance(action, Group):
            encoded.append(parser.OFPActionGroup(action.group_id))
    return encoded


def _instruction_rank(instruction: Instruction) -> int:
    """OpenFlow's execution order; OVS rejects a flow whose instructions come in another."""
    order: tuple[type, ...] = (Meter, ApplyActions, WriteMetadata, GotoTable)
    return order.index(type(instruction))


def _instructions(datapath: Any, entry: FlowEntry) -> list[Any]:
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    encoded: list[Any] = []
    for instruction in sorted(entry.instructions, key=_instruction_rank):
        if isinstance(instruction, Meter):
            encoded.append(parser.OFPInstructionMeter(instruction.meter_id, ofproto.OFPIT_METER))
        elif isinstance(instruction, ApplyActions):
            encoded.append(
                parser.OFPInstructionActions(
                    ofproto.OFPIT_APPLY_ACTIONS, _actions(parser, instruction)
                )
            )
        elif isinstance(instruction, WriteMetadata):
            encoded.append(parser.OFPInstructionWriteMetadata(instruction.value, instruction.mask))
        elif isinstance(instruction, GotoTable):
            encoded.append(parser.OFPInstructionGotoTable(instruction.table_id))
    return encoded


def flow_add(datapath: Any, entry: FlowEntry) -> Any:
    """ADD replaces an entry with the same key, so it serves for new and changed flows."""
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    return parser.OFPFlowMod(
        datapath=datapath,
        cookie=entry.cookie,
        table_id=entry.table_id,
        command=ofproto.OFPFC_ADD,
        priority=entry.priority,
        match=ofp_match(parser, entry.match),
        instructions=_instructions(datapath, entry),
    )


def flow_delete(datapath: Any, key: FlowKey) -> Any:
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    return parser.OFPFlowMod(
        datapath=datapath,
        table_id=key.table_id,
        command=ofproto.OFPFC_DELETE_STRICT,
        priority=key.priority,
        out_port=ofproto.OFPP_ANY,
        out_group=ofproto.OFPG_ANY,
        match=ofp_match(parser, key.match),
    )


def flow_stats_request(datapath: Any) -> Any:
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    return parser.OFPFlowStatsRequest(
        datapath, 0, ofproto.OFPTT_ALL, ofproto.OFPP_ANY, ofproto.OFPG_ANY, 0, 0, parser.OFPMatch()
    )


def installed_flow(stats: Any) -> InstalledFlow:
    try:
        match = decode_match(stats.match)
    except (KeyError, ValueError):
        return InstalledFlow(FlowKey(stats.table_id, stats.priority, ()), stats.cookie, True)
    return InstalledFlow(FlowKey(stats.table_id, stats.priority, match), stats.cookie)


def flow_delete_by_cookie(datapath: Any, table_id: int, cookie: int) -> Any:
    """Remove entries we cannot re-encode (foreign fields) by their exact cookie."""
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    return parser.OFPFlowMod(
        datapath=datapath,
        table_id=table_id,
        command=ofproto.OFPFC_DELETE,
        cookie=cookie,
        cookie_mask=0xFFFFFFFFFFFFFFFF,
        out_port=ofproto.OFPP_ANY,
        out_group=ofproto.OFPG_ANY,
        match=parser.OFPMatch(),
    )


# ---- groups -----------------------------------------------------------------

_GROUP_TYPES = {
    GroupType.ALL: v13.OFPGT_ALL,
    GroupType.SELECT: v13.OFPGT_SELECT,
    GroupType.FAST_FAILOVER: v13.OFPGT_FF,
}


def _buckets(parser: Any, group: GroupEntry) -> list[Any]:
    """Weights mean something only to select groups; OpenFlow wants 0 on the others."""
    select = group.type is GroupType.SELECT
    return [
        parser.OFPBucket(
            weight=bucket.weight if select else 0,
            watch_port=v13.OFPP_ANY if bucket.watch_port is None else bucket.watch_port,
            watch_group=v13.OFPG_ANY,
            actions=_actions(parser, ApplyActions(bucket.actions)),
        )
        for bucket in group.buckets
    ]


def _group_mod(datapath: Any, command: int, group: GroupEntry) -> Any:
    return datapath.ofproto_parser.OFPGroupMod(
        datapath,
        command,
        _GROUP_TYPES[group.type],
        group.group_id,
        _buckets(datapath.ofproto_parser, group),
    )


def group_add(datapath: Any, group: GroupEntry) -> Any:
    """Send before any flow that names the group: OVS rejects a flow whose group is missing."""
    return _group_mod(datapath, datapath.ofproto.OFPGC_ADD, group)


def group_modify(datapath: Any, group: GroupEntry) -> Any:
    """Replaces the buckets in place, so flows using the group never point at nothing."""
    return _group_mod(datapath, datapath.ofproto.OFPGC_MODIFY, group)


def group_delete(datapath: Any, group_id: int) -> Any:
    """Deleting a group also deletes the flows that use it (OpenFlow 1.3, 6.5)."""
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    return parser.OFPGroupMod(datapath, ofproto.OFPGC_DELETE, ofproto.OFPGT_ALL, group_id, [])


def group_desc_request(datapath: Any) -> Any:
    return datapath.ofproto_parser.OFPGroupDescStatsRequest(datapath, 0)


def _decode_action(action: Any) -> Action | None:
    if isinstance(action, v13_parser.OFPActionOutput):
        return Output(action.port)
    if isinstance(action, v13_parser.OFPActionGroup):
        return Group(action.group_id)
    if isinstance(action, v13_parser.OFPActionSetQueue):
        return SetQueue(action.queue_id)
    if isinstance(action, v13_parser.OFPActionSetField):
        try:
            return SetField(action.key, _decode_value(action.key, action.value))
        except ValueError:
            return None
    return None


def installed_group(desc: Any) -> GroupEntry | None:
    """A group-desc entry as the planner would have written it; None when it cannot be.

    Equal to the planned entry after a round trip through the switch, so the
    group diff converges to nothing.  None means someone else's group (an
    action, type or watch the planner never makes): the caller deletes it by
    ``desc.group_id``.  Id 0 is never ours (``GroupEntry`` reads 0 as "derive
    the id").  The weight of a non-select bucket has no meaning and reads back
    as 0; it is normalised to the ``Bucket`` default.
    """
    kinds = {value: kind for kind, value in _GROUP_TYPES.items()}
    kind = kinds.get(desc.type)
    if kind is None or desc.group_id == 0:
        return None
    buckets = []
    for bucket in desc.buckets:
        if bucket.watch_group != v13.OFPG_ANY:
            return None
        actions = tuple(_decode_action(action) for action in bucket.actions)
        decoded = tuple(action for action in actions if action is not None)
        if len(decoded) != len(actions):
            return None
        buckets.append(
            Bucket(
                decoded,
                None if bucket.watch_port == v13.OFPP_ANY else bucket.watch_port,
                bucket.weight if kind is GroupType.SELECT else 1,
            )
        )
    return GroupEntry(kind, tuple(buckets), desc.group_id)


# ---- meters -----------------------------------------------------------------


def _meter_mod(datapath: Any, command: int, meter: MeterEntry) -> Any:
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    return parser.OFPMeterMod(
        datapath,
        command=command,
        flags=ofproto.OFPMF_PKTPS | ofproto.OFPMF_BURST,
        meter_id=meter.meter_id,
        bands=[parser.OFPMeterBandDrop(rate=meter.rate_pps, burst_size=meter.burst)],
    )


def meter_add(datapath: Any, meter: MeterEntry) -> Any:
    """Send before any flow that names the meter: OVS rejects a flow whose meter is missing."""
    return _meter_mod(datapath, datapath.ofproto.OFPMC_ADD, meter)


def meter_modify(datapath: Any, meter: MeterEntry) -> Any:
    return _meter_mod(datapath, datapath.ofproto.OFPMC_MODIFY, meter)


def meter_delete(datapath: Any, meter_id: int) -> Any:
    """Deleting a meter also deletes the flows that use it."""
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    return parser.OFPMeterMod(datapath, command=ofproto.OFPMC_DELETE, flags=0, meter_id=meter_id)


def meter_config_request(datapath: Any) -> Any:
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    return parser.OFPMeterConfigStatsRequest(datapath, 0, ofproto.OFPM_ALL)


def installed_meter(config: Any) -> MeterEntry | None:
    """A meter-config entry as the planner would have written it; None for someone else's.

    The planner makes one shape of meter only: packets per second, with a
    burst, one drop band.  Anything else is replaced by the caller.
    """
    flags = config.flags & ~v13.OFPMF_STATS
    if flags != v13.OFPMF_PKTPS | v13.OFPMF_BURST or len(config.bands) != 1:
        return None
    (band,) = config.bands
    if not isinstance(band, v13_parser.OFPMeterBandDrop):
        return None
    return MeterEntry(config.meter_id, band.rate, band.burst_size)


# ---- packets ------------------------------------------------------------------


def packet_out(datapath: Any, ports: Sequence[int], data: bytes, in_port: int | None = None) -> Any:
    """Send ``data`` out of each of ``ports``, as if it came from ``in_port`` (the controller).

    The frame travels whole (no buffer id): OVS buffers nothing for us.
    """
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    return parser.OFPPacketOut(
        datapath=datapath,
        buffer_id=ofproto.OFP_NO_BUFFER,
        in_port=OFPP_CONTROLLER if in_port is None else in_port,
        actions=[parser.OFPActionOutput(port, 0xFFFF) for port in ports],
        data=bytes(data),
    )


def packet_in_summary(msg: Any) -> tuple[int, bytes]:
    """(in_port, frame) of a packet-in; OpenFlow 1.3 carries the port in the match."""
    return int(msg.match["in_port"]), bytes(msg.data)
