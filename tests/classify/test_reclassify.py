"""Detection bookkeeping: overrides from decisions, entries sorted by cookie, the flow view."""

from __future__ import annotations

import copy
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
from controller.classify.flows import CounterSample
from controller.classify.reclassify import (
    Claimed,
    apply_decisions,
    observed_flows,
    split_samples,
)
from controller.classify.records import ObservedFlow, Reclassification
from controller.flowid import ETH_TYPE_IPV4, IP_PROTO_TCP, IP_PROTO_UDP, FlowId
from controller.pipeline.flows import Owner, owner_cookie
from controller.pipeline.planner import LEARNED_COOKIE, Origin, learned_cookie
from controller.policy.jobs import JobSpec
from controller.policy.load import parse_policy
from controller.policy.model import Policy

MIB = 1 << 20
GBIT = 1_000_000_000
DPID = 0x0A

DOCUMENT: dict[str, Any] = {
    "classes": {
        "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
        "training": {"priority": 1, "dscp": 26, "min_rate": "70%"},
        "best-effort": {"priority": 2, "dscp": 0, "min_rate": "10%"},
    },
    "default_class": "inference",
    "rules": [
        {"name": "rocev2", "match": {"ip_proto": "udp", "udp_dst": 4791}, "class": "training"},
        {"name": "ssh", "match": {"tcp_dst": 22}, "class": "best-effort"},
    ],
    "detection": {
        "interval": "500ms",
        "elephant": {"rate": "50Mbit", "bytes": "10MiB", "class": "training"},
        "release_after": "2s",
    },
}


def flow(index: int, proto: int = IP_PROTO_TCP) -> FlowId:
    return FlowId(ETH_TYPE_IPV4, proto, 0x0A000000 + index, 0x0A010001, 10_000 + index, 80)


def sample(index: int, octets: int = 0, age: float = 1.0) -> CounterSample:
    return CounterSample(flow(index), octets, octets // 1500, age)


@pytest.fixture
def policy() -> Policy:
    return parse_policy(copy.deepcopy(DOCUMENT), source="test")


@pytest.fixture
def detector(policy: Policy) -> Detector:
    assert policy.detection is not None
    return Detector(policy.detection, GBIT)


def job(name: str, traffic_class: str) -> JobSpec:
    return JobSpec.model_validate(
        {"name": name, "class": traffic_class, "endpoints": [{"ipv4": "10.0.0.0/24"}]}
    )


def decisions(demote: tuple[Demotion, ...] = (), release: tuple[Release, ...] = ()) -> Decisions:
    return Decisions(demote, release, samples=0, tracked=0, overrides=0, dropped=0)


# --------------------------------------------------------------------------------------------
# apply_decisions
# --------------------------------------------------------------------------------------------


def test_a_demotion_adds_an_override_and_records_the_move() -> None:
    demotion = Demotion(flow(1), DemotionReason.BYTES, 11 * MIB, 80e6, 1.25)
    result = apply_decisions(DPID, {}, decisions(demote=(demotion,)), "training", "inference")
    assert result.overrides == {flow(1): "training"}
    assert result.changes == (
        Reclassification(DPID, flow(1), "inference", "training", "bytes", 11 * MIB, 1.25),
    )


def test_a_release_removes_the_override_and_records_the_way_back() -> None:
    release = Release(flow(1), ReleaseReason.IDLE, idle_s=2.0, held_s=9.0)
    before = {flow(1): "training", flow(2): "training"}
    result = apply_decisions(DPID, before, decisions(release=(release,)), "training", "inference")
    assert result.overrides == {flow(2): "training"}
    assert result.changes == (
        Reclassification(DPID, flow(1), "training", "inference", "idle", 0, None),
    )


def test_the_input_mapping_is_not_mutated() -> None:
    before = {flow(1): "training"}
    snapshot = dict(before)
    result = apply_decisions(
        DPID,
        before,
        decisions(
            demote=(Demotion(flow(2), DemotionReason.RATE, 1, 1.0, 0.5),),
            release=(Release(flow(1), ReleaseReason.VANISHED, 2.0, 3.0),),
        ),
        "training",
        "inference",
    )
    assert before == snapshot
    assert result.overrides == {flow(2): "training"}
    assert result.overrides is not before
    assert [(c.flow, c.reason) for c in result.changes] == [
        (flow(2), "rate"),
        (flow(1), "vanished"),
    ]


def test_releasing_a_flow_without_an_override_changes_nothing_but_is_recorded() -> None:
    release = Release(flow(3), ReleaseReason.CALM, 2.0, 5.0)
    result = apply_decisions(DPID, {}, decisions(release=(release,)), "training", "inference")
    assert result.overrides == {}
    assert [c.to_class for c in result.changes] == ["inference"]


def test_no_decisions_no_changes() -> None:
    before = {flow(1): "training"}
    result = apply_decisions(DPID, before, decisions(), "training", "inference")
    assert result.overrides == before
    assert result.changes == ()


def test_decisions_of_a_real_detector_round_trip_through_overrides(detector: Detector) -> None:
    big = sample(1, 20 * MIB, age=3.0)
    demoted = apply_decisions(DPID, {}, detector.observe([big], 10.0), "training", "inference")
    assert demoted.overrides == {flow(1): "training"}
    [change] = demoted.changes
    assert (change.from_class, change.to_class, change.reason) == ("inference", "training", "bytes")
    assert change.bytes == 20 * MIB
    assert change.latency_s == pytest.approx(3.0)
    # The counter stops growing: after release_after (2 s) the override goes.
    overrides = demoted.overrides
    changes: list[Reclassification] = []
    for step in range(1, 7):
        result = apply_decisions(
            DPID,
            overrides,
            detector.observe([big._replace(age_s=3.0 + 0.5 * step)], 10.0 + 0.5 * step),
            "training",
            "inference",
        )
        overrides, changes = result.overrides, changes + list(result.changes)
    assert overrides == {}
    assert [(c.from_class, c.to_class, c.reason) for c in changes] == [
        ("training", "inference", "idle")
    ]


# --------------------------------------------------------------------------------------------
# split_samples
# --------------------------------------------------------------------------------------------


def test_split_samples_keeps_default_and_foreign_entries_as_candidates() -> None:
    default, rule, job_entry, foreign, odd = (sample(i, 1000 * i) for i in range(1, 6))
    unknown_origin = owner_cookie(Owner.LEARNED, 7 << 40)
    candidates, claimed = split_samples(
        [
            (default, LEARNED_COOKIE),
            (rule, learned_cookie(Origin.RULE, 1)),
            (job_entry, learned_cookie(Origin.JOB, 0)),
            (foreign, 0xDEADBEEF),
            (odd, unknown_origin),
        ]
    )
    assert candidates == [default, foreign, odd]
    assert claimed == [(rule, (Origin.RULE, 1)), (job_entry, (Origin.JOB, 0))]


def test_split_samples_of_nothing() -> None:
    assert split_samples([]) == ([], [])


def test_a_default_cookie_with_an_index_is_still_a_candidate() -> None:
    entry = sample(1)
    assert split_samples([(entry, learned_cookie(Origin.DEFAULT, 3))]) == ([entry], [])


# --------------------------------------------------------------------------------------------
# observed_flows
# --------------------------------------------------------------------------------------------


def test_detector_flows_are_detected_or_default(policy: Policy, detector: Detector) -> None:
    big, mouse = sample(1, 20 * MIB, age=2.0), sample(2, 4000, age=0.5)
    detector.observe([big, mouse], 10.0)
    view = observed_flows(detector, policy, [], [], {}, 10.0, wall_offset=1000.0)
    by_flow = {observed.flow: observed for observed in view.flows}
    assert set(by_flow) == {flow(1), flow(2)}
    assert (by_flow[flow(1)].traffic_class, by_flow[flow(1)].why) == ("training", "detected")
    assert (by_flow[flow(2)].traffic_class, by_flow[flow(2)].why) == ("inference", "default")
    for live in detector.flows():
        observed = by_flow[live.flow]
        assert observed.bytes == live.bytes
        assert observed.rate_bps == live.rate_bps
        assert observed.first_seen == pytest.approx(1000.0 + live.first_seen)
        assert observed.last_seen == pytest.approx(1000.0 + live.last_seen)
    assert by_flow[flow(1)].first_seen == pytest.approx(1008.0)  # dated by the entry's age
    assert view.claimed_bytes == {}


def test_claimed_flows_are_named_by_their_rule_or_job(policy: Policy, detector: Detector) -> None:
    jobs = [job("zeta", "best-effort"), job("alpha", "training")]
    by_rule = sample(1, 5000, age=4.0)._replace(flow=flow(1, IP_PROTO_UDP))
    by_job = sample(2, 7000, age=1.5)
    claimed: list[Claimed] = [(by_rule, (Origin.RULE, 0)), (by_job, (Origin.JOB, 1))]
    view = observed_flows(detector, policy, jobs, claimed, {}, 20.0, wall_offset=100.0)
    assert view.flows == (
        ObservedFlow(by_rule.flow, "training", "rule:rocev2", 5000, 0.0, 116.0, 120.0, 3),
        # Job indices count the jobs sorted by name, as the planner numbers them.
        ObservedFlow(by_job.flow, "best-effort", "job:zeta", 7000, 0.0, 118.5, 120.0, 4),
    )
    assert view.claimed_bytes == {by_rule.flow: (5000, 20.0), by_job.flow: (7000, 20.0)}


def test_claimed_flow_rates_come_from_the_previous_bytes_and_time(
    policy: Policy, detector: Detector
) -> None:
    growing, fresh, relearned, same_time = (sample(i, 3000 + i) for i in range(1, 5))
    growing = growing._replace(bytes=3000)
    previous = {
        growing.flow: (1000, 10.0),
        relearned.flow: (9000, 10.0),  # counter went back: a new entry, no rate yet
        same_time.flow: (1000, 12.0),  # no time passed: no rate rather than a division by 0
    }
    claimed: list[Claimed] = [
        (entry, (Origin.RULE, 1)) for entry in (growing, fresh, relearned, same_time)
    ]
    view = observed_flows(detector, policy, [], claimed, previous, 12.0, wall_offset=0.0)
    rates = {observed.flow: observed.rate_bps for observed in view.flows}
    assert rates == {
        growing.flow: pytest.approx(8 * 2000 / 2.0),
        fresh.flow: 0.0,
        relearned.flow: 0.0,
        same_time.flow: 0.0,
    }
    assert {observed.why for observed in view.flows} == {"rule:ssh"}
    assert view.claimed_bytes == {
        entry.flow: (entry.bytes, 12.0) for entry in (growing, fresh, relearned, same_time)
    }


def test_the_returned_state_feeds_the_next_view(policy: Policy, detector: Detector) -> None:
    first = sample(1, 1_000_000)
    claimed: list[Claimed] = [(first, (Origin.RULE, 0))]
    view = observed_flows(detector, policy, [], claimed, {}, 5.0, 0.0)
    later: list[Claimed] = [(first._replace(bytes=3_500_000), (Origin.RULE, 0))]
    [observed] = observed_flows(detector, policy, [], later, view.claimed_bytes, 5.5, 0.0).flows
    assert observed.rate_bps == pytest.approx(8 * 2_500_000 / 0.5)


def test_indices_of_replaced_rules_and_jobs_are_skipped(policy: Policy, detector: Detector) -> None:
    stale_rule, stale_job, kept = sample(1, 100), sample(2, 200), sample(3, 300)
    claimed: list[Claimed] = [
        (stale_rule, (Origin.RULE, len(policy.rules))),
        (stale_job, (Origin.JOB, 1)),
        (kept, (Origin.JOB, 0)),
    ]
    previous = {stale_rule.flow: (50, 1.0), stale_job.flow: (50, 1.0)}
    view = observed_flows(detector, policy, [job("only", "training")], claimed, previous, 2.0, 0.0)
    assert [(observed.flow, observed.why) for observed in view.flows] == [(kept.flow, "job:only")]
    assert view.claimed_bytes == {kept.flow: (300, 2.0)}


def test_the_limit_bounds_the_detector_part(policy: Policy, detector: Detector) -> None:
    detector.observe([sample(i, 1000 * i) for i in range(1, 11)], 1.0)
    claimed: list[Claimed] = [(sample(50, 10), (Origin.RULE, 0))]
    view = observed_flows(detector, policy, [], claimed, {}, 1.0, 0.0, limit=3)
    whys = [observed.why for observed in view.flows]
    assert whys == ["default", "default", "default", "rule:rocev2"]
