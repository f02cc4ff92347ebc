"""Queue telemetry from the HTB classes' counters: named by class, rated, and drops of the
latency classes noticed. (Reading the counters from the kernel: tests/qos/test_tc_netlink.py.)"""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller.qos.plan import QueueSpec
from controller.qos.telemetry import (
    ClassCounters,
    QueueStats,
    new_drops,
    port_queues,
    queue_id_of,
)

# A port flowlane provisioned, under load, as netlink reports its classes: exact bytes, and
# the backlog in bytes (tc's text would round this one to 1362Kb).
COUNTERS = {
    "1:1": ClassCounters(
        1234567, 8910, drops=3, overlimits=120, backlog_bytes=0, backlog_packets=0
    ),
    "1:2": ClassCounters(
        987654321, 650000, drops=42, overlimits=99000, backlog_bytes=1_394_874, backlog_packets=900
    ),
    "1:fffe": ClassCounters(988888888, 658910, 0, 0, 0, 0),
    "1:3": ClassCounters(0, 0, 0, 0, 0, 0),
}


def changed(classid: str, **fields: int) -> dict[str, ClassCounters]:
    return {**COUNTERS, classid: replace(COUNTERS[classid], **fields)}


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


def test_counters_and_backlog_reach_the_queue_record_unrounded() -> None:
    queues = port_queues("s1-eth3", COUNTERS, CLASSES, {}, now=1.0)
    training = queues[1]
    assert (training.bytes, training.packets, training.drops, training.overlimits) == (
        987654321,
        650000,
        42,
        99000,
    )
    assert (training.backlog_bytes, training.backlog_packets) == (1_394_874, 900)


@pytest.mark.parametrize(
    ("classid", "queue"), [("1:1", 0), ("1:a", 9), ("1:fffe", None), ("2:1", None), ("1:x", None)]
)
def test_class_ids_map_to_queue_numbers(classid: str, queue: int | None) -> None:
    assert queue_id_of(classid) == queue


def test_queues_are_named_by_class_and_rated_against_the_previous_reading() -> None:
    first = port_queues("s1-eth3", COUNTERS, CLASSES, {}, now=100.0)
    assert [(q.traffic_class, q.queue_id, q.min_bps, q.priority) for q in first] == [
        ("inference", 0, 10_000_000, 0),
        ("training", 1, 35_000_000, 1),
        ("best-effort", 2, 5_000_000, 2),
    ]
    assert all(q.rate_bps is None for q in first)
    previous = {(q.port, q.traffic_class): q for q in first}
    later = changed("1:1", bytes=1359567)  # +125 000 bytes
    second = port_queues("s1-eth3", later, CLASSES, previous, now=100.5)
    assert second[0].rate_bps == pytest.approx(2_000_000)  # 125 kB in 0.5 s = 2 Mbit/s
    assert second[1].rate_bps == 0.0
    # A queue re-created by OVS starts over: no rate from counters that went backwards.
    reset = changed("1:1", bytes=10)
    third = port_queues("s1-eth3", reset, CLASSES, previous, now=101.0)
    assert third[0].rate_bps is None


def test_a_class_the_plan_does_not_name_is_left_out() -> None:
    queues = port_queues("p", COUNTERS, CLASSES[:2], {}, now=1.0)
    assert [q.traffic_class for q in queues] == ["inference", "training"]


def test_drops_are_reported_for_latency_classes_only() -> None:
    first = port_queues("p", COUNTERS, CLASSES, {}, now=1.0)
    previous = {(q.port, q.traffic_class): q for q in first}
    dropping = {
        **changed("1:1", drops=10),
        "1:2": replace(COUNTERS["1:2"], drops=50),
    }
    second = port_queues("p", dropping, CLASSES, previous, now=2.0)
    # training dropped 8 as well, but it is not a latency class (HTB priority 1)
    assert [(s.traffic_class, n) for s, n in new_drops(second, previous)] == [("inference", 7)]
    assert new_drops(first, {}) == []  # no previous reading: nothing new


def test_stats_round_trip_through_json() -> None:
    [stats, *_] = port_queues("p", COUNTERS, CLASSES, {}, now=1.0)
    assert QueueStats.from_dict(stats.to_dict()) == stats
