"""The elephant detector against a simulated counting table, over simulated time."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from controller.classify.decisions import (
    Decisions,
    Demotion,
    DemotionReason,
    Release,
    ReleaseReason,
)
from controller.classify.detector import Detector
from controller.classify.flows import FlowState

KIB = 1 << 10
MIB = 1 << 20


def demotions(polls: list[Decisions]) -> list[Demotion]:
    return [demotion for decisions in polls for demotion in decisions.demote]


def releases(polls: list[Decisions]) -> list[Release]:
    return [released for decisions in polls for released in decisions.release]


def first_poll_at(table: Any, polls: list[Decisions], start: float, predicate: Any) -> float:
    """The time of the first poll (polls every 0.5 s after ``start``) matching ``predicate``."""
    for index, decisions in enumerate(polls):
        if predicate(decisions):
            return start + 0.5 * (index + 1)
    raise AssertionError("no poll matched")


# --------------------------------------------------------------------------------------------
# Bytes: counted only while the flow keeps up the rate
# --------------------------------------------------------------------------------------------


def test_a_bulk_flow_is_demoted_within_one_interval_of_crossing_the_threshold(
    table: Any, make_detector: Any, flow: Any
) -> None:
    detector = make_detector(rate="50Mbit", bytes="10MiB", for_="10s")
    bulk = table.start(flow(1), rate_mbit=100, size=50_000_000)
    crossed = None
    demoted_at = None
    polls = []
    for _ in range(20):
        table.advance(0.5)
        if crossed is None and table.entries[bulk].octets >= 10 * MIB:
            crossed = 10 * MIB / 12.5e6  # 100 Mbit/s is 12.5 MB/s
        decisions = table.poll(detector)
        polls.append(decisions)
        if decisions.demote:
            demoted_at = table.now
    assert crossed is not None and demoted_at is not None
    assert 0 <= demoted_at - crossed <= 0.5
    [demotion] = demotions(polls)
    assert demotion.flow == bulk
    assert demotion.reason is DemotionReason.BYTES
    assert demotion.bytes >= 10 * MIB
    assert demotion.latency_s == pytest.approx(demoted_at)  # it started at 0
    assert demotion.rate_bps == pytest.approx(100e6)
    assert releases(polls) == []
    assert detector.overrides() == [bulk]


def test_a_thousand_mice_are_never_demoted(table: Any, make_detector: Any, flow: Any) -> None:
    """Short flows of at most 64 KiB, even fast ones, even caught a moment after they began."""
    detector = make_detector(bytes="10MiB", rate="10%", for_="1s")
    rng = random.Random(7)
    polls = []
    for step in range(10):
        table.advance(0.5 - 0.001)
        for index in range(100):
            mouse = flow(step * 100 + index)
            table.start(mouse, rate_mbit=rng.uniform(1, 1000), size=rng.randint(1, 64 * KIB))
        table.advance(0.001)
        polls.append(table.poll(detector))
    polls += table.run(detector, 5)
    assert len(table.entries) == 1000
    assert demotions(polls) == []
    assert polls[-1].tracked == 1000
    assert polls[-1].overrides == 0


def test_a_flow_already_bulk_when_first_seen_is_demoted_at_once(
    table: Any, make_detector: Any, flow: Any
) -> None:
    """After a controller restart the table still holds the counts: its whole life is a window."""
    detector = make_detector(rate="10%")
    bulk = table.start(flow(1), rate_mbit=200)
    keepalive = table.start(flow(2), rate_mbit=20)  # 2 % of the port for hours
    table.advance(4 * 3600.0)
    decisions = table.poll(detector)
    [demotion] = decisions.demote
    assert demotion.flow == bulk
    assert demotion.reason is DemotionReason.RATE
    assert demotion.latency_s == pytest.approx(4 * 3600.0)  # dated by the entry's age
    assert table.entries[keepalive].octets > 30 * (1 << 30)  # 36 GB, and still a mouse


def test_bytes_sent_below_the_rate_never_count(table: Any, make_detector: Any, flow: Any) -> None:
    """However many bytes a connection sends over its life, only bulk windows count them."""
    detector = make_detector(rate="10%", bytes="1MiB", for_="1s")
    connection = table.start(flow(1), rate_mbit=90)  # 9 % of the port, for ten minutes
    polls = table.run(detector, 600)
    assert table.entries[connection].octets > 6_000_000_000
    assert demotions(polls) == []


def test_bytes_count_within_one_unbroken_run(table: Any, make_detector: Any, flow: Any) -> None:
    """Bulk windows separated by quiet ones each start over: 8 MiB bursts never make 10 MiB."""
    detector = make_detector(rate="100Mbit", bytes="10MiB", for_="1s")
    bursty = table.start(flow(1))
    polls = []
    for _ in range(200):
        table.send(bursty, 8 * MIB)  # 134 Mbit/s over the window: bulk
        polls += table.run(detector, 0.5)
        polls += table.run(detector, 0.5)  # then a quiet window
    assert demotions(polls) == []
    # Back to back: the first burst after a quiet window is judged over both (a counter
    # that did not move may be one the switch had not refreshed), so the run starts with
    # the second.
    polls = []
    for _ in range(3):
        table.send(bursty, 8 * MIB)
        polls += table.run(detector, 0.5)
    [demotion] = demotions(polls)
    assert demotion.reason is DemotionReason.BYTES
    assert demotion.bytes == 16 * MIB  # the run's bytes, not the flow's 1.6 GiB


# --------------------------------------------------------------------------------------------
# Rate: must hold for the whole `for` period
# --------------------------------------------------------------------------------------------


def test_rate_must_hold_for_the_whole_period(table: Any, make_detector: Any, flow: Any) -> None:
    detector = make_detector(rate="100Mbit", for_="2s")
    stream = table.start(flow(1), rate_mbit=200)
    polls = table.run(detector, 1.5)
    assert demotions(polls) == []
    [demotion] = table.run(detector, 0.5)[0].demote
    assert demotion.flow == stream
    assert demotion.reason is DemotionReason.RATE
    assert demotion.latency_s == pytest.approx(2.0)
    assert demotion.rate_bps == pytest.approx(200e6)


def test_a_dip_below_the_rate_restarts_the_period(
    table: Any, make_detector: Any, flow: Any
) -> None:
    detector = make_detector(rate="100Mbit", for_="2s")
    stream = table.start(flow(1), rate_mbit=200)
    polls = table.run(detector, 1.5)
    table.rate(stream, 50)
    polls += table.run(detector, 0.5)
    table.rate(stream, 200)
    polls += table.run(detector, 3)
    assert first_poll_at(table, polls, 0, lambda d: d.demote) == 4.0


def test_a_fast_but_short_flow_is_not_a_rate_elephant(
    table: Any, make_detector: Any, flow: Any
) -> None:
    detector = make_detector(rate="100Mbit", for_="2s")
    # 1.2 s at 1 Gbit/s: above the rate in the windows ending at 0.5, 1.0 and 1.5 s, not 2.0 s.
    table.start(flow(1), rate_mbit=1000, size=1.2 * 125_000_000)
    assert demotions(table.run(detector, 10)) == []


def test_a_share_is_of_the_port_rate(table: Any, make_detector: Any, flow: Any) -> None:
    on_gigabit = make_detector(rate="10%", for_="500ms")
    on_ten_gigabit = make_detector(port_rate=10_000_000_000, rate="10%", for_="500ms")
    table.start(flow(1), rate_mbit=120)
    table.advance(0.5)
    samples = table.samples()
    assert len(on_gigabit.observe(samples, table.now).demote) == 1  # 120 > 100 Mbit/s
    assert on_ten_gigabit.observe(samples, table.now).demote == ()  # 120 < 1000 Mbit/s


def test_for_defaults_to_two_intervals(table: Any, make_detector: Any, flow: Any) -> None:
    """One bulk window may be a burst of responses; two in a row are a transfer."""
    detector = make_detector(rate="100Mbit")
    assert detector.thresholds.sustain_s == 1.0
    table.start(flow(1), rate_mbit=200)
    polls = table.run(detector, 1)
    assert [len(decisions.demote) for decisions in polls] == [0, 1]


def test_the_rate_defaults_to_a_tenth_of_the_port(
    table: Any, make_detector: Any, flow: Any
) -> None:
    """A section that names only ``bytes`` counts them while the flow keeps up 10 %."""
    detector = make_detector(bytes="10MiB")
    assert detector.thresholds.rate_bps == 100_000_000
    slow = table.start(flow(1), rate_mbit=95)
    fast = table.start(flow(2), rate_mbit=105)
    polls = table.run(detector, 60)
    assert [(d.flow, d.reason) for d in demotions(polls)] == [(fast, DemotionReason.BYTES)]
    assert table.entries[slow].octets > 700_000_000


def test_bytes_shorten_the_wait_and_for_catches_the_rest(
    table: Any, make_detector: Any, flow: Any
) -> None:
    detector = make_detector(bytes="100MiB", rate="100Mbit", for_="2s")
    fast = table.start(flow(1), rate_mbit=1000)  # 100 MiB in 0.84 s
    steady = table.start(flow(2), rate_mbit=150)  # holds the rate; 100 MiB only after 5.6 s
    table.start(flow(3), rate_mbit=50)  # below the rate: 375 MB in a minute, never counted
    polls = table.run(detector, 60)
    found = {d.flow: (d.reason, d.latency_s) for d in demotions(polls)}
    assert found == {fast: (DemotionReason.BYTES, 1.0), steady: (DemotionReason.RATE, 2.0)}


# --------------------------------------------------------------------------------------------
# Hysteresis: no flapping near a threshold
# --------------------------------------------------------------------------------------------


def test_hovering_around_the_rate_before_demotion_decides_nothing(
    table: Any, make_detector: Any, flow: Any
) -> None:
    detector = make_detector(rate="100Mbit", for_="1s")
    stream = table.start(flow(1), rate_mbit=110)
    polls = []
    for step in range(120):
        table.rate(stream, 110 if step % 2 == 0 else 90)
        polls += table.run(detector, 0.5)
    assert demotions(polls) == [] and releases(polls) == []


def test_hovering_around_the_rate_after_demotion_keeps_the_override(
    table: Any, make_detector: Any, flow: Any
) -> None:
    detector = make_detector(rate="100Mbit", for_="1s")
    stream = table.start(flow(1), rate_mbit=150)
    polls = table.run(detector, 2)
    for step in range(240):
        table.rate(stream, (60, 140, 95, 105)[step % 4])  # above the 50 Mbit/s release level
        polls += table.run(detector, 0.5)
    assert len(demotions(polls)) == 1
    assert releases(polls) == []


def test_a_rate_elephant_is_released_when_calm_for_release_after(
    table: Any, make_detector: Any, flow: Any
) -> None:
    detector = make_detector(rate="100Mbit", for_="1s")
    stream = table.start(flow(1), rate_mbit=150)
    polls = table.run(detector, 5)
    assert len(demotions(polls)) == 1
    table.rate(stream, 40)  # below half the threshold, not idle
    polls = table.run(detector, 29.5)
    assert releases(polls) == []
    [released] = table.run(detector, 0.5)[0].release
    assert released.reason is ReleaseReason.CALM
    assert released.idle_s == 0
    assert released.held_s == pytest.approx(34.0)
    # It stays at 40 Mbit/s, well under the threshold: no re-demotion.
    assert demotions(table.run(detector, 60)) == []


def test_a_calm_spell_shorter_than_release_after_is_forgotten(
    table: Any, make_detector: Any, flow: Any
) -> None:
    detector = make_detector(rate="100Mbit", for_="1s")
    stream = table.start(flow(1), rate_mbit=150)
    polls = table.run(detector, 5)
    for _ in range(3):
        table.rate(stream, 40)
        polls += table.run(detector, 25)
        table.rate(stream, 60)  # between the release level and the threshold
        polls += table.run(detector, 1)
    assert len(demotions(polls)) == 1 and releases(polls) == []


def test_a_big_elephant_that_turns_sparse_is_released(
    table: Any, make_detector: Any, flow: Any
) -> None:
    """Gigabytes sent in bulk buy nothing: once it carries requests only, it goes back."""
    detector = make_detector(bytes="10MiB", rate="10%", for_="1s")
    connection = table.start(flow(1), rate_mbit=500)
    polls = table.run(detector, 20)
    assert [d.reason for d in demotions(polls)] == [DemotionReason.BYTES]
    table.rate(connection, 20)  # 2 % of the port: requests on a kept-alive connection
    polls = table.run(detector, 30)
    [released] = releases(polls)
    assert released.reason is ReleaseReason.CALM
    assert released.idle_s == 0
    assert detector.overrides() == []
    assert demotions(table.run(detector, 600)) == []


# --------------------------------------------------------------------------------------------
# Release: idle, vanished, re-learned
# --------------------------------------------------------------------------------------------


def test_an_idle_elephant_is_released_after_release_after(
    table: Any, make_detector: Any, flow: Any
) -> None:
    detector = make_detector(rate="50Mbit", bytes="10MiB")
    bulk = table.start(flow(1), rate_mbit=100, size=50_000_000)  # done at 4.0 s
    polls = table.run(detector, 33.5)
    assert releases(polls) == []
    [released] = table.run(detector, 0.5)[0].release
    assert released.flow == bulk
    assert released.reason is ReleaseReason.IDLE
    assert released.idle_s == pytest.approx(30.0)
    assert released.held_s == pytest.approx(33.0)  # demoted at 1.0 s
    assert detector.overrides() == []
    assert detector.tracked == 1  # still in the table, as a plain flow


def test_an_elephant_whose_entry_expired_is_released_after_release_after(
    table: Any, make_detector: Any, flow: Any
) -> None:
    detector = make_detector(rate="50Mbit", bytes="10MiB")
    bulk = table.start(flow(1), rate_mbit=100, size=50_000_000)
    polls = table.run(detector, 14)
    table.expire(bulk)  # OVS idle timeout of 10 s
    polls = table.run(detector, 19.5)
    assert releases(polls) == []
    assert polls[-1].overrides == 1 and polls[-1].tracked == 1
    [released] = table.run(detector, 0.5)[0].release
    assert released.reason is ReleaseReason.VANISHED
    assert released.idle_s == pytest.approx(30.0)
    assert detector.tracked == 0


def test_an_elephant_relearned_within_release_after_keeps_its_override(
    table: Any, make_detector: Any, flow: Any
) -> None:
    detector = make_detector(rate="50Mbit", bytes="10MiB")
    bulk = table.start(flow(1), rate_mbit=100, size=50_000_000)
    table.run(detector, 14)
    table.expire(bulk)
    table.run(detector, 6)
    table.start(bulk, rate_mbit=10, size=1 * MIB)  # the conversation resumes, small this time
    polls = table.run(detector, 20)
    assert demotions(polls) == [] and releases(polls) == []
    assert detector.overrides() == [bulk]
    view = detector.view(bulk)
    assert view is not None and view.first_seen == pytest.approx(20.0)
    assert view.bytes == 1 * MIB


def test_an_elephant_relearned_after_release_after_is_released(
    table: Any, make_detector: Any, flow: Any
) -> None:
    """Expired and learned again between two polls: the gap, not the poll, decides."""
    detector = make_detector(bytes="10MiB", release_after="1s")
    bulk = table.start(flow(1))
    table.send(bulk, 11 * MIB)
    table.advance(0.5)
    assert table.poll(detector).demote
    table.advance(0.5)
    table.poll(detector)
    table.advance(0.45)
    table.expire(bulk)
    table.advance(0.5)
    table.start(bulk)
    table.send(bulk, 1 * KIB)
    table.advance(0.05)
    polls = [table.poll(detector)]
    assert [r.reason for r in releases(polls)] == [ReleaseReason.IDLE]
    assert detector.overrides() == []


def test_an_elephant_relearned_big_is_neither_released_nor_demoted_again(
    table: Any, make_detector: Any, flow: Any
) -> None:
    detector = make_detector(bytes="10MiB", release_after="1s")
    bulk = table.start(flow(1))
    table.send(bulk, 11 * MIB)
    table.advance(0.5)
    table.poll(detector)
    table.advance(1.45)  # idle 1.45 s by the time it is learned again
    table.expire(bulk)
    table.start(bulk)
    table.send(bulk, 12 * MIB)
    table.advance(0.05)
    decisions = table.poll(detector)
    assert decisions.demote == () and decisions.release == ()
    assert detector.overrides() == [bulk]


def test_a_counter_that_went_back_restarts_the_history(
    table: Any, make_detector: Any, flow: Any
) -> None:
    detector = make_detector(rate="100Mbit", bytes="10MiB", for_="10s")
    mouse = table.start(flow(1))
    table.send(mouse, 9 * MIB)  # 151 Mbit/s over its first window: a run of 9 MiB
    table.run(detector, 0.5)
    table.advance(0.25)
    table.expire(mouse)  # expired and learned again between two polls
    table.start(mouse)
    table.send(mouse, 4 * MIB)
    table.advance(0.25)
    assert table.poll(detector).demote == ()  # a run of 4 MiB, not 13 MiB
    view = detector.view(mouse)
    assert view is not None
    assert view.bytes == 4 * MIB and view.first_seen == pytest.approx(0.75)
    table.send(mouse, 8 * MIB)
    [demotion] = demotions(table.run(detector, 0.5))
    assert demotion.bytes == 12 * MIB
    assert demotion.latency_s == pytest.approx(0.75)  # from the new entry's first packet


def test_a_relearned_entry_is_recognised_by_its_age_even_when_its_counter_grew(
    table: Any, make_detector: Any, flow: Any
) -> None:
    detector = make_detector(bytes="10MiB")
    mouse = table.start(flow(1))
    table.send(mouse, 1 * KIB)
    table.run(detector, 5)
    table.advance(0.2)
    table.expire(mouse)
    table.start(mouse)
    table.send(mouse, 2 * MIB)
    table.advance(0.3)
    table.poll(detector)
    view = detector.view(mouse)
    assert view is not None
    assert view.first_seen == pytest.approx(5.2)
    assert view.rate_bps == pytest.approx(2 * MIB * 8 / 0.3)


def test_poll_time_jitter_is_not_mistaken_for_a_relearned_entry(
    table: Any, make_detector: Any, flow: Any
) -> None:
    """``now`` late by up to REBIRTH_SLACK_S (a slow reply) keeps the flow's history."""
    detector = make_detector(rate="100Mbit", for_="2s")
    stream = table.start(flow(1), rate_mbit=200)
    demoted = []
    for jitter in (0.0, 0.4, 0.1, 0.45):  # polls at 0.5, 1.4, 1.6 and 2.45 s
        table.advance(0.5)
        demoted += detector.observe(table.samples(), table.now + jitter).demote
    [demotion] = demoted  # the rate held since its first packet: the run was not restarted
    assert demotion.flow == stream
    assert demotion.latency_s == pytest.approx(2.45)


def test_a_tracked_flow_that_left_the_table_is_forgotten(
    table: Any, make_detector: Any, flow: Any
) -> None:
    detector = make_detector(bytes="10MiB")
    mouse = table.start(flow(1))
    table.send(mouse, 1 * KIB)
    assert table.run(detector, 1)[-1].tracked == 1
    table.expire(mouse)
    decisions = table.run(detector, 0.5)[0]
    assert decisions.tracked == 0 and decisions.release == ()
    assert detector.view(mouse) is None


# --------------------------------------------------------------------------------------------
# max_tracked: bounded memory, overflow counted, overrides and heavy flows kept
# --------------------------------------------------------------------------------------------


def test_flows_past_max_tracked_are_counted_and_the_heaviest_kept(
    table: Any, make_detector: Any, flow: Any
) -> None:
    detector = make_detector(bytes="10MiB", max_tracked=100)
    for index in range(150):
        table.send(table.start(flow(index)), (index + 1) * KIB)
    polls = table.run(detector, 1.5)
    assert [d.dropped for d in polls] == [50, 50, 50]
    assert [d.tracked for d in polls] == [100, 100, 100]
    assert detector.dropped_total == 150
    kept = {view.flow for view in detector.flows()}
    assert kept == {flow(index) for index in range(50, 150)}


def test_an_elephant_gets_in_when_the_table_is_full(
    table: Any, make_detector: Any, flow: Any
) -> None:
    detector = make_detector(bytes="10MiB", max_tracked=100)
    for index in range(100):
        table.send(table.start(flow(index)), (index + 1) * KIB)
    table.run(detector, 1)
    bulk = table.start(flow(1000))
    table.send(bulk, 20 * MIB)
    decisions = table.run(detector, 0.5)[0]
    assert [d.flow for d in decisions.demote] == [bulk]
    assert decisions.tracked == 100
    assert decisions.dropped == 1  # the lightest mouse made room
    assert detector.view(flow(0)) is None


def test_overrides_are_never_pushed_out(table: Any, make_detector: Any, flow: Any) -> None:
    detector = make_detector(bytes="10MiB", max_tracked=10)
    for index in range(10):
        table.send(table.start(flow(index)), 20 * MIB)
    table.advance(0.5)
    assert len(table.poll(detector).demote) == 10
    for index in range(10, 60):
        table.send(table.start(flow(index)), 64 * KIB)
    late = table.start(flow(99))
    table.send(late, 30 * MIB)
    for index in range(10):
        table.send(flow(index), 1 * MIB)  # the elephants keep sending
    decisions = table.run(detector, 0.5)[0]
    assert decisions.demote == () and decisions.release == ()
    assert decisions.overrides == 10 and decisions.tracked == 10
    assert decisions.dropped == 51
    assert late not in detector.overrides()


def test_memory_stays_bounded_under_churn(table: Any, make_detector: Any, flow: Any) -> None:
    detector = make_detector(bytes="10MiB", rate="10%", max_tracked=500)
    rng = random.Random(3)
    next_flow = 0
    for _ in range(100):
        for _ in range(200):
            table.start(flow(next_flow), rate_mbit=rng.uniform(0.01, 2), size=64 * KIB)
            next_flow += 1
        for old in rng.sample(sorted(table.entries), k=min(150, len(table.entries))):
            table.expire(old)
        decisions = table.run(detector, 0.5)[0]
        assert decisions.tracked <= 500
        assert decisions.tracked + decisions.dropped == decisions.samples
        assert len(detector.flows()) == decisions.tracked


# --------------------------------------------------------------------------------------------
# Determinism, clock, views, counts
# --------------------------------------------------------------------------------------------


def _scenario(table: Any, detector: Detector, flow: Any) -> list[Decisions]:
    rng = random.Random(11)
    polls = []
    for step in range(80):
        for index in range(20):
            size = rng.choice((4 * KIB, 64 * KIB, 30 * MIB))
            table.start(flow(step * 20 + index), rate_mbit=rng.uniform(1, 300), size=size)
        polls += table.run(detector, 0.5)
    polls += table.run(detector, 40)
    return polls


def test_same_polls_same_decisions(new_table: Any, make_detector: Any, flow: Any) -> None:
    from_a = _scenario(new_table(), make_detector(bytes="10MiB", rate="10%"), flow)
    from_b = _scenario(new_table(), make_detector(bytes="10MiB", rate="10%"), flow)
    assert from_a == from_b
    assert demotions(from_a) and releases(from_a)


def test_the_order_of_samples_does_not_change_what_is_decided(
    table: Any, make_detector: Any, flow: Any
) -> None:
    in_order = make_detector(bytes="10MiB", rate="10%")
    shuffled = make_detector(bytes="10MiB", rate="10%")
    rng = random.Random(5)
    for step in range(40):
        for index in range(10):
            size = rng.choice((4 * KIB, 30 * MIB))
            table.start(flow(step * 10 + index), rate_mbit=rng.uniform(1, 300), size=size)
        table.advance(0.5)
        samples = table.samples()
        expected = in_order.observe(samples, table.now)
        rng.shuffle(samples)
        got = shuffled.observe(samples, table.now)
        assert set(got.demote) == set(expected.demote)
        assert set(got.release) == set(expected.release)
        assert (got.tracked, got.overrides) == (expected.tracked, expected.overrides)


def test_the_detector_never_reads_a_clock(
    table: Any, make_detector: Any, flow: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_clock() -> float:
        raise AssertionError("the detector must take the time from its caller")

    for name in ("time", "monotonic", "perf_counter", "time_ns", "monotonic_ns"):
        monkeypatch.setattr(time, name, no_clock)
    polls = _scenario(table, make_detector(bytes="10MiB", rate="10%"), flow)
    assert demotions(polls)


def test_poll_time_must_increase(table: Any, make_detector: Any) -> None:
    detector = make_detector(bytes="10MiB")
    detector.observe([], 10.0)
    with pytest.raises(ValueError, match="poll time must increase"):
        detector.observe([], 10.0)


def test_samples_may_be_any_iterable(table: Any, make_detector: Any, flow: Any) -> None:
    detector = make_detector(bytes="10MiB")
    table.send(table.start(flow(1)), 11 * MIB)
    table.advance(0.5)
    decisions = detector.observe(iter(table.samples()), table.now)
    assert decisions.samples == 1 and len(decisions.demote) == 1


def test_flow_views_for_publishing(table: Any, make_detector: Any, flow: Any) -> None:
    detector = make_detector(rate="50Mbit", bytes="10MiB")
    bulk = table.start(flow(1), rate_mbit=100)
    table.advance(1.0)
    mouse = table.start(flow(2), rate_mbit=1, size=62_500)  # all of it in the first window
    idle = table.start(flow(3))
    table.advance(0.5)
    table.poll(detector)  # first sight: rates over each entry's age
    views = {view.flow: view for view in detector.flows()}
    assert views[bulk].rate_bps == pytest.approx(100e6)
    assert views[mouse].rate_bps == pytest.approx(1e6)
    assert views[idle].rate_bps == 0 and views[idle].last_seen == pytest.approx(1.0)
    assert views[bulk].state is FlowState.ELEPHANT
    assert views[mouse].state is FlowState.TRACKED
    table.run(detector, 2.0)
    views = {view.flow: view for view in detector.flows()}
    assert views[bulk].rate_bps == pytest.approx(100e6)
    assert views[bulk].bytes == 43_750_000
    assert views[bulk].first_seen == 0 and views[bulk].last_seen == 3.5
    assert views[mouse].rate_bps == 0  # 10 KiB sent within the first poll
    assert views[mouse].first_seen == 1.0 and views[mouse].last_seen == 1.5
    assert [view.flow for view in detector.flows()] == [bulk, mouse, idle]
    assert [view.flow for view in detector.flows(limit=1)] == [bulk]
    # Only the bulk flow moved at the last poll; the idle ones fill up by size.
    assert detector.flows(limit=2) == detector.flows()[:2]
    assert detector.flows(limit=10) == detector.flows()
    assert detector.flows(limit=0) == []
    assert detector.view(flow(99)) is None


def test_counts_match_the_state(table: Any, make_detector: Any, flow: Any) -> None:
    detector = make_detector(bytes="10MiB")
    polls = _scenario(table, detector, flow)
    last = polls[-1]
    assert last.overrides == len(detector.overrides())
    assert last.tracked == detector.tracked == len(detector.flows())
    assert last.samples == len(table.entries)
    active = 0
    for decisions in polls:
        active += len(decisions.demote) - len(decisions.release)
        assert decisions.overrides == active
        assert not {d.flow for d in decisions.demote} & {r.flow for r in decisions.release}
