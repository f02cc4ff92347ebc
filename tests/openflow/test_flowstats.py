"""The lean flow-stats decoder against os-ken's own parse of the same reply bytes."""

from __future__ import annotations

import random
import struct
import time
from typing import Any

import pytest
from os_ken.ofproto import ofproto_v1_3 as v13
from os_ken.ofproto import ofproto_v1_3_parser as v13_parser

from controller.classify.flows import CounterSample
from controller.flowid import FlowId
from controller.openflow.flowstats import (
    FlowStatsError,
    decode_count_entries,
    decode_count_replies,
    multipart_body,
)
from controller.openflow.osken_internals import parse
from tests.support import flow_stats_replies as replies


def _entry(
    fields: list[tuple[str, Any]], rng: random.Random, instructions: int = 0, table: int = 3
) -> bytes:
    return replies.entry(
        v13_parser.OFPMatch(_ordered_fields=fields), rng, table=table, instructions=instructions
    )


def _oskens(bodies: list[bytes]) -> list[tuple[CounterSample, int]]:
    """What os-ken's parse of each whole message gives, through ``FlowId.from_oxm``."""
    out = []
    for index, body in enumerate(bodies):
        message = replies.reply(body, more=index < len(bodies) - 1)
        msg = parse(message)
        for entry in msg.body:
            flow = FlowId.from_oxm(dict(entry.match.items()))
            if flow is None:
                continue
            age = entry.duration_sec + entry.duration_nsec / 1e9
            sample = CounterSample(flow, entry.byte_count, entry.packet_count, age)
            out.append((sample, entry.cookie))
    return out


def _ipv4(rng: random.Random) -> str:
    return ".".join(str(rng.randrange(256)) for _ in range(4))


def _ipv6(rng: random.Random) -> str:
    return ":".join(f"{rng.randrange(1 << 16):x}" for _ in range(8))


def _five_tuple(rng: random.Random) -> list[tuple[str, Any]]:
    ipv6 = rng.random() < 0.3
    proto = rng.choice(["tcp", "udp"])
    address = _ipv6 if ipv6 else _ipv4
    family = "ipv6" if ipv6 else "ipv4"
    fields: list[tuple[str, Any]] = [
        ("eth_type", 0x86DD if ipv6 else 0x0800),
        ("ip_proto", 6 if proto == "tcp" else 17),
        (f"{family}_src", address(rng)),
        (f"{family}_dst", address(rng)),
        (f"{proto}_src", rng.choice([0, 65535, rng.randrange(1 << 16)])),
        (f"{proto}_dst", rng.randrange(1 << 16)),
    ]
    if rng.random() < 0.2:
        rng.shuffle(fields)
    return fields


ODD_MATCHES: list[list[tuple[str, Any]]] = [
    [],  # table-miss
    [("eth_type", 0x0800), ("ip_proto", 6)],  # the learn rule's own shape
    [("eth_type", 0x0806)],
    [("eth_type", 0x0800), ("ip_proto", 1), ("ipv4_src", "10.0.0.1"), ("ipv4_dst", "10.0.0.2")],
    # Masked address: not an exact 5-tuple.
    [
        ("eth_type", 0x0800),
        ("ip_proto", 6),
        ("ipv4_src", ("10.0.0.0", "255.255.255.0")),
        ("ipv4_dst", "10.0.0.2"),
        ("tcp_src", 1),
        ("tcp_dst", 2),
    ],
    # TCP entry with UDP ports.
    [
        ("eth_type", 0x0800),
        ("ip_proto", 6),
        ("ipv4_src", "10.0.0.1"),
        ("ipv4_dst", "10.0.0.2"),
        ("udp_src", 1),
        ("udp_dst", 2),
    ],
    # IPv4 entry with IPv6 addresses.
    [
        ("eth_type", 0x0800),
        ("ip_proto", 17),
        ("ipv6_src", "::1"),
        ("ipv6_dst", "::2"),
        ("udp_src", 1),
        ("udp_dst", 2),
    ],
    # A missing destination port.
    [("eth_type", 0x86DD), ("ip_proto", 17), ("ipv6_src", "::1"), ("ipv6_dst", "::2")],
]

EXTRA_FIELDS: list[tuple[str, Any]] = [
    ("in_port", 3),
    ("metadata", (5, 0xFF)),
    ("vlan_vid", 0x1000 | 10),
    ("ip_dscp", 46),
    ("reg0", 9),  # a Nicira (class 0x0001) field
]


def _table(rng: random.Random, count: int) -> list[bytes]:
    entries = []
    for _ in range(count):
        roll = rng.random()
        if roll < 0.1:
            fields = list(rng.choice(ODD_MATCHES))
        else:
            fields = _five_tuple(rng)
            if roll < 0.25:
                fields.insert(rng.randrange(len(fields) + 1), rng.choice(EXTRA_FIELDS))
        entries.append(_entry(fields, rng, instructions=rng.choice([0, 0, 1, 2])))
    return entries


def test_decodes_exactly_what_the_os_ken_path_gives() -> None:
    rng = random.Random(12)
    bodies = replies.parts(_table(rng, 3000))
    assert len(bodies) > 1
    expected = _oskens(bodies)
    got = decode_count_replies(bodies)
    assert got == expected
    # Equal floats, not merely close ones: the ages are computed the same way.
    assert [s.age_s for s, _ in got] == [s.age_s for s, _ in expected]
    families = {(s.flow.eth_type, s.flow.ip_proto) for s, _ in got}
    assert families == {(0x0800, 6), (0x0800, 17), (0x86DD, 6), (0x86DD, 17)}
    assert 0 < len(got) < 3000


def test_each_odd_entry_is_skipped_and_its_neighbours_are_kept() -> None:
    rng = random.Random(1)
    good = [("eth_type", 0x0800), ("ip_proto", 6), ("ipv4_src", "10.0.0.1")]
    good += [("ipv4_dst", "10.0.0.2"), ("tcp_src", 40000), ("tcp_dst", 5201)]
    for odd in ODD_MATCHES:
        body = b"".join([_entry(good, rng), _entry(odd, rng, 1), _entry(good, rng)])
        got = decode_count_entries(body)
        assert got == _oskens([body])
        assert [s.flow for s, _ in got] == [
            FlowId(0x0800, 6, 0x0A000001, 0x0A000002, 40000, 5201)
        ] * 2


def test_reads_the_counters_cookie_and_age_of_an_entry() -> None:
    fields = [("eth_type", 0x86DD), ("ip_proto", 17), ("ipv6_src", "2001:db8::1")]
    fields += [("ipv6_dst", "2001:db8::2"), ("udp_src", 4791), ("udp_dst", 4791)]
    entry = bytearray(_entry(fields, random.Random(0)))
    struct.pack_into("!II", entry, 4, 12, 250_000_000)
    struct.pack_into("!QQQ", entry, 24, 0xC0FFEE, 7, (1 << 64) - 1)
    [(sample, cookie)] = decode_count_entries(bytes(entry))
    base = 0x20010DB8 << 96
    assert sample == CounterSample(
        FlowId(0x86DD, 17, base | 1, base | 2, 4791, 4791), (1 << 64) - 1, 7, 12.25
    )
    assert cookie == 0xC0FFEE


def test_the_next_poll_reads_new_counters_for_the_flow_it_already_knows() -> None:
    """A match is decoded once: later polls of the same entry give its new counters and
    age with the very same flow."""
    fields = [("eth_type", 0x0800), ("ip_proto", 6), ("ipv4_src", "10.9.0.1")]
    fields += [("ipv4_dst", "10.9.0.2"), ("tcp_src", 33000), ("tcp_dst", 443)]
    entry = bytearray(_entry(fields, random.Random(8)))
    [(first, _)] = decode_count_entries(bytes(entry))
    struct.pack_into("!II", entry, 4, int(first.age_s) + 1, 0)
    struct.pack_into("!QQ", entry, 32, first.packets + 3, first.bytes + 4500)
    [(second, _)] = decode_count_entries(bytes(entry))
    assert second.flow is first.flow
    assert (second.bytes, second.packets) == (first.bytes + 4500, first.packets + 3)
    assert second.age_s == int(first.age_s) + 1


def test_an_empty_body_has_no_entries() -> None:
    assert decode_count_entries(b"") == []
    assert decode_count_replies([]) == []


@pytest.mark.parametrize("cut", [1, 20, 60])
def test_a_truncated_body_is_an_error_not_a_short_table(cut: int) -> None:
    rng = random.Random(3)
    body = _entry(_five_tuple(rng), rng) + _entry(_five_tuple(rng), rng)
    with pytest.raises(FlowStatsError):
        decode_count_entries(body[:-cut])


def test_a_zero_length_entry_is_an_error_not_a_loop() -> None:
    with pytest.raises(FlowStatsError, match="length 0"):
        decode_count_entries(bytes(64))


def test_multipart_body_is_the_part_after_the_reply_header() -> None:
    rng = random.Random(4)
    body = _entry(_five_tuple(rng), rng)
    assert bytes(multipart_body(replies.reply(body))) == body
    port_stats = bytearray(replies.reply(body))
    struct.pack_into("!H", port_stats, 8, v13.OFPMP_PORT_STATS)
    with pytest.raises(FlowStatsError, match="multipart type 4"):
        multipart_body(bytes(port_stats))
    with pytest.raises(FlowStatsError):
        multipart_body(b"\x04\x13")


def test_the_body_of_a_whole_reply_decodes_as_os_ken_parses_the_message() -> None:
    """The switch codec hands ``multipart_body`` the reply's bytes, never os-ken's parse."""
    rng = random.Random(5)
    body = b"".join(_table(rng, 50))
    message = replies.reply(body, more=True, xid=0x99)
    assert decode_count_entries(multipart_body(message)) == _oskens([body])
    assert len(parse(message).body) == 50


def test_lean_decoder_is_much_faster_than_os_ken_on_10000_entries() -> None:
    rng = random.Random(6)
    entries = []
    for index in range(10_000):
        fields: list[tuple[str, Any]] = [("eth_type", 0x0800), ("ip_proto", 6 if index % 3 else 17)]
        fields += [("ipv4_src", _ipv4(rng)), ("ipv4_dst", _ipv4(rng))]
        proto = "tcp" if index % 3 else "udp"
        fields += [(f"{proto}_src", rng.randrange(1 << 16)), (f"{proto}_dst", 5201)]
        entries.append(_entry(fields, rng))
    bodies = replies.parts(entries)

    started = time.perf_counter()
    expected = _oskens(bodies)
    os_ken_s = time.perf_counter() - started
    lean_s = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        got = decode_count_replies(bodies)
        lean_s = min(lean_s, time.perf_counter() - started)
    assert got == expected and len(got) == 10_000
    print(
        f"\n10 000 entries: os-ken {os_ken_s * 1e3:.1f} ms, lean {lean_s * 1e3:.1f} ms"
        f" ({os_ken_s / lean_s:.0f}x, {lean_s / 1e4 * 1e6:.2f} us/entry)"
    )
    assert os_ken_s >= 5 * lean_s
