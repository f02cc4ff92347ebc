"""Translate between the planner's plain flow values and os-ken OpenFlow 1.3 objects.

The only place that knows os-ken's message classes besides the app, so the
planner and its tests never import os-ken.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from controller.pipeline.flows import (
    ApplyActions,
    FlowEntry,
    FlowKey,
    GotoTable,
    InstalledFlow,
    Learn,
    Match,
    MatchField,
    Output,
    Resubmit,
    SetField,
    SetQueue,
    WriteMetadata,
    make_match,
)
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
            encoded.append(parser.OFPActionSetField(**{action.field: action.value}))
        elif isinstance(action, SetQueue):
            encoded.append(parser.OFPActionSetQueue(action.queue_id))
        elif isinstance(action, Output):
            encoded.append(parser.OFPActionOutput(action.port, 0xFFFF))
    return encoded


def _instructions(datapath: Any, entry: FlowEntry) -> list[Any]:
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    encoded: list[Any] = []
    for instruction in entry.instructions:
        if isinstance(instruction, ApplyActions):
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
