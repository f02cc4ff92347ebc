"""The match part of a classification rule, in OpenFlow OXM field names.

Operators write what they know (``tcp_dst: [8000, 8001]``, ``ipv4_dst:
10.0.0.0/24``); the planner turns each match into one or more OpenFlow matches.
Everything that can be checked without a switch is checked here, so a policy
that validates never fails half-way through an install.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    WithJsonSchema,
    model_validator,
)

ETH_TYPE_IPV4 = 0x0800
ETH_TYPE_IPV6 = 0x86DD
ETH_TYPE_ARP = 0x0806
IP_PROTO_TCP = 6
IP_PROTO_UDP = 17

_ETH_TYPE_NAMES = {"ipv4": ETH_TYPE_IPV4, "ipv6": ETH_TYPE_IPV6, "arp": ETH_TYPE_ARP}
_IP_PROTO_NAMES = {"icmp": 1, "tcp": IP_PROTO_TCP, "udp": IP_PROTO_UDP, "icmpv6": 58}

PortRange = tuple[int, int]


def _parse_port(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"expected a port number, got {value!r}")
    try:
        port = int(value)
    except ValueError:
        raise ValueError(f"expected a port number, got {value!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port} out of range (0-65535)")
    return port


def _parse_port_item(item: object) -> PortRange:
    if isinstance(item, str) and "-" in item:
        low_text, _, high_text = item.partition("-")
        low, high = _parse_port(low_text.strip()), _parse_port(high_text.strip())
        if low > high:
            raise ValueError(f"port range {item!r} is empty (start above end)")
        return (low, high)
    port = _parse_port(item)
    return (port, port)


def parse_port_set(value: object) -> tuple[PortRange, ...]:
    """Accept ``8000``, ``"8000-8010"`` or a list of those; return sorted, merged ranges."""
    items = value if isinstance(value, list) else [value]
    if not items:
        raise ValueError("empty port list: omit the field to match any port")
    ranges = sorted(_parse_port_item(item) for item in items)
    merged: list[PortRange] = [ranges[0]]
    for low, high in ranges[1:]:
        last_low, last_high = merged[-1]
        if low <= last_high + 1:
            merged[-1] = (last_low, max(last_high, high))
        else:
            merged.append((low, high))
    return tuple(merged)


def _parse_eth_type(value: object) -> int:
    if isinstance(value, str) and value.lower() in _ETH_TYPE_NAMES:
        return _ETH_TYPE_NAMES[value.lower()]
    return _parse_uint(value, 0xFFFF, "eth_type", "ipv4, ipv6, arp or a number")


def _parse_ip_proto(value: object) -> int:
    if isinstance(value, str) and value.lower() in _IP_PROTO_NAMES:
        return _IP_PROTO_NAMES[value.lower()]
    return _parse_uint(value, 255, "ip_proto", "tcp, udp, icmp or a number")


def _parse_uint(value: object, maximum: int, field: str, expected: str) -> int:
    if isinstance(value, bool):
        raise ValueError(f"expected {expected}, got {value!r}")
    if isinstance(value, str):
        try:
            value = int(value, 0)
        except ValueError:
            raise ValueError(f"expected {expected}, got {value!r}") from None
    if not isinstance(value, int):
        raise ValueError(f"expected {expected}, got {value!r}")
    if not 0 <= value <= maximum:
        raise ValueError(f"{field} {value} out of range (0-{maximum})")
    return value


def _parse_ipv4_network(value: object) -> ipaddress.IPv4Network:
    if not isinstance(value, str):
        raise ValueError(f"expected an IPv4 CIDR such as '10.0.0.0/24', got {value!r}")
    try:
        return ipaddress.IPv4Network(value, strict=True)
    except ipaddress.NetmaskValueError as exc:
        raise ValueError(f"bad netmask in {value!r}: {exc}") from None
    except ValueError as exc:
        raise ValueError(f"not an IPv4 network {value!r}: {exc}") from None


def _parse_in_port(value: object) -> int | str:
    if isinstance(value, str) and not value.isdigit():
        if not value:
            raise ValueError("in_port must be a port number or an OVS port name")
        return value
    port = _parse_uint(value, 0xFFFFFEFF, "in_port", "a port number or an OVS port name")
    if port == 0:
        raise ValueError("in_port 0 is not a valid OpenFlow port")
    return port


PortSet = Annotated[tuple[PortRange, ...], BeforeValidator(parse_port_set)]
EthType = Annotated[int, BeforeValidator(_parse_eth_type)]
IpProto = Annotated[int, BeforeValidator(_parse_ip_proto)]
Ipv4Net = Annotated[ipaddress.IPv4Network, BeforeValidator(_parse_ipv4_network)]
InPort = Annotated[int | str, BeforeValidator(_parse_in_port)]

_QUAD = r"[0-9]{1,3}(\.[0-9]{1,3}){3}"
_IPV4_PATTERN = rf"^{_QUAD}(/([0-9]{{1,2}}|{_QUAD}))?$"
"""What ``ipaddress`` parses: an address, with a prefix length or a netmask (documentation)."""

Ipv4Field = Annotated[
    Ipv4Net,
    PlainSerializer(str),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": _IPV4_PATTERN,
            "examples": ["10.0.0.0/24", "10.0.0.5"],
            "description": "An IPv4 network in CIDR notation (a bare address is a /32)",
        }
    ),
]

L4Family = Literal["tcp", "udp"]

MAX_FLOWS_PER_RULE = 1024
"""A rule whose port lists multiply beyond this is almost surely a mistake; refuse it."""


class MatchSpec(BaseModel):
    """Fields a rule may match on; all given fields must match (logical AND)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    in_port: InPort | None = None
    eth_type: EthType | None = None
    vlan_vid: int | None = Field(default=None, ge=0, le=4095)
    ip_proto: IpProto | None = None
    ip_dscp: int | None = Field(default=None, ge=0, le=63)
    ipv4_src: Ipv4Net | None = None
    ipv4_dst: Ipv4Net | None = None
    tcp_src: PortSet | None = None
    tcp_dst: PortSet | None = None
    udp_src: PortSet | None = None
    udp_dst: PortSet | None = None

    @model_validator(mode="after")
    def _check_prerequisites(self) -> MatchSpec:
        """OpenFlow rejects a field whose prerequisite is missing; catch it before a switch does."""
        tcp = self.tcp_src is not None or self.tcp_dst is not None
        udp = self.udp_src is not None or self.udp_dst is not None
        if tcp and udp:
            raise ValueError("a rule cannot match both tcp_* and udp_* ports: use two rules")
        if tcp and self.ip_proto not in (None, IP_PROTO_TCP):
            raise ValueError(f"tcp_src/tcp_dst need ip_proto tcp, got ip_proto {self.ip_proto}")
        if udp and self.ip_proto not in (None, IP_PROTO_UDP):
            raise ValueError(f"udp_src/udp_dst need ip_proto udp, got ip_proto {self.ip_proto}")
        ipv4 = self.ipv4_src is not None or self.ipv4_dst is not None
        if ipv4 and self.eth_type not in (None, ETH_TYPE_IPV4):
            raise ValueError(f"ipv4_src/ipv4_dst need eth_type ipv4, got {self.eth_type:#06x}")
        ip_fields = ipv4 or tcp or udp or self.ip_proto is not None or self.ip_dscp is not None
        if ip_fields and self.eth_type not in (None, ETH_TYPE_IPV4, ETH_TYPE_IPV6):
            raise ValueError(f"IP fields need eth_type ipv4 or ipv6, got {self.eth_type:#06x}")
        if self.flow_count > MAX_FLOWS_PER_RULE:
            raise ValueError(
                f"expands to {self.flow_count} OpenFlow entries per direction, more than"
                f" {MAX_FLOWS_PER_RULE}: use fewer or wider port ranges"
            )
        return self

    @property
    def flow_count(self) -> int:
        """OpenFlow entries one direction of this match costs (address families x port masks)."""
        count = len(self.eth_types)
        for name in ("tcp_src", "tcp_dst", "udp_src", "udp_dst"):
            ranges = getattr(self, name)
            if ranges is not None:
                count *= len(port_prefixes(ranges))
        return count

    @property
    def l4_family(self) -> L4Family | None:
        if self.tcp_src is not None or self.tcp_dst is not None:
            return "tcp"
        if self.udp_src is not None or self.udp_dst is not None:
            return "udp"
        return None

    @property
    def effective_ip_proto(self) -> int | None:
        """The IP protocol, implied by port fields when the operator did not name it."""
        family = self.l4_family
        if family == "tcp":
            return IP_PROTO_TCP
        if family == "udp":
            return IP_PROTO_UDP
        return self.ip_proto

    @property
    def eth_types(self) -> tuple[int | None, ...]:
        """EtherTypes the match expands to: IP fields without a family mean IPv4 and IPv6."""
        if self.eth_type is not None:
            return (self.eth_type,)
        if self.ipv4_src is not None or self.ipv4_dst is not None:
            return (ETH_TYPE_IPV4,)
        needs_ip = self.effective_ip_proto is not None or self.ip_dscp is not None
        return (ETH_TYPE_IPV4, ETH_TYPE_IPV6) if needs_ip else (None,)


def port_prefixes(ranges: tuple[PortRange, ...]) -> tuple[tuple[int, int], ...]:
    """Cover port ranges with (value, mask) prefixes, the form an OpenFlow match can hold.

    ``8000-8010`` becomes ``8000/0xfff8, 8008/0xfffe, 8010/0xffff``: at most
    about 2·16 prefixes per range, instead of one flow per port.
    """
    prefixes: list[tuple[int, int]] = []
    for low, high in ranges:
        start = low
        while start <= high:
            size = start & -start if start else 1 << 16
            while start + size - 1 > high:
                size >>= 1
            prefixes.append((start, 0xFFFF & ~(size - 1)))
            start += size
    return tuple(prefixes)
