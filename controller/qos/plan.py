"""Per-port queue layout, derived from the policy and what the switch says about the port.

Pure: the OVSDB and tc shells only carry out what this module decides.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from controller.policy.jobs import JobSpec
from controller.policy.model import Policy
from controller.policy.units import format_rate
from controller.qos.shares import job_queues, shares, sharing_note

HTB_MIN_RATE_BPS = 8_000
"""HTB rejects a zero guarantee; one packet per 1.5 s is the smallest useful floor."""

BURST_S = 0.002
"""How long a class may send at line rate on saved-up tokens: its HTB burst, as time.

HTB only sends while a class (and, when it borrows, its parent) has tokens,
and a class can save at most its burst.  Left unset, OVS gives the queues
one frame and the root class ``rate/HZ + MTU`` with a nanosecond HZ, again
about one frame (1 375-1 562 B measured at 1 Gbit/s): 11 us of credit, so
every scheduling gap longer than that (a softirq, a busy CPU, a sender's
batch) is bandwidth lost for good.  One TCP flow across three such 1 Gbit
hops got 126-257 Mbit/s here; with 2 ms of burst, 937-956.  2 ms covers the
gaps of a busy host and still lets a class overshoot its rate by no more
than 2 ms of traffic.
"""

FRAME_BYTES = 1_514
"""A full Ethernet frame at MTU 1500 (without FCS): the unit HTB sends in."""

MIN_BURST_FRAMES = 8
"""Floor of the burst on slow ports: a TCP sender's batch (TSO off) is several frames."""

QUEUE_S = 0.04
"""How much traffic, as time at the port's rate, each HTB class may hold queued.

Left alone, a class's queue is a ``pfifo`` as long as the device's
``txqueuelen`` (1 000 frames): 0.4 s at 30 Mbit/s, and more for a job queue
that drains at a fraction of the port.  Measured on the job-shares test
(30 Mbit/s, weights 2:1, job B's eight TCP flows in a 6.75 Mbit/s queue):
with 1 000 frames B's queue stood 1.2 s deep and overflowed, and B got
8.5 Mbit/s of goodput for the 10 its share puts on the wire (A/B = 2.23);
with 100 frames, 9.6 (A/B = 1.99, the port full); with 30 frames A's single
flow could no longer fill its share (1.83).  40 ms at the port's rate is the
100 frames there; ``MIN_QUEUE_FRAMES`` and ``MAX_QUEUE_FRAMES`` bound it.

The queue is a ``bfifo`` of that many bytes (``htb_queue_bytes``), not a ``pfifo`` of
that many frames: at MTU 9000 a 64-frame floor would be 577 kB, 461 ms at 10 Mbit/s.
Counted in bytes, the same limit holds the same 40 ms whatever the frame size, and at
MTU 1500 exactly the frames a ``pfifo`` held before.
"""

MIN_QUEUE_FRAMES = 64
"""Floor of a class's queue, in ``FRAME_BYTES`` frames: a single TCP flow needs some room
to keep a queue busy."""

MAX_QUEUE_FRAMES = 1_000
"""Ceiling of a class's queue, in ``FRAME_BYTES`` frames: the kernel's own default
(``txqueuelen``), reached at about 300 Mbit/s; faster ports keep what they had."""


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """One HTB class on a port; ``queue_id`` is the OVS queue number (HTB minor id minus 1).

    A job queue of a per-job class is named ``<class>/job<slot>`` and lists its
    ``jobs`` (more than one when jobs outnumber the queues); the class's own
    queue, named as the class, then carries its unregistered flows.
    """

    queue_id: int
    class_name: str
    min_bps: int
    max_bps: int
    priority: int
    dscp: int
    jobs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PortQos:
    """The QoS one switch port should have."""

    port_name: str
    rate_bps: int
    queues: tuple[QueueSpec, ...]
    note: str = ""

    @property
    def burst_bytes(self) -> int:
        """The HTB burst (and cburst) of every class of the port, the root class included."""
        return htb_burst_bytes(self.rate_bps)

    @property
    def queue_bytes(self) -> int:
        """The limit of every class's queue (its leaf ``bfifo``), in bytes."""
        return htb_queue_bytes(self.rate_bps)


def htb_queue_frames(rate_bps: int) -> int:
    """``QUEUE_S`` of the port's rate in full frames, within the bounds.

    The port's rate, not the class's guarantee: a class may borrow up to the
    port's, and a queue sized by the guarantee would be too short for that.
    """
    if rate_bps <= 0:
        raise ValueError(f"rate must be positive, got {rate_bps}")
    frames = math.ceil(rate_bps * QUEUE_S / 8 / FRAME_BYTES)
    return min(MAX_QUEUE_FRAMES, max(MIN_QUEUE_FRAMES, frames))


def htb_queue_bytes(rate_bps: int) -> int:
    """The byte limit of a class's queue: ``htb_queue_frames`` whole ``FRAME_BYTES`` frames.

    Whole standard frames, so at MTU 1500 the queue holds exactly what the
    frame-counted queue held; in bytes, so jumbo frames do not make it longer
    in time (``QUEUE_S``).
    """
    return htb_queue_frames(rate_bps) * FRAME_BYTES


def htb_burst_bytes(rate_bps: int) -> int:
    """The HTB burst a class of a port with ceiling ``rate_bps`` needs to reach that rate.

    ``BURST_S`` of traffic at the rate, and never less than
    ``MIN_BURST_FRAMES`` full frames (a 10 Mbit/s port's 2 ms is 2 500 B,
    under two frames).  Every class of the port gets the same burst: each
    may borrow up to the port's ceiling, and cburst is what paces that.
    """
    if rate_bps <= 0:
        raise ValueError(f"rate must be positive, got {rate_bps}")
    return max(math.ceil(rate_bps * BURST_S / 8), MIN_BURST_FRAMES * FRAME_BYTES)


def port_rate(policy: Policy, port_name: str, link_bps: int | None) -> tuple[int, str]:
    """The port's HTB ceiling and why.

    An override is taken as the operator wrote it.  Otherwise the policy rate
    is capped at the link speed OVS reports: a ceiling above the line rate
    would let the queue build in the NIC's FIFO, where HTB cannot order it.
    A port reported without a speed gets the policy rate.
    """
    if port_name in policy.ports.overrides:
        return policy.ports.overrides[port_name].bps, "override"
    configured = policy.ports.rate.bps
    if link_bps and link_bps < configured:
        return link_bps, f"link speed {format_rate(link_bps)} below policy rate"
    return configured, "policy rate"


def plan_port_qos(
    policy: Policy, port_name: str, link_bps: int | None, jobs: Sequence[JobSpec] = ()
) -> PortQos:
    """The port's queues: one per class, and in a per-job class one per job queue in use.

    A per-job class's guarantee is split between its job queues and its own
    queue (``controller.qos.shares.shares``); every part keeps the class's
    ceiling and priority, so the class stays work-conserving.  OVS's linux-htb
    has one level of classes, so a class's ``max_rate`` caps each of its
    queues, not their sum.
    """
    rate, reason = port_rate(policy, port_name, link_bps)
    wanted = {name: c.min_rate.resolve(rate) for name, c in policy.classes.items()}
    note = reason
    guaranteed = sum(wanted.values())
    if guaranteed > rate:
        # Only possible when absolute guarantees meet a port slower than the
        # policy expected: scale them down in proportion rather than
        # oversubscribe HTB (whose guarantees would then mean nothing).
        wanted = {name: value * rate // guaranteed for name, value in wanted.items()}
        note = f"{reason}; guarantees scaled to fit {format_rate(rate)}"
    by_job = job_queues(policy, jobs)
    queues: list[QueueSpec] = []
    for name, c in policy.classes.items():
        ceiling = min(c.max_rate.resolve(rate) if c.max_rate else rate, rate)
        in_use = by_job.get(name, ())
        unregistered, parts = shares(wanted[name], in_use)
        floor = max(HTB_MIN_RATE_BPS, unregistered)
        queues.append(
            QueueSpec(policy.queue_id(name), name, floor, max(floor, ceiling), c.priority, c.dscp)
        )
        for queue in in_use:
            floor = max(HTB_MIN_RATE_BPS, parts[queue.slot.slot])
            queues.append(
                QueueSpec(
                    queue_id=queue.slot.queue_id,
                    class_name=queue.slot.name,
                    min_bps=floor,
                    max_bps=max(floor, ceiling),
                    priority=c.priority,
                    dscp=queue.slot.dscp,
                    jobs=queue.jobs,
                )
            )
    shared = sharing_note(by_job)
    if shared:
        note = f"{note}; {shared}"
    return PortQos(port_name, rate, tuple(queues), note)


@dataclass(frozen=True, slots=True, order=True)
class TcFilter:
    """``tc filter ... u32 match ip tos <dscp<<2> 0xfc flowid 1:<queue+1>``.

    The userspace datapath ignores ``set_queue``; this filter on the port's
    HTB qdisc puts each class DSCP into its queue instead.
    """

    protocol: str
    dscp: int
    classid: str


def htb_classid(queue_id: int) -> str:
    """OVS's linux-htb QoS names queue N's HTB class ``1:<N+1>``."""
    return f"1:{queue_id + 1:x}"


def tc_filters(qos: PortQos) -> tuple[TcFilter, ...]:
    return tuple(
        sorted(
            TcFilter(protocol, queue.dscp, htb_classid(queue.queue_id))
            for queue in qos.queues
            for protocol in ("ip", "ipv6")
        )
    )


def unmatched_overrides(policy: Policy, port_names: Iterable[str]) -> list[str]:
    """Ports ``ports.overrides`` names that none of ``port_names`` is: a typo, or a port of
    a switch that is not connected, whose rate then applies to nothing."""
    known = set(port_names)
    return sorted(name for name in policy.ports.overrides if name not in known)
