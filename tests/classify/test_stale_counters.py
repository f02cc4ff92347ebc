"""Counters the switch refreshes less often than it is polled (OVS revalidation).

Open vSwitch updates a flow's counters when it revalidates its datapath
flows, every 500 ms by default. Polled every 100 ms, a steady flow's counter
stands still for four polls and then jumps: the detector must judge it by
the growth between refreshes, not by each poll's window.
"""

from __future__ import annotations

from typing import Any

from controller.classify.decisions import DemotionReason
from tests.classify.conftest import MIB

MBIT = 1_000_000
PORT = 100 * MBIT


def _demotions(polls: list[Any]) -> list[Any]:
    return [d for poll in polls for d in poll.demote]


def test_a_bulk_flow_is_demoted_at_the_first_refresh_that_shows_it(
    table: Any, make_detector: Any, flow: Any
) -> None:
    table.refresh_s = 0.5
    detector = make_detector(port_rate=PORT, interval="100ms", rate="10%", bytes="4MiB")
    bulk = table.start(flow(1), rate_mbit=60)
    polls = table.run(detector, 0.4, step=0.1)
    assert _demotions(polls) == []  # nothing counted yet: the counter still reads 0
    [demotion] = _demotions(table.run(detector, 0.1, step=0.1))
    assert demotion.flow == bulk and demotion.reason is DemotionReason.RATE
    assert demotion.latency_s == 0.5  # from its first packet, at the first refresh
    assert 55 * MBIT < demotion.rate_bps < 65 * MBIT  # over the half second, not 100 ms


def test_refreshed_at_every_poll_it_is_demoted_once_it_held_the_rate_for_two_polls(
    table: Any, make_detector: Any, flow: Any
) -> None:
    table.refresh_s = 0.1
    detector = make_detector(port_rate=PORT, interval="100ms", rate="10%", bytes="4MiB")
    table.start(flow(1), rate_mbit=60)
    [demotion] = _demotions(table.run(detector, 0.5, step=0.1))
    assert demotion.latency_s <= 0.2 + 1e-9


def test_persistent_connections_at_five_percent_are_never_demoted(
    table: Any, make_detector: Any, flow: Any
) -> None:
    """Twenty keep-alive connections, each at 5 % of the port for ten minutes, polled every
    100 ms with counters refreshed every 500 ms: their refreshes never reach 10 %."""
    table.refresh_s = 0.5
    detector = make_detector(port_rate=PORT, interval="100ms", rate="10%", bytes="4MiB")
    connections = [table.start(flow(n), rate_mbit=5) for n in range(20)]
    polls = table.run(detector, 600, step=0.1)
    assert _demotions(polls) == []
    assert all(table.entries[c].octets > 350 * MIB for c in connections)


def test_a_flow_that_stops_and_bursts_later_is_judged_over_the_whole_gap(
    table: Any, make_detector: Any, flow: Any
) -> None:
    """A quiet spell is not a stale counter: a burst after 10 s of silence averages over
    them, as it should (it is 0.8 Mbit/s, not bulk)."""
    detector = make_detector(port_rate=PORT, interval="100ms", rate="10%", bytes="4MiB")
    talker = table.start(flow(1))
    table.send(talker, 1000)
    polls = table.run(detector, 10, step=0.1)
    table.send(talker, 1 * MIB)
    polls += table.run(detector, 0.1, step=0.1)
    assert _demotions(polls) == []
