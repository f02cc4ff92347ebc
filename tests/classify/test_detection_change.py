"""A changed ``detection`` section, against the simulated counting table.

OVS keeps a flow's counting entry for ``release_after`` (its idle timeout)
after the flow's last packet.  A detector that met those entries afresh on a
change judged each one's first window as its whole life, so a bulk flow that
had ended seconds before still averaged above the new rate, and the change
itself demoted it.  The counters carry over a change instead: a flow is only
judged on what it sends after its last growth, under the new thresholds.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from controller.classify.decisions import Decisions, Demotion, DemotionReason
from controller.classify.detector import Detector
from controller.policy.load import parse_policy
from controller.switch.detect import detector_for
from controller.switch.events import PolicySnapshot
from controller.switch.state import SwitchState, initial_state
from tests.classify.conftest import FakeTable, spec

PORT = 10_000_000_000  # 10 Gbit: the default rate (10 %) is 1 Gbit/s


def demotions(polls: list[Decisions]) -> list[Demotion]:
    return [demotion for decisions in polls for demotion in decisions.demote]


def ended_bulk_flow(table: FakeTable, detector: Detector, flow: Any) -> Any:
    """A 450 Mbit/s flow that ran 20 s below a 1 Gbit/s threshold, then ended 10 s ago."""
    bulk = table.start(flow(1), rate_mbit=450)
    polls = table.run(detector, 20)
    table.rate(bulk, 0)
    polls += table.run(detector, 10)
    assert demotions(polls) == []  # never bulk by the first section
    assert bulk in table.entries  # OVS keeps the entry for release_after (30 s)
    return bulk


def test_a_flow_that_ended_before_a_detection_change_is_not_demoted_by_it(
    table: FakeTable, flow: Any
) -> None:
    detector = Detector(spec(rate="10%"), PORT)
    ended_bulk_flow(table, detector, flow)
    detector.retune(spec(rate="100Mbit"), PORT)
    # Over its whole life it averaged 300 Mbit/s, three times the new rate: not a reason.
    polls = table.run(detector, 15)
    assert demotions(polls) == []
    assert detector.overrides() == []


def test_a_flow_still_sending_through_the_change_is_judged_by_the_new_section(
    table: FakeTable, flow: Any
) -> None:
    detector = Detector(spec(rate="10%", for_="1s"), PORT)
    running = table.start(flow(1), rate_mbit=450)
    polls = table.run(detector, 20)
    assert demotions(polls) == []
    detector.retune(spec(rate="100Mbit", for_="1s"), PORT)
    changed_at = table.now
    polls = table.run(detector, 5)
    [demotion] = demotions(polls)
    assert demotion.flow == running and demotion.reason is DemotionReason.RATE
    # From its growth windows after the change, as any flow: ``for`` after the change.
    demoted_at = changed_at + 0.5 * (1 + [bool(p.demote) for p in polls].index(True))
    assert demoted_at == pytest.approx(changed_at + 1.0)
    assert demotion.rate_bps == pytest.approx(450e6)


def test_an_elephant_that_ended_loses_its_override_and_is_not_demoted_again(
    table: FakeTable, flow: Any
) -> None:
    detector = Detector(spec(rate="100Mbit"), PORT)
    bulk = table.start(flow(1), rate_mbit=450)
    assert [d.flow for d in demotions(table.run(detector, 5))] == [bulk]
    table.rate(bulk, 0)
    table.run(detector, 10)
    assert detector.overrides() == [bulk]  # idle for 10 s of release_after's 30
    detector.retune(spec(rate="50Mbit"), PORT)
    assert detector.overrides() == []  # the section that made it is gone
    polls = table.run(detector, 15)
    assert demotions(polls) == []
    assert polls[-1].overrides == 0


def test_an_elephant_still_sending_is_demoted_again_at_its_first_bulk_window(
    table: FakeTable, flow: Any
) -> None:
    """Its run carries over: it does not spend ``for`` in the latency class again."""
    detector = Detector(spec(rate="100Mbit", for_="5s"), PORT)
    bulk = table.start(flow(1), rate_mbit=450)
    assert [d.flow for d in demotions(table.run(detector, 10))] == [bulk]
    detector.retune(spec(rate="200Mbit", for_="5s"), PORT)
    first = table.run(detector, 0.5)
    [demotion] = demotions(first)
    assert demotion.flow == bulk and demotion.reason is DemotionReason.RATE
    assert demotion.latency_s == pytest.approx(0.5)  # from the change, not its first packet
    assert detector.overrides() == [bulk]


def test_an_elephant_below_the_new_rate_is_not_demoted_again(table: FakeTable, flow: Any) -> None:
    detector = Detector(spec(rate="100Mbit", for_="1s"), PORT)
    bulk = table.start(flow(1), rate_mbit=450)
    assert demotions(table.run(detector, 5)) != []
    detector.retune(spec(rate="1Gbit", for_="1s"), PORT)
    assert demotions(table.run(detector, 20)) == []
    assert table.entries[bulk].octets > 1_000_000_000  # it went on sending, below 1 Gbit/s


def test_the_detector_keeps_its_clock_across_a_change(table: FakeTable, flow: Any) -> None:
    detector = Detector(spec(rate="10%"), PORT)
    table.start(flow(1), rate_mbit=10)
    table.run(detector, 2)
    detector.retune(spec(rate="1%"), PORT)
    with pytest.raises(ValueError, match="must increase"):
        detector.observe(table.samples(), table.now)  # the same poll time again
    assert detector.tracked == 1


def test_a_smaller_max_tracked_keeps_the_heaviest_flows(table: FakeTable, flow: Any) -> None:
    detector = Detector(spec(rate="10%"), PORT)
    for index in range(10):
        table.start(flow(index), rate_mbit=index + 1)
    table.run(detector, 2)
    detector.retune(spec(rate="10%", max_tracked=4), PORT)
    assert sorted(view.flow for view in detector.flows()) == [flow(i) for i in range(6, 10)]


# --------------------------------------------------------------------------------------------
# The switch step applies a change to the detector it has (``controller.switch.detect``)
# --------------------------------------------------------------------------------------------

DOCUMENT: dict[str, Any] = {
    "classes": {
        "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
        "training": {"priority": 1, "dscp": 26, "min_rate": "70%"},
    },
    "default_class": "inference",
    "ports": {"rate": "10Gbit"},
    "detection": {"elephant": {"class": "training"}},
}


def switch_for(document: dict[str, Any], version: int) -> SwitchState:
    """A switch's state with no switch: only its detector is used."""
    return initial_state(1, PolicySnapshot(parse_policy(document, source="test"), version))


def test_the_switch_keeps_the_counters_when_the_detection_section_changes(
    table: FakeTable, flow: Any
) -> None:
    """The report: a flow that had ended 10 s before the change got an override from it."""
    state = detector_for(switch_for(DOCUMENT, 1))
    detector = state.detector
    assert detector is not None
    ended_bulk_flow(table, detector, flow)

    changed = {**DOCUMENT, "detection": {"elephant": {"class": "training", "rate": "100Mbit"}}}
    state = replace(state, snapshot=switch_for(changed, 2).snapshot)
    state = detector_for(state)
    after = state.detector
    assert after is detector  # retuned: its counters carry over
    assert after.thresholds.rate_bps == 100_000_000
    assert demotions(table.run(after, 15)) == []
    assert state.overrides == {}
