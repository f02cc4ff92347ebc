"""HTB burst: sized for the port's rate, asked of OVS in bits, and the root class's read back.

Left unset, every HTB class got about one frame of burst, and one TCP flow
across three 1 Gbit/s hops got 220-300 Mbit/s (tests/mininet/test_htb_burst.py
measures it).
"""

from __future__ import annotations

import pytest

from controller.policy.load import parse_policy
from controller.qos.ovsdb import PortQosState, QueueState
from controller.qos.plan import (
    BURST_S,
    FRAME_BYTES,
    MIN_BURST_FRAMES,
    htb_burst_bytes,
    plan_port_qos,
)
from controller.qos.tc import ROOT_CLASSID, HtbClass, htb_bursts, root_burst_short
from controller.qos.telemetry import ClassCounters

G = 1_000_000_000
M = 1_000_000

IDLE = ClassCounters(0, 0, 0, 0, 0, 0)


def htb(classid: str, rate_bps: int, ceil_bps: int, burst: int, cburst: int) -> HtbClass:
    parent = "root" if classid == ROOT_CLASSID else ROOT_CLASSID
    return HtbClass(classid, parent, rate_bps // 8, ceil_bps // 8, burst, cburst, 0, IDLE)


# The HTB classes of a 1 Gbit/s port as OVS leaves them, and as flowlane sets them, read over
# netlink (the root's 1 368 B is what tc printed as 1250b: tc rounds ticks to microseconds).
OVS_DEFAULT = {
    "1:1": htb("1:1", 100 * M, G, 1600, 1496),
    ROOT_CLASSID: htb(ROOT_CLASSID, G, G, 1368, 1496),
}
SIZED = {
    "1:1": htb("1:1", 100 * M, G, 250_000, 250_000),
    ROOT_CLASSID: htb(ROOT_CLASSID, G, G, 249_998, 249_998),
    "1:2": htb("1:2", 500 * M, 10 * G, 2_500_000, 2_500_000),
}


def test_the_burst_is_two_milliseconds_at_the_rate() -> None:
    assert BURST_S == 0.002
    assert htb_burst_bytes(G) == 250_000  # 1 Gbit/s for 2 ms
    assert htb_burst_bytes(10 * G) == 2_500_000
    assert htb_burst_bytes(1_000_000_001) == 250_001  # rounded up, never below the rate's need


def test_a_slow_port_still_gets_several_frames() -> None:
    floor = MIN_BURST_FRAMES * FRAME_BYTES
    assert htb_burst_bytes(10 * M) == floor  # 2 ms would be 2 500 B, under two frames
    assert htb_burst_bytes(8_000) == floor
    assert floor >= 8 * 1_514


def test_a_burst_needs_a_rate() -> None:
    with pytest.raises(ValueError, match="positive"):
        htb_burst_bytes(0)


def test_a_port_plan_sizes_its_burst_for_its_own_ceiling() -> None:
    policy = parse_policy(
        {
            "classes": {"inference": {"priority": 0, "dscp": 46, "min_rate": "10%"}},
            "default_class": "inference",
            "ports": {"rate": "10Gbit", "overrides": {"s1-eth1": "100Mbit"}},
        }
    )
    assert plan_port_qos(policy, "s1-eth1", None).burst_bytes == 25_000
    assert plan_port_qos(policy, "s1-eth2", G).burst_bytes == 250_000  # the link caps it
    assert plan_port_qos(policy, "s1-eth3", None).burst_bytes == 2_500_000


def test_a_queue_without_the_planned_burst_does_not_satisfy_the_plan() -> None:
    """So a port QoS set before bursts were sized is replaced, not kept."""
    policy = parse_policy(
        {
            "classes": {"inference": {"priority": 0, "dscp": 46, "min_rate": "10%"}},
            "default_class": "inference",
            "ports": {"rate": "1Gbit"},
        }
    )
    plan = plan_port_qos(policy, "s1-eth1", None)
    [queue] = plan.queues

    def state(burst_bits: int) -> PortQosState:
        queues = {0: QueueState(queue.min_bps, queue.max_bps, queue.priority, burst_bits)}
        return PortQosState("s1-eth1", "uuid", True, G, queues, ("q",))

    assert state(250_000 * 8).satisfies(plan)  # other_config:burst is in bits
    assert not state(0).satisfies(plan)
    assert not state(250_000).satisfies(plan)


def test_bursts_are_read_in_bytes() -> None:
    assert htb_bursts(OVS_DEFAULT) == {"1:1": 1600, ROOT_CLASSID: 1368}
    assert htb_bursts(SIZED) == {"1:1": 250_000, ROOT_CLASSID: 249_998, "1:2": 2_500_000}


def test_a_root_class_left_at_one_frame_is_short() -> None:
    assert root_burst_short(OVS_DEFAULT, htb_burst_bytes(G))
    # A burst kept in scheduler ticks reads back a hair under 250 000 B: not a shortfall.
    assert not root_burst_short(SIZED, htb_burst_bytes(G))


def test_a_port_without_htb_is_not_short() -> None:
    assert not root_burst_short({}, htb_burst_bytes(G))
