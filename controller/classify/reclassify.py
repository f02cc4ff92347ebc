"""Detection bookkeeping as pure functions: overrides from decisions, and the flow view.

The switch step owns the state (overrides, claimed flows' last byte
counts) and passes it in; these functions return the new state with what
changed, so they are tested without a switch or a clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from controller.classify.decisions import Decisions
from controller.classify.detector import Detector
from controller.classify.flows import CounterSample, FlowState
from controller.classify.records import ObservedFlow, Reclassification
from controller.flowid import FlowId
from controller.pipeline import tables
from controller.pipeline.flows import InstalledFlow, Owner, cookie_owner
from controller.pipeline.planner import Origin, learned_origin, override_flows
from controller.policy.jobs import JobSpec
from controller.policy.model import Policy


@dataclass(frozen=True)
class Overrides:
    """Overrides after a poll, and the reclassifications that got there."""

    overrides: dict[FlowId, str]
    changes: tuple[Reclassification, ...]


def apply_decisions(
    dpid: int,
    overrides: Mapping[FlowId, str],
    decisions: Decisions,
    elephant: str,
    default: str,
) -> Overrides:
    """Demotions add an override to ``elephant``; releases drop it (back to ``default``)."""
    after = dict(overrides)
    changes: list[Reclassification] = []
    for demotion in decisions.demote:
        after[demotion.flow] = elephant
        changes.append(
            Reclassification(
                dpid,
                demotion.flow,
                default,
                elephant,
                str(demotion.reason),
                demotion.bytes,
                demotion.latency_s,
            )
        )
    for release in decisions.release:
        after.pop(release.flow, None)
        changes.append(
            Reclassification(dpid, release.flow, elephant, default, str(release.reason), 0, None)
        )
    return Overrides(after, tuple(changes))


def adopted_overrides(policy: Policy, installed: Iterable[InstalledFlow]) -> dict[FlowId, str]:
    """The detector overrides a switch already holds that this policy would install as they are.

    A restarted controller has forgotten which flows it demoted, but the
    switch has not: adopting them keeps every elephant in its class across
    the restart (and the first sync sends nothing), where planning from an
    empty set would delete them and demote each again a poll later.  An
    entry is adopted only when re-planning it gives the very cookie the
    switch holds, i.e. the same match, class and idle timeout; any other
    detector entry is stale and the sync removes it as usual.
    """
    spec = policy.detection
    if spec is None:
        return {}
    elephant = spec.elephant.traffic_class
    adopted: dict[FlowId, str] = {}
    for flow in installed:
        key = flow.key
        if (
            key.table_id != tables.CLASSIFY
            or key.priority != tables.OVERRIDE_PRIORITY
            or cookie_owner(flow.cookie) is not Owner.DETECTOR
        ):
            continue
        flow_id = FlowId.from_oxm({field.name: field.value for field in key.match})
        if flow_id is None:
            continue
        planned = override_flows(policy, {flow_id: elephant})
        if planned and planned[0].key == key and planned[0].cookie == flow.cookie:
            adopted[flow_id] = elephant
    return adopted


Claimed = tuple[CounterSample, tuple[Origin, int]]


def split_samples(
    entries: Iterable[tuple[CounterSample, int]],
) -> tuple[list[CounterSample], list[Claimed]]:
    """Counting entries (sample, cookie) into those the detector may demote (no rule or job
    claimed them) and those a rule or job claimed (only shown in the flow view)."""
    samples: list[CounterSample] = []
    claimed: list[Claimed] = []
    # Runs for every counted flow at every poll, and nearly all of them share one cookie
    # (the default class's): the verdict on the last cookie is kept.
    last_cookie: int | None = None
    origin: tuple[Origin, int] | None = None
    unclaimed = True
    for sample, cookie in entries:
        if cookie != last_cookie:
            last_cookie, origin = cookie, learned_origin(cookie)
            unclaimed = origin is None or origin[0] is Origin.DEFAULT
        if unclaimed:
            samples.append(sample)
        else:
            assert origin is not None
            claimed.append((sample, origin))
    return samples, claimed


@dataclass(frozen=True)
class ObservedView:
    flows: tuple[ObservedFlow, ...]
    claimed_bytes: dict[FlowId, tuple[int, float]]
    """Bytes and time of each claimed flow at this view: the next view's rates start here."""


def observed_flows(
    detector: Detector,
    policy: Policy,
    jobs: Sequence[JobSpec],
    claimed: Sequence[Claimed],
    previous: Mapping[FlowId, tuple[int, float]],
    now: float,
    wall_offset: float,
    limit: int = 2000,
) -> ObservedView:
    """The flow view: the detector's flows, plus those a rule or job claimed (with why).

    ``wall_offset`` turns the monotonic ``now`` into wall-clock time for people.
    """
    spec = policy.detection
    elephant = spec.elephant.traffic_class if spec is not None else policy.default_class
    default = policy.default_class
    by_name = sorted(jobs, key=lambda j: j.name)
    flows = [
        ObservedFlow(
            view.flow,
            elephant if view.state is FlowState.ELEPHANT else default,
            "detected" if view.state is FlowState.ELEPHANT else "default",
            view.bytes,
            view.rate_bps,
            wall_offset + view.first_seen,
            wall_offset + view.last_seen,
        )
        for view in detector.flows(limit=limit)
    ]
    claimed_bytes: dict[FlowId, tuple[int, float]] = {}
    for sample, (origin, index) in claimed:
        if origin is Origin.RULE and index < len(policy.rules):
            rule = policy.rules[index]
            name, traffic_class = f"rule:{rule.name}", rule.traffic_class
        elif origin is Origin.JOB and index < len(by_name):
            job = by_name[index]
            name, traffic_class = f"job:{job.name}", job.traffic_class
        else:
            continue  # from a policy or job set replaced since
        before = previous.get(sample.flow)
        rate = 0.0
        if before is not None and sample.bytes >= before[0] and now > before[1]:
            rate = 8 * (sample.bytes - before[0]) / (now - before[1])
        claimed_bytes[sample.flow] = (sample.bytes, now)
        flows.append(
            ObservedFlow(
                sample.flow,
                traffic_class,
                name,
                sample.bytes,
                rate,
                wall_offset + now - sample.age_s,
                wall_offset + now,
                sample.packets,
            )
        )
    return ObservedView(tuple(flows), claimed_bytes)
