"""Flow identities: both directions, OpenFlow fields in and out, text for operators."""

from __future__ import annotations

import ipaddress

import pytest

from controller.classify.flows import CounterSample
from controller.flowid import ETH_TYPE_IPV4, ETH_TYPE_IPV6, IP_PROTO_TCP, IP_PROTO_UDP, FlowId

V4 = FlowId(ETH_TYPE_IPV4, IP_PROTO_TCP, 0x0A000001, 0x0A000002, 40_000, 8000)
V6 = FlowId(
    ETH_TYPE_IPV6,
    IP_PROTO_UDP,
    int(ipaddress.IPv6Address("fd00::1")),
    int(ipaddress.IPv6Address("fd00::2")),
    5000,
    4791,
)


def test_reversed_swaps_ends_and_is_its_own_inverse() -> None:
    back = V4.reversed()
    assert (back.src, back.dst, back.src_port, back.dst_port) == (V4.dst, V4.src, 8000, 40_000)
    assert (back.eth_type, back.ip_proto) == (V4.eth_type, V4.ip_proto)
    assert back.reversed() == V4
    assert back != V4


def test_equal_flows_are_one_key_whatever_object_built_them() -> None:
    copy = FlowId(*V4)
    assert copy == V4 and hash(copy) == hash(V4)
    assert {V4: 1}[copy] == 1


def test_flow_ids_are_immutable() -> None:
    with pytest.raises(AttributeError):
        V4.src = 1  # type: ignore[misc]


def test_oxm_fields_name_the_family_and_protocol() -> None:
    assert V4.oxm_fields() == {
        "eth_type": ETH_TYPE_IPV4,
        "ip_proto": IP_PROTO_TCP,
        "ipv4_src": 0x0A000001,
        "ipv4_dst": 0x0A000002,
        "tcp_src": 40_000,
        "tcp_dst": 8000,
    }
    assert V6.oxm_fields() == {
        "eth_type": ETH_TYPE_IPV6,
        "ip_proto": IP_PROTO_UDP,
        "ipv6_src": V6.src,
        "ipv6_dst": V6.dst,
        "udp_src": 5000,
        "udp_dst": 4791,
    }


@pytest.mark.parametrize("flow", [V4, V6, V4.reversed(), V6.reversed()])
def test_from_oxm_reads_back_oxm_fields(flow: FlowId) -> None:
    assert FlowId.from_oxm(flow.oxm_fields()) == flow


def test_from_oxm_takes_addresses_as_os_ken_reports_them() -> None:
    fields = {
        "eth_type": 0x0800,
        "ip_proto": 6,
        "ipv4_src": "10.0.0.1",
        "ipv4_dst": "10.0.0.2",
        "tcp_src": 40_000,
        "tcp_dst": 8000,
    }
    assert FlowId.from_oxm(fields) == V4
    v6 = {**V6.oxm_fields(), "ipv6_src": "fd00::1", "ipv6_dst": "fd00::2"}
    assert FlowId.from_oxm(v6) == V6


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"eth_type": 0x0806},
        {**V4.oxm_fields(), "ip_proto": 1},  # ICMP: no ports
        {k: v for k, v in V4.oxm_fields().items() if k != "tcp_dst"},  # a wildcard
        {**V4.oxm_fields(), "ipv4_src": "fd00::1"},  # wrong family
        {**V4.oxm_fields(), "ipv4_src": "not an address"},
        {**V4.oxm_fields(), "ipv4_src": 1 << 32},
        {**V4.oxm_fields(), "tcp_src": 70_000},
        {**V4.oxm_fields(), "tcp_src": True},
        {**V4.oxm_fields(), "tcp_src": "80"},
    ],
)
def test_from_oxm_skips_what_is_not_an_exact_tcp_or_udp_flow(fields: dict[str, object]) -> None:
    assert FlowId.from_oxm(fields) is None


def test_str_is_what_an_operator_reads() -> None:
    assert str(V4) == "tcp 10.0.0.1:40000 > 10.0.0.2:8000"
    assert str(V6) == "udp [fd00::1]:5000 > [fd00::2]:4791"


def test_samples_are_plain_values() -> None:
    sample = CounterSample(V4, 1500, 1, 0.25)
    assert (sample.flow, sample.bytes, sample.packets, sample.age_s) == (V4, 1500, 1, 0.25)
    flow, octets, packets, age = sample
    assert (flow, octets, packets, age) == (V4, 1500, 1, 0.25)
