"""Queue telemetry from tc's HTB class text: parsed, named by class, rated, and drops of the
latency classes noticed."""

from __future__ import annotations

import pytest

from controller.qos.plan import QueueSpec
from controller.qos.telemetry import (
    ClassCounters,
    QueueStats,
    new_drops,
    parse_htb_classes,
    port_queues,
    queue_id_of,
)

# What iproute2 6.1 prints for a port flowlane provisioned, under load (it also ends the
# class and Sent lines with a space: see the first test).
TC_TEXT = """\
class htb 1:1 parent 1:fffe prio 0 rate 10Mbit ceil 50Mbit burst 1600b cburst 1600b
 Sent 1234567 bytes 8910 pkt (dropped 3, overlimits 120 requeues 0)
 backlog 0b 0p requeues 0
 lended: 10 borrowed: 0 giants: 0
 tokens: 19375 ctokens: 3875

class htb 1:2 parent 1:fffe prio 1 rate 35Mbit ceil 50Mbit burst 1600b cburst 1600b
 Sent 987654321 bytes 650000 pkt (dropped 42, overlimits 99000 requeues 0)
 backlog 1362Kb 900p requeues 0
 lended: 5000 borrowed: 200 giants: 0
 tokens: -1200 ctokens: -300

class htb 1:fffe root rate 50Mbit ceil 50Mbit burst 1600b cburst 1600b
 Sent 988888888 bytes 658910 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
 lended: 200 borrowed: 0 giants: 0
 tokens: 3875 ctokens: 3875

class htb 1:3 parent 1:fffe prio 2 rate 5Mbit ceil 50Mbit burst 1600b cburst 1600b
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
"""
CLASSES = tuple(
    QueueSpec(queue, name, min_bps, 50_000_000, priority, dscp)
    for queue, (name, min_bps, priority, dscp) in enumerate(
        [
            ("inference", 10_000_000, 0, 46),
            ("training", 35_000_000, 1, 26),
            ("best-effort", 5_000_000, 2, 0),
        ]
    )
)


def test_every_htb_class_is_parsed_with_its_backlog_in_bytes() -> None:
    parsed = parse_htb_classes(TC_TEXT)
    assert set(parsed) == {"1:1", "1:2", "1:3", "1:fffe"}
    assert parsed["1:2"] == ClassCounters(
        bytes=987654321,
        packets=650000,
        drops=42,
        overlimits=99000,
        backlog_bytes=1362 * 1024,
        backlog_packets=900,
    )
    assert parse_htb_classes("") == {}
    spaced = TC_TEXT.replace("1600b\n", "1600b \n").replace("requeues 0)\n", "requeues 0) \n")
    assert parse_htb_classes(spaced) == parsed


@pytest.mark.parametrize(
    ("classid", "queue"), [("1:1", 0), ("1:a", 9), ("1:fffe", None), ("2:1", None), ("1:x", None)]
)
def test_class_ids_map_to_queue_numbers(classid: str, queue: int | None) -> None:
    assert queue_id_of(classid) == queue


def test_queues_are_named_by_class_and_rated_against_the_previous_reading() -> None:
    first = port_queues("s1-eth3", parse_htb_classes(TC_TEXT), CLASSES, {}, now=100.0)
    assert [(q.traffic_class, q.queue_id, q.min_bps, q.priority) for q in first] == [
        ("inference", 0, 10_000_000, 0),
        ("training", 1, 35_000_000, 1),
        ("best-effort", 2, 5_000_000, 2),
    ]
    assert all(q.rate_bps is None for q in first)
    previous = {(q.port, q.traffic_class): q for q in first}
    later = TC_TEXT.replace("Sent 1234567 bytes", "Sent 1359567 bytes")  # +125 000 bytes
    second = port_queues("s1-eth3", parse_htb_classes(later), CLASSES, previous, now=100.5)
    assert second[0].rate_bps == pytest.approx(2_000_000)  # 125 kB in 0.5 s = 2 Mbit/s
    assert second[1].rate_bps == 0.0
    # A queue re-created by OVS starts over: no rate from counters that went backwards.
    reset = TC_TEXT.replace("Sent 1234567 bytes", "Sent 10 bytes")
    third = port_queues("s1-eth3", parse_htb_classes(reset), CLASSES, previous, now=101.0)
    assert third[0].rate_bps is None


def test_a_class_the_plan_does_not_name_is_left_out() -> None:
    queues = port_queues("p", parse_htb_classes(TC_TEXT), CLASSES[:2], {}, now=1.0)
    assert [q.traffic_class for q in queues] == ["inference", "training"]


def test_drops_are_reported_for_latency_classes_only() -> None:
    first = port_queues("p", parse_htb_classes(TC_TEXT), CLASSES, {}, now=1.0)
    previous = {(q.port, q.traffic_class): q for q in first}
    text = TC_TEXT.replace("dropped 3,", "dropped 10,").replace("dropped 42,", "dropped 50,")
    second = port_queues("p", parse_htb_classes(text), CLASSES, previous, now=2.0)
    # training dropped 8 as well, but it is not a latency class (HTB priority 1)
    assert [(s.traffic_class, n) for s, n in new_drops(second, previous)] == [("inference", 7)]
    assert new_drops(first, {}) == []  # no previous reading: nothing new


def test_stats_round_trip_through_json() -> None:
    [stats, *_] = port_queues("p", parse_htb_classes(TC_TEXT), CLASSES, {}, now=1.0)
    assert QueueStats.from_dict(stats.to_dict()) == stats
