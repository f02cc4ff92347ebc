"""A restarted controller keeps the elephants the switch already holds overrides for."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controller.classify.detector import Detector
from controller.classify.reclassify import adopted_overrides
from controller.flowid import FlowId
from controller.pipeline.desired import desired_state
from controller.pipeline.flows import InstalledFlow
from controller.policy.load import parse_policy
from controller.policy.model import Policy

DOCUMENT: dict[str, Any] = {
    "classes": {
        "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
        "training": {"priority": 1, "dscp": 26, "min_rate": "70%"},
    },
    "default_class": "inference",
    "detection": {
        "interval": "500ms",
        "elephant": {"rate": "50Mbit", "class": "training"},
        "release_after": "2s",
    },
}


def policy_of(**changes: Any) -> Policy:
    document = {**DOCUMENT, "detection": {**DOCUMENT["detection"], **changes}}
    return parse_policy(document)


def installed(policy: Policy, overrides: dict[FlowId, str]) -> list[InstalledFlow]:
    """What a switch holds after a controller installed ``overrides`` under ``policy``."""
    want = desired_state(policy, 1, {"s1-eth1": 1, "s1-eth2": 2}, overrides, ())
    return [InstalledFlow(flow.key, flow.cookie) for flow in want.flows]


def test_overrides_on_the_switch_are_adopted(flow: Callable[..., FlowId]) -> None:
    policy = policy_of()
    held = {flow(1): "training", flow(2): "training"}
    assert adopted_overrides(policy, installed(policy, held)) == held


def test_planning_with_adopted_overrides_changes_nothing(flow: Callable[..., FlowId]) -> None:
    policy = policy_of()
    switch = installed(policy, {flow(1): "training"})
    adopted = adopted_overrides(policy, switch)
    again = installed(policy, adopted)
    assert sorted(again, key=repr) == sorted(switch, key=repr)


def test_nothing_is_adopted_without_overrides_or_detection(flow: Callable[..., FlowId]) -> None:
    policy = policy_of()
    assert adopted_overrides(policy, installed(policy, {})) == {}
    without = parse_policy({k: v for k, v in DOCUMENT.items() if k != "detection"})
    assert adopted_overrides(without, installed(policy, {flow(1): "training"})) == {}


def test_overrides_of_another_policy_are_not_adopted(flow: Callable[..., FlowId]) -> None:
    """A different idle timeout (release_after) is another entry: the sync replaces it."""
    old = policy_of(release_after="10s")
    assert adopted_overrides(policy_of(), installed(old, {flow(1): "training"})) == {}


def test_an_adopted_elephant_stays_while_it_sends(
    make_detector: Callable[..., Detector], table: Any, flow: Callable[..., FlowId]
) -> None:
    detector = make_detector(rate="50Mbit", release_after="2s")
    elephant = table.start(flow(1), rate_mbit=200)
    table.advance(30)  # demoted long ago, by the previous controller
    detector.adopt([elephant], table.now)
    assert detector.overrides() == [elephant]
    polls = table.run(detector, 10)
    assert all(not p.demote and not p.release for p in polls)
    assert detector.overrides() == [elephant]
    view = detector.view(elephant)
    assert view is not None and view.rate_bps > 100e6


def test_an_adopted_elephant_that_goes_quiet_is_released(
    make_detector: Callable[..., Detector], table: Any, flow: Callable[..., FlowId]
) -> None:
    detector = make_detector(rate="50Mbit", release_after="2s")
    elephant = table.start(flow(1), rate_mbit=200)
    table.advance(5)
    detector.adopt([elephant], table.now)
    table.run(detector, 2)
    table.rate(elephant, 0)
    polls = table.run(detector, 4)
    released = [r.flow for p in polls for r in p.release]
    assert released == [elephant]
    assert detector.overrides() == []


def test_an_adopted_elephant_gone_from_the_table_is_released(
    make_detector: Callable[..., Detector], table: Any, flow: Callable[..., FlowId]
) -> None:
    detector = make_detector(rate="50Mbit", release_after="2s")
    other = table.start(flow(2), rate_mbit=1)
    detector.adopt([flow(1)], table.now)  # its counting entry expired meanwhile
    polls = table.run(detector, 4)
    assert [r.flow for p in polls for r in p.release] == [flow(1)]
    assert other not in detector.overrides()
