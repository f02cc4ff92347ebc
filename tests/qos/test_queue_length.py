"""HTB queue length: every class's queue holds 40 ms of its port in bytes, bounded; a class
without it is noticed from the class dump alone.

With the kernel's default queue (1 000 frames, 0.4 s at 30 Mbit/s) a job queue stood over a
second deep and its job lost a tenth of its share (weights 2:1 gave 2.23, not 2.0:
tests/mininet/test_job_shares.py measures it).
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.qos.plan import (
    FRAME_BYTES,
    MAX_QUEUE_FRAMES,
    MIN_QUEUE_FRAMES,
    QUEUE_S,
    PortQos,
    htb_queue_bytes,
    htb_queue_frames,
)
from controller.qos.tc import (
    ROOT_CLASSID,
    HtbClass,
    leaf_handle,
    leaf_limits,
    leaves_missing,
    short_queues,
)
from controller.qos.telemetry import ClassCounters

M = 1_000_000
IDLE = ClassCounters(0, 0, 0, 0, 0, 0)


def htb(classid: str, leaf: int = 0) -> HtbClass:
    parent = "root" if classid == ROOT_CLASSID else ROOT_CLASSID
    return HtbClass(classid, parent, 1000, 1000, 1514, 1514, 0, IDLE, leaf)


def test_a_queue_is_forty_milliseconds_of_the_port_within_bounds() -> None:
    assert QUEUE_S == 0.04
    assert htb_queue_frames(30 * M) == 100  # the job-shares test's bottleneck
    assert htb_queue_frames(50 * M) == 166
    assert htb_queue_frames(10 * M) == MIN_QUEUE_FRAMES == 64
    assert htb_queue_frames(10_000 * M) == MAX_QUEUE_FRAMES == 1000  # the kernel's default
    assert htb_queue_frames(30 * M) * FRAME_BYTES * 8 / (30 * M) == pytest.approx(0.04, rel=0.01)
    with pytest.raises(ValueError):
        htb_queue_frames(0)


def test_the_limit_is_in_bytes_the_frames_of_mtu_1500() -> None:
    """At MTU 1500 the byte limit holds exactly the frames the packet-counted queue held; at
    9000 it is still 40 ms (the 64-frame floor counted in frames would be 461 ms)."""
    assert htb_queue_bytes(30 * M) == 100 * FRAME_BYTES == 151_400
    assert htb_queue_bytes(10 * M) == MIN_QUEUE_FRAMES * FRAME_BYTES == 96_896
    assert htb_queue_bytes(10_000 * M) == MAX_QUEUE_FRAMES * FRAME_BYTES
    assert PortQos("p", 30 * M, ()).queue_bytes == 151_400
    assert htb_queue_bytes(30 * M) * 8 / (30 * M) == pytest.approx(QUEUE_S, rel=0.01)
    assert htb_queue_bytes(10 * M) * 8 / (10 * M) == pytest.approx(0.0775, rel=0.01)
    with pytest.raises(ValueError):
        htb_queue_bytes(0)


def test_each_class_gets_a_handle_of_its_own() -> None:
    assert leaf_handle("1:1") == 0xB001 << 16
    assert leaf_handle("1:a") == 0xB00A << 16
    assert len({leaf_handle(f"1:{minor:x}") for minor in range(1, 40)}) == 39


def test_classes_without_their_queue_are_noticed_the_root_aside() -> None:
    sized = {ROOT_CLASSID: htb(ROOT_CLASSID), "1:1": htb("1:1", leaf_handle("1:1"))}
    assert not leaves_missing(sized)
    assert leaves_missing({**sized, "1:5": htb("1:5")})  # a job's class OVS just made
    assert leaves_missing({**sized, "1:5": htb("1:5", leaf_handle("1:6"))})


class Message(dict[str, Any]):
    """What pyroute2 gives for a qdisc: fields by key, attributes by ``get_attr``."""

    def __init__(self, parent: int, kind: str, limit: int | None, index: int = 7) -> None:
        super().__init__(parent=parent, index=index)
        self.attrs: dict[str, Any] = {"TCA_KIND": kind}
        if limit is not None:
            self.attrs["TCA_OPTIONS"] = {"limit": limit}

    def get_attr(self, name: str) -> Any:
        return self.attrs.get(name)


def test_the_limits_read_back_are_the_bfifos_only() -> None:
    messages = [
        Message(0xFFFFFFFF, "htb", None),  # the root qdisc OVS made
        Message(0x10001, "bfifo", 151_400),
        Message(0x10005, "bfifo", 1_514_000),
        Message(0x10006, "pfifo", 151_400),  # the previous version's leaf: not one of ours
        Message(0x10002, "bfifo", 96_896, index=8),  # another port's: a dump answers for all
    ]
    limits = leaf_limits(messages, 7)
    assert limits == {"1:1": 151_400, "1:5": 1_514_000}
    assert leaf_limits(messages, 8) == {"1:2": 96_896}
    classes = {name: htb(name) for name in (ROOT_CLASSID, "1:1", "1:5", "1:6")}
    assert short_queues(classes, limits, 151_400) == ["1:5", "1:6"]
    assert short_queues(classes, dict.fromkeys(("1:1", "1:5", "1:6"), 151_400), 151_400) == []


def test_the_previous_versions_pfifo_handles_read_as_not_ours() -> None:
    """Its leaves hung at 0x8000 + minor: the class dump alone shows them to be replaced."""
    assert leaf_handle("1:1") != 0x8001 << 16
    assert leaves_missing({ROOT_CLASSID: htb(ROOT_CLASSID), "1:1": htb("1:1", 0x8001 << 16)})
