"""Port sets, OpenFlow prerequisites and port-range prefixes of a rule's match."""

from __future__ import annotations

import ipaddress
import itertools
import random
from typing import Any

import pytest
from pydantic import ValidationError

from controller.policy.match import (
    ETH_TYPE_ARP,
    ETH_TYPE_IPV4,
    ETH_TYPE_IPV6,
    IP_PROTO_TCP,
    IP_PROTO_UDP,
    MatchSpec,
    PortRange,
    parse_port_set,
    port_prefixes,
)

# --------------------------------------------------------------------------------------------
# Port sets
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "ranges"),
    [
        (8000, ((8000, 8000),)),
        ("8000", ((8000, 8000),)),
        (0, ((0, 0),)),
        (65535, ((65535, 65535),)),
        ([8001, 8000], ((8000, 8001),)),
        ([22, 8080, 443], ((22, 22), (443, 443), (8080, 8080))),
        ("8000-8010", ((8000, 8010),)),
        (" 8000 - 8010 ", ((8000, 8010),)),
        ("5-5", ((5, 5),)),
        ("0-65535", ((0, 65535),)),
        # overlapping, adjacent and contained items merge; disjoint ones stay apart
        (["8000-8010", 8005, "8011-8020", 9000], ((8000, 8020), (9000, 9000))),
        ([3, 1, 2], ((1, 3),)),
        (["100-200", "150-160"], ((100, 200),)),
        (["100-200", "201-300", "302-400"], ((100, 300), (302, 400))),
        ([80, 80, 80], ((80, 80),)),
    ],
)
def test_port_sets_parse_sort_and_merge(value: object, ranges: tuple[PortRange, ...]) -> None:
    assert parse_port_set(value) == ranges


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (70000, "port 70000 out of range (0-65535)"),
        ("70000", "port 70000 out of range (0-65535)"),
        ([80, 70000], "port 70000 out of range (0-65535)"),
        ("8000-70000", "port 70000 out of range (0-65535)"),
        (65536, "port 65536 out of range (0-65535)"),
        (-1, "port -1 out of range (0-65535)"),
        ([], "empty port list: omit the field to match any port"),
        ("8010-8000", "port range '8010-8000' is empty (start above end)"),
        ("http", "expected a port number, got 'http'"),
        ("8000-", "expected a port number, got ''"),
        ("", "expected a port number, got ''"),
        (True, "expected a port number, got True"),
        (80.0, "expected a port number, got 80.0"),
        (None, "expected a port number, got None"),
    ],
)
def test_bad_port_sets_are_rejected(value: object, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_port_set(value)
    assert str(info.value) == message


def test_out_of_range_port_message_in_a_match() -> None:
    with pytest.raises(ValidationError) as info:
        MatchSpec.model_validate({"tcp_dst": 70000})
    (error,) = info.value.errors()
    assert error["loc"] == ("tcp_dst",)
    assert "port 70000 out of range" in error["msg"]


# --------------------------------------------------------------------------------------------
# Prerequisites and names
# --------------------------------------------------------------------------------------------


def _match_error(fields: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as info:
        MatchSpec.model_validate(fields)
    return " | ".join(str(error["msg"]) for error in info.value.errors())


def test_tcp_and_udp_ports_together_are_rejected() -> None:
    message = _match_error({"tcp_dst": 80, "udp_dst": 53})
    assert "cannot match both tcp_* and udp_* ports" in message
    assert "cannot match both" in _match_error({"tcp_src": 80, "udp_src": 53})


def test_tcp_port_with_ip_proto_udp_is_rejected() -> None:
    message = _match_error({"ip_proto": "udp", "tcp_dst": 80})
    assert "tcp_src/tcp_dst need ip_proto tcp, got ip_proto 17" in message


def test_udp_port_with_ip_proto_tcp_is_rejected() -> None:
    message = _match_error({"ip_proto": "tcp", "udp_dst": 53})
    assert "udp_src/udp_dst need ip_proto udp, got ip_proto 6" in message


def test_ipv4_address_with_eth_type_ipv6_is_rejected() -> None:
    message = _match_error({"eth_type": "ipv6", "ipv4_dst": "10.0.0.0/8"})
    assert "ipv4_src/ipv4_dst need eth_type ipv4, got 0x86dd" in message


def test_ip_fields_with_eth_type_arp_are_rejected() -> None:
    assert "IP fields need eth_type ipv4 or ipv6, got 0x0806" in _match_error(
        {"eth_type": "arp", "ip_dscp": 10}
    )
    assert "IP fields need eth_type ipv4 or ipv6" in _match_error(
        {"eth_type": "arp", "tcp_dst": 80}
    )


@pytest.mark.parametrize("cidr", ["10.0.0.1/24", "192.168.1.128/24", "10.0.0.1/31"])
def test_cidr_with_host_bits_is_rejected(cidr: str) -> None:
    assert "has host bits set" in _match_error({"ipv4_src": cidr})


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"ipv4_dst": "10.0.0.0/33"}, "10.0.0.0/33"),
        ({"ipv4_dst": "fe80::/64"}, "fe80::/64"),
        ({"ipv4_dst": 167772160}, "expected an IPv4 CIDR"),
        ({"eth_type": "ipx"}, "expected ipv4, ipv6, arp or a number"),
        ({"eth_type": 0x10000}, "eth_type 65536 out of range (0-65535)"),
        ({"ip_proto": "sctpx"}, "expected tcp, udp, icmp or a number"),
        ({"ip_proto": 256}, "ip_proto 256 out of range (0-255)"),
        ({"ip_proto": True}, "got True"),
        ({"ip_dscp": 64}, "less than or equal to 63"),
        ({"vlan_vid": 4096}, "less than or equal to 4095"),
        ({"in_port": 0}, "in_port 0 is not a valid OpenFlow port"),
        ({"in_port": "0"}, "in_port 0 is not a valid OpenFlow port"),
        ({"in_port": ""}, "in_port must be a port number or an OVS port name"),
        ({"in_port": True}, "a port number or an OVS port name"),
        ({"tcp_port": 80}, "Extra inputs are not permitted"),
    ],
)
def test_bad_fields_are_rejected(fields: dict[str, Any], fragment: str) -> None:
    assert fragment in _match_error(fields)


def test_names_and_numbers_mean_the_same_thing() -> None:
    by_name = MatchSpec.model_validate({"eth_type": "IPv4", "ip_proto": "TCP", "tcp_dst": "80"})
    by_number = MatchSpec.model_validate({"eth_type": "0x0800", "ip_proto": 6, "tcp_dst": 80})
    assert by_name == by_number
    assert by_name.eth_type == ETH_TYPE_IPV4
    assert by_name.ip_proto == IP_PROTO_TCP
    assert MatchSpec.model_validate({"in_port": "3"}).in_port == 3
    assert MatchSpec.model_validate({"in_port": "s1-eth1"}).in_port == "s1-eth1"


def test_valid_cidr_is_kept_as_a_network() -> None:
    spec = MatchSpec.model_validate({"ipv4_src": "10.1.0.0/16", "ipv4_dst": "10.2.3.4/32"})
    assert spec.ipv4_src == ipaddress.IPv4Network("10.1.0.0/16")
    assert spec.ipv4_dst == ipaddress.IPv4Network("10.2.3.4/32")


@pytest.mark.parametrize(
    ("fields", "proto", "eth_types"),
    [
        ({}, None, (None,)),
        ({"tcp_dst": 80}, IP_PROTO_TCP, (ETH_TYPE_IPV4, ETH_TYPE_IPV6)),
        ({"udp_src": 53}, IP_PROTO_UDP, (ETH_TYPE_IPV4, ETH_TYPE_IPV6)),
        ({"ip_proto": "icmp"}, 1, (ETH_TYPE_IPV4, ETH_TYPE_IPV6)),
        ({"ip_dscp": 26}, None, (ETH_TYPE_IPV4, ETH_TYPE_IPV6)),
        ({"ipv4_dst": "10.0.0.0/8", "tcp_dst": 80}, IP_PROTO_TCP, (ETH_TYPE_IPV4,)),
        ({"eth_type": "ipv6", "tcp_dst": 80}, IP_PROTO_TCP, (ETH_TYPE_IPV6,)),
        ({"eth_type": "arp"}, None, (ETH_TYPE_ARP,)),
        ({"in_port": 3}, None, (None,)),
    ],
)
def test_implied_protocol_and_address_families(
    fields: dict[str, Any], proto: int | None, eth_types: tuple[int | None, ...]
) -> None:
    spec = MatchSpec.model_validate(fields)
    assert spec.effective_ip_proto == proto
    assert spec.eth_types == eth_types


# --------------------------------------------------------------------------------------------
# port_prefixes: (value, mask) pairs must cover a range exactly, and stay few
# --------------------------------------------------------------------------------------------


def _is_prefix_mask(mask: int) -> bool:
    """Leading ones then trailing zeros within 16 bits (a contiguous block of ports)."""
    inverted = ~mask & 0xFFFF
    return mask & ~0xFFFF == 0 and inverted & (inverted + 1) == 0


def _blocks(prefixes: tuple[tuple[int, int], ...]) -> list[PortRange]:
    blocks = []
    for value, mask in prefixes:
        assert _is_prefix_mask(mask), f"{mask:#x} is not a prefix mask"
        assert value & ~mask & 0xFFFF == 0, f"{value} has bits outside mask {mask:#x}"
        blocks.append((value, value | (~mask & 0xFFFF)))
    return blocks


@pytest.mark.parametrize(
    "port_range", [(0, 65535), (1, 1), (8000, 8010), (1024, 65535), (1, 65534), (0, 0)]
)
def test_prefixes_cover_exactly_the_range_exhaustive(port_range: PortRange) -> None:
    prefixes = port_prefixes((port_range,))
    assert 1 <= len(prefixes) <= 32
    low, high = port_range
    for port in range(65536):
        hits = sum(1 for value, mask in prefixes if port & mask == value)
        assert hits == (1 if low <= port <= high else 0), port


def test_prefixes_for_known_ranges() -> None:
    assert port_prefixes(((8000, 8010),)) == ((8000, 0xFFF8), (8008, 0xFFFE), (8010, 0xFFFF))
    assert port_prefixes(((0, 65535),)) == ((0, 0),)
    assert port_prefixes(((1, 1),)) == ((1, 0xFFFF),)
    assert port_prefixes(((1024, 65535),)) == (
        (1024, 0xFC00),
        (2048, 0xF800),
        (4096, 0xF000),
        (8192, 0xE000),
        (16384, 0xC000),
        (32768, 0x8000),
    )


def test_prefixes_cover_random_ranges_exactly_and_stay_small() -> None:
    rng = random.Random(20240601)
    cases: list[PortRange] = [(0, 65535), (1, 1), (8000, 8010), (1024, 65535), (65535, 65535)]
    for _ in range(400):
        low = rng.randrange(65536)
        cases.append((low, rng.randrange(low, 65536)))
    for low, high in cases:
        prefixes = port_prefixes(((low, high),))
        blocks = _blocks(prefixes)
        # contiguous, ascending, non-overlapping blocks from low to high
        assert blocks[0][0] == low
        assert blocks[-1][1] == high
        for (_, end), (start, _) in itertools.pairwise(blocks):
            assert start == end + 1
        assert len(prefixes) <= 32, (low, high, len(prefixes))


def test_prefixes_of_several_ranges_are_concatenated() -> None:
    ranges = parse_port_set([22, "8000-8010", 65535])
    prefixes = port_prefixes(ranges)
    covered = {port for port in range(65536) if any(port & m == v for v, m in prefixes)}
    assert covered == {22, *range(8000, 8011), 65535}


def test_flow_count_multiplies_families_and_port_masks() -> None:
    # 8000-8010 needs 3 prefixes; no address family named means IPv4 and IPv6
    assert MatchSpec(tcp_dst="8000-8010").flow_count == 2 * 3
    assert MatchSpec(ipv4_dst="10.0.0.0/8", tcp_dst=[80, 443]).flow_count == 1 * 2


def test_a_rule_that_expands_past_the_limit_is_rejected() -> None:
    # two awkward ranges: ~30 prefixes each, times 2 families, is far beyond the limit
    message = _match_error({"tcp_src": "1-65534", "tcp_dst": "1-65534"})
    assert "OpenFlow entries per direction" in message
    assert "1024" in message
