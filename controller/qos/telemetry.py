"""Per-port, per-class queue telemetry from the HTB classes flowlane provisions. Pure.

OVS builds each port's queues as HTB classes (``linux-htb``) on the Linux
device, on the userspace datapath as on the kernel one, so the HTB classes'
statistics are the one source that works for both; OpenFlow queue statistics
are empty on the userspace datapath. Class ``1:<n+1>`` is queue ``n``, and
queue ``n`` is the policy's ``n``-th class.

``controller.qos.tc`` reads the classes over netlink, exact (tc's text rounds
the backlog to Kb and Mb), into ``ClassCounters``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from controller.qos.plan import QueueSpec
from controller.qos.records import QueueStats as QueueStats  # its home before records.py

ROOT_CLASS: Final = "1:fffe"


@dataclass(frozen=True, slots=True)
class ClassCounters:
    """One HTB class's statistics as the kernel keeps them (TCA_STATS2): bytes and packets
    sent, packets dropped and overlimit events since the class was made; the backlog now."""

    bytes: int
    packets: int
    drops: int
    overlimits: int
    backlog_bytes: int
    backlog_packets: int


def queue_id_of(classid: str) -> int | None:
    """``1:3`` → queue 2; None for the root class or another qdisc's classes."""
    major, _, minor = classid.partition(":")
    if major != "1" or classid == ROOT_CLASS:
        return None
    try:
        return int(minor, 16) - 1
    except ValueError:
        return None


def port_queues(
    port: str,
    classes: Mapping[str, ClassCounters],
    planned: Sequence[QueueSpec],
    previous: Mapping[tuple[str, str], QueueStats],
    now: float,
) -> list[QueueStats]:
    """The port's queues named by the class each was ``planned`` for, in queue order, with
    rates against ``previous`` (keyed by port and class). A queue whose counters went
    backwards was re-created (OVS rebuilt the qdisc): it has no rate until the next reading.
    """
    specs = {spec.queue_id: spec for spec in planned}
    stats = []
    for classid, counters in classes.items():
        queue = queue_id_of(classid)
        spec = specs.get(queue) if queue is not None else None
        if queue is None or spec is None:
            continue
        name = spec.class_name
        before = previous.get((port, name))
        rate = None
        if before is not None and now > before.at and counters.bytes >= before.bytes:
            rate = 8 * (counters.bytes - before.bytes) / (now - before.at)
        stats.append(
            QueueStats(
                port=port,
                traffic_class=name,
                queue_id=queue,
                bytes=counters.bytes,
                packets=counters.packets,
                drops=counters.drops,
                overlimits=counters.overlimits,
                backlog_bytes=counters.backlog_bytes,
                backlog_packets=counters.backlog_packets,
                rate_bps=rate,
                at=now,
                min_bps=spec.min_bps,
                priority=spec.priority,
            )
        )
    return sorted(stats, key=lambda s: s.queue_id)


def new_drops(
    current: Iterable[QueueStats], previous: Mapping[tuple[str, str], QueueStats]
) -> list[tuple[QueueStats, int]]:
    """Queues of latency classes (HTB priority 0) that dropped packets since the previous
    reading, with how many: that is where "inference is slow" shows first."""
    dropped = []
    for stats in current:
        before = previous.get((stats.port, stats.traffic_class))
        if stats.priority == 0 and before is not None and stats.drops > before.drops:
            dropped.append((stats, stats.drops - before.drops))
    return dropped
