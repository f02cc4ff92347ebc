"""The audit's lean read of a switch's entries against os-ken's parse of the same bytes."""

from __future__ import annotations

import random
import struct
from pathlib import Path
from typing import Any

import pytest
from os_ken.ofproto import ofproto_v1_3 as v13
from os_ken.ofproto import ofproto_v1_3_parser as v13_parser

from controller.openflow import messages
from controller.openflow.flowstats import FlowStatsError
from controller.openflow.installed import installed_entries
from controller.openflow.osken_internals import parse
from controller.openflow.stats import FlowCounters
from controller.pipeline.flows import FlowEntry
from controller.pipeline.planner import plan_switch
from controller.policy.load import load_policy_file
from tests.support import flow_stats_replies as replies

REPO = Path(__file__).resolve().parents[2]
COUNT_TABLE = 3


def _entry(match: Any, rng: random.Random, table: int, priority: int, cookie: int) -> bytes:
    return replies.entry(match, rng, table=table, instructions=1, priority=priority, cookie=cookie)


def _planned(flow: FlowEntry, rng: random.Random) -> bytes:
    match = messages.ofp_match(v13_parser, flow.match)
    return _entry(match, rng, flow.table_id, flow.priority, flow.cookie)


def _oskens(bodies: list[bytes]) -> list[FlowCounters]:
    """What the audit made of os-ken's parse of the whole reply."""
    out = []
    for index, body in enumerate(bodies):
        flags = v13.OFPMPF_REPLY_MORE if index < len(bodies) - 1 else 0
        message = struct.pack(
            "!BBHIHH4x", 4, v13.OFPT_MULTIPART_REPLY, 16 + len(body), 0x55, 1, flags
        )
        message += body
        msg = parse(message)
        out += [
            FlowCounters(messages.installed_flow(s), s.packet_count, s.byte_count)
            for s in msg.body
            if s.table_id != COUNT_TABLE
        ]
    return out


def _every_planned_entry(rng: random.Random) -> list[bytes]:
    entries = []
    for policy_file in sorted((REPO / "policies").rglob("*.yaml")):
        policy = load_policy_file(policy_file)
        for flow in plan_switch(policy, {"s1-eth1": 1, "s1-eth2": 2}).flows:
            entries.append(_planned(flow, rng))
    return entries


def test_every_planned_entry_reads_back_as_os_ken_reads_it() -> None:
    rng = random.Random(3)
    entries = _every_planned_entry(rng)
    bodies = replies.parts(entries, limit=4096)
    assert len(bodies) > 1  # entries of one reply arrive in parts
    got = installed_entries([memoryview(body) for body in bodies], COUNT_TABLE)
    assert got == _oskens(bodies)
    assert len(got) == len(entries) and not any(entry.flow.opaque for entry in got)


def test_foreign_and_counting_entries_as_os_ken_sees_them() -> None:
    """A field flowlane does not model makes an entry opaque; the counting table is skipped;
    masks and addresses decode to the canonical match."""
    rng = random.Random(4)
    matches = [
        v13_parser.OFPMatch(in_port=1, vlan_pcp=3),  # vlan_pcp: not a field flowlane writes
        v13_parser.OFPMatch(eth_type=0x0800, ipv4_src=("10.0.0.0", "255.0.0.0")),
        v13_parser.OFPMatch(eth_dst="aa:bb:cc:dd:ee:ff", eth_type=0x86DD, ipv6_dst="2001:db8::1"),
        v13_parser.OFPMatch(metadata=(0x30, 0xF0), ip_dscp=46, eth_type=0x0800),
        v13_parser.OFPMatch(),
    ]
    entries = [_entry(m, rng, table=rng.choice([0, 1, 2]), priority=9, cookie=5) for m in matches]
    entries.insert(2, _entry(v13_parser.OFPMatch(tcp_dst=80), rng, COUNT_TABLE, 1, 1))
    got = installed_entries([b"".join(entries)], COUNT_TABLE)
    assert got == _oskens([b"".join(entries)])
    assert [entry.flow.opaque for entry in got] == [True, False, False, False, False]


def test_a_broken_reply_is_an_error_not_a_short_table() -> None:
    entry = _entry(v13_parser.OFPMatch(eth_type=0x0800), random.Random(1), 0, 1, 1)
    with pytest.raises(FlowStatsError, match="length"):
        installed_entries([entry[:-8]], COUNT_TABLE)
    with pytest.raises(FlowStatsError, match="truncated"):
        installed_entries([entry + entry[:10]], COUNT_TABLE)
