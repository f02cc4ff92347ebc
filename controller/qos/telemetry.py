"""Per-port, per-class queue telemetry from the HTB classes flowlane provisions. Pure.

OVS builds each port's queues as HTB classes (``linux-htb``) on the Linux
device, on the userspace datapath as on the kernel one, so ``tc -s class
show`` is the one source that works for both; OpenFlow queue statistics are
empty on the userspace datapath. Class ``1:<n+1>`` is queue ``n``, and queue
``n`` is the policy's ``n``-th class.

iproute2 6.1 prints HTB classes only as text (``-j`` is ignored for them),
hence a parser for that text; its sizes are rounded to Kb and Mb as tc
prints them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from controller.qos.plan import QueueSpec

ROOT_CLASS: Final = "1:fffe"

_CLASS = re.compile(
    r"^class htb (?P<classid>\S+) .*?\n"
    r"\s*Sent (?P<bytes>\d+) bytes (?P<packets>\d+) pkt"
    r" \(dropped (?P<drops>\d+), overlimits (?P<overlimits>\d+)[^)]*\)\s*\n"
    r"\s*backlog (?P<backlog>\d+(?:\.\d+)?[KMG]?)b (?P<backlog_packets>\d+)p",
    re.M,
)
_SIZE_UNITS: Final = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


@dataclass(frozen=True, slots=True)
class ClassCounters:
    """What tc says about one HTB class."""

    bytes: int
    packets: int
    drops: int
    overlimits: int
    backlog_bytes: int
    backlog_packets: int


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One class's queue on one port: counters since the queue was made, the backlog now,
    and the send rate since the previous reading (None on the first)."""

    port: str
    traffic_class: str
    queue_id: int
    bytes: int
    packets: int
    drops: int
    overlimits: int
    backlog_bytes: int
    backlog_packets: int
    rate_bps: float | None
    at: float
    min_bps: int = 0
    """The queue's guarantee (HTB rate) on this port."""
    priority: int = 0
    """Its HTB priority: 0 is served first (the latency classes)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "port": self.port,
            "class": self.traffic_class,
            "queue": self.queue_id,
            "bytes": self.bytes,
            "packets": self.packets,
            "drops": self.drops,
            "overlimits": self.overlimits,
            "backlog_bytes": self.backlog_bytes,
            "backlog_packets": self.backlog_packets,
            "rate_bps": self.rate_bps,
            "at": self.at,
            "min_bps": self.min_bps,
            "priority": self.priority,
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> QueueStats:
        return QueueStats(
            port=str(data["port"]),
            traffic_class=str(data["class"]),
            queue_id=int(data["queue"]),
            bytes=int(data["bytes"]),
            packets=int(data["packets"]),
            drops=int(data["drops"]),
            overlimits=int(data["overlimits"]),
            backlog_bytes=int(data["backlog_bytes"]),
            backlog_packets=int(data["backlog_packets"]),
            rate_bps=None if data.get("rate_bps") is None else float(data["rate_bps"]),
            at=float(data["at"]),
            min_bps=int(data.get("min_bps", 0)),
            priority=int(data.get("priority", 0)),
        )


def _size(text: str) -> int:
    unit = text[-1] if text[-1] in "KMG" else ""
    number = text[:-1] if unit else text
    return round(float(number) * _SIZE_UNITS[unit])


def parse_htb_classes(text: str) -> dict[str, ClassCounters]:
    """classid → counters, for every HTB class in ``tc -s class show dev X`` output."""
    return {
        match["classid"]: ClassCounters(
            bytes=int(match["bytes"]),
            packets=int(match["packets"]),
            drops=int(match["drops"]),
            overlimits=int(match["overlimits"]),
            backlog_bytes=_size(match["backlog"]),
            backlog_packets=int(match["backlog_packets"]),
        )
        for match in _CLASS.finditer(text)
    }


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
