"""Expand one policy match into the OpenFlow matches that implement it.

A policy match is richer than an OpenFlow match: port lists and ranges,
"IPv4 or IPv6" when no address family is named, and both directions of a
conversation.  Each of those multiplies into plain OXM matches here.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from controller.pipeline.flows import Match, MatchField, make_match
from controller.policy.match import MatchSpec, port_prefixes

_MIRRORED = {
    "ipv4_src": "ipv4_dst",
    "ipv4_dst": "ipv4_src",
    "tcp_src": "tcp_dst",
    "tcp_dst": "tcp_src",
    "udp_src": "udp_dst",
    "udp_dst": "udp_src",
}


class UnresolvedPortError(LookupError):
    """The rule names an OVS port this switch does not have (yet)."""


def _port_fields(spec: MatchSpec) -> list[list[MatchField]]:
    """One list of alternatives per port field the spec constrains."""
    alternatives: list[list[MatchField]] = []
    for name in ("tcp_src", "tcp_dst", "udp_src", "udp_dst"):
        ranges = getattr(spec, name)
        if ranges is not None:
            alternatives.append(
                [MatchField(name, value, mask) for value, mask in port_prefixes(ranges)]
            )
    return alternatives


def _fixed_fields(spec: MatchSpec, port_numbers: Mapping[str, int]) -> list[MatchField]:
    fields: list[MatchField] = []
    if spec.in_port is not None:
        if isinstance(spec.in_port, str):
            if spec.in_port not in port_numbers:
                raise UnresolvedPortError(spec.in_port)
            fields.append(MatchField("in_port", port_numbers[spec.in_port]))
        else:
            fields.append(MatchField("in_port", spec.in_port))
    if spec.vlan_vid is not None:
        fields.append(MatchField("vlan_vid", 0x1000 | spec.vlan_vid))
    proto = spec.effective_ip_proto
    if proto is not None:
        fields.append(MatchField("ip_proto", proto))
    if spec.ip_dscp is not None:
        fields.append(MatchField("ip_dscp", spec.ip_dscp))
    for name in ("ipv4_src", "ipv4_dst"):
        network = getattr(spec, name)
        if network is not None:
            fields.append(MatchField(name, int(network.network_address), int(network.netmask)))
    return fields


def _mirror(match: Match) -> Match:
    return make_match(*(MatchField(_MIRRORED.get(f.name, f.name), f.value, f.mask) for f in match))


def expand_match(
    spec: MatchSpec, port_numbers: Mapping[str, int], bidirectional: bool
) -> tuple[Match, ...]:
    """All OpenFlow matches for ``spec``, without duplicates, in a stable order.

    Raises ``UnresolvedPortError`` when ``in_port`` names a port the switch lacks.
    A match pinned to an ``in_port`` is one-way by nature and is not mirrored.
    """
    fixed = _fixed_fields(spec, port_numbers)
    matches: list[Match] = []
    for eth_type in spec.eth_types:
        base = [*fixed, MatchField("eth_type", eth_type)] if eth_type is not None else fixed
        for combination in itertools.product(*_port_fields(spec)):
            matches.append(make_match(*base, *combination))
    if bidirectional and spec.in_port is None:
        matches.extend(_mirror(match) for match in list(matches))
    return tuple(dict.fromkeys(matches))
