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
from controller.qos.tc import ROOT_CLASSID, htb_bursts, root_burst_short

G = 1_000_000_000
M = 1_000_000

# `tc -s class show` of a 1 Gbit/s port as OVS leaves it, and as flowlane sets it.
OVS_DEFAULT = """\
class htb 1:1 parent 1:fffe prio 0 rate 100Mbit ceil 1Gbit burst 1562b cburst 1500b
 Sent 134790341 bytes 89050 pkt (dropped 0, overlimits 44710 requeues 0)
 backlog 0b 0p requeues 0
class htb 1:fffe root rate 1Gbit ceil 1Gbit burst 1375b cburst 1375b
 Sent 134790341 bytes 89050 pkt (dropped 0, overlimits 74475 requeues 0)
 backlog 0b 0p requeues 0
"""
SIZED = """\
class htb 1:1 parent 1:fffe prio 0 rate 100Mbit ceil 1Gbit burst 250000b cburst 250000b
class htb 1:fffe root rate 1Gbit ceil 1Gbit burst 244Kb cburst 244Kb
class htb 1:2 parent 1:fffe prio 1 rate 500Mbit ceil 10Gbit burst 2441Kb cburst 2441Kb
"""


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


def test_bursts_are_read_from_tc_in_bytes() -> None:
    assert htb_bursts(OVS_DEFAULT) == {"1:1": 1562, ROOT_CLASSID: 1375}
    assert htb_bursts(SIZED) == {"1:1": 250_000, ROOT_CLASSID: 244 * 1024, "1:2": 2441 * 1024}


def test_a_root_class_left_at_one_frame_is_short() -> None:
    assert root_burst_short(OVS_DEFAULT, htb_burst_bytes(G))
    # tc prints 250 000 B back as 244Kb (249 856 B): rounding is not a shortfall.
    assert not root_burst_short(SIZED, htb_burst_bytes(G))


def test_a_port_without_htb_is_not_short() -> None:
    assert not root_burst_short("", htb_burst_bytes(G))
