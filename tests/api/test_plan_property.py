"""Over random inputs, the dry-run plan of a stored report is the switch's plan, and applying
its diff leaves a switch holding exactly that plan.

A switch holds the plan of one policy (the policy files of the repository and
the API tests' document, each also in fabric forwarding), computed from
random inputs: ports up and down, detector overrides, a fabric with edge
ports, links seen both ways or one, hosts and pinned paths.  Some of its
entries are missing and some are someone else's.  Its report (with those
inputs) goes through the store's JSON and the dry run plans another policy
for it; then

- the plan is ``plan(candidate, jobs, inputs)`` on the published inputs (the
  overrides carried as the controller carries them: dropped with a changed
  detection section);
- the held flows with the shown flow changes applied (a ``SimulatedSwitch``),
  the held groups with the group changes applied and the held meters with
  the meter changes applied are that plan's flows, groups and meters (meters
  the plan does not name stay, as on the switch).

The same holds through the HTTP route, checked on fewer examples: its text is
the formatted entries of ``plan(...)`` that the switch lacks or holds otherwise.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import redis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.api.planning import LiveState, dry_run
from controller.pipeline import tables
from controller.pipeline.describe import format_flow, format_group, format_meter
from controller.pipeline.diff import FlowDiff
from controller.pipeline.flows import FlowEntry, FlowKey, InstalledFlow, MatchField, Output
from controller.pipeline.groups import Bucket, GroupEntry, GroupType, MeterEntry
from controller.pipeline.plan import SwitchInputs, SwitchPlan, plan
from controller.pipeline.simulate import SimulatedSwitch
from controller.policy.errors import PolicyError
from controller.policy.jobs import JobSpec
from controller.policy.load import load_policy_document, parse_policy
from controller.policy.model import Policy
from controller.store.groups import GroupRecord
from controller.store.inputs import InputsRecord
from controller.store.jobs import JobStore
from controller.store.policies import PolicyStore
from controller.store.switches import PortReport, ReportedFlow, SwitchReport, SwitchStore
from tests.api.conftest import DOCUMENT, bearer
from tests.support.plan_inputs import DPID, switch_inputs

REPO = Path(__file__).resolve().parents[2]


def _documents() -> list[dict[str, Any]]:
    """The policy files and the API tests' document, each as is and in fabric forwarding."""
    sources = [copy.deepcopy(DOCUMENT)]
    for path in sorted((REPO / "policies").glob("*.yaml")) + sorted(
        (REPO / "policies" / "examples").glob("*.yaml")
    ):
        sources.append(load_policy_document(path)[1])
    documents = []
    for source in sources:
        for fabric in (False, True):
            document = copy.deepcopy(source)
            if fabric:
                document["forwarding"] = "fabric"
            try:
                parse_policy(document)
            except PolicyError:
                continue
            documents.append(document)
    return documents


DOCUMENTS = _documents()
POLICIES = [parse_policy(document) for document in DOCUMENTS]
JOB = JobSpec.from_document(
    "train-1",
    {"class": "training", "endpoints": [{"ipv4": "10.0.0.0/24", "ports": [4791]}]},
)

# ---- strategies ------------------------------------------------------------------------------

foreign_flows = st.lists(
    st.builds(
        lambda table, priority, port, cookie: InstalledFlow(
            FlowKey(table, priority, (MatchField("tcp_dst", port),)), cookie
        ),
        st.sampled_from([tables.CLASSIFY, tables.MARK, tables.FORWARD]),
        st.integers(0, 0xFFFF),
        st.integers(0, 0xFFFF),
        st.integers(0, 2**64 - 1),
    ),
    max_size=3,
    unique_by=lambda flow: flow.key,
)
stale_groups = st.lists(
    st.builds(
        lambda gid, port: GroupEntry(GroupType.ALL, (Bucket((Output(port),)),), gid),
        st.integers(1, 0xFFFF),
        st.integers(1, 8),
    ),
    max_size=2,
    unique_by=lambda group: group.group_id,
)
foreign_meters = st.lists(
    st.builds(MeterEntry, st.integers(1, 4), st.integers(1, 5000), st.integers(1, 500)),
    max_size=2,
    unique_by=lambda meter: meter.meter_id,
)


@dataclasses.dataclass(frozen=True)
class Case:
    """A switch that holds (most of) ``held``'s plan and someone else's entries."""

    held: Policy
    candidate: Policy
    candidate_document: dict[str, Any]
    inputs: SwitchInputs
    jobs: tuple[JobSpec, ...]
    flows: tuple[FlowEntry, ...]
    foreign: tuple[InstalledFlow, ...]
    groups: tuple[GroupEntry, ...]
    meters: tuple[MeterEntry, ...]

    def report(self) -> SwitchReport:
        installed: list[FlowEntry | InstalledFlow] = [*self.flows, *self.foreign]
        flows: tuple[ReportedFlow, ...] = tuple(
            (
                f.key.table_id,
                f.key.priority,
                tuple((m.name, m.value, m.mask) for m in f.key.match),
                f.cookie,
            )
            for f in installed
        )
        ports = tuple(
            PortReport(port.name, port.number, port.link_bps, None, ())
            for port in self.inputs.ports
        )
        return SwitchReport(
            DPID,
            "ctl-1",
            1_700_000_000.0,
            1,
            ports,
            flows,
            "netdev",
            groups=tuple(GroupRecord.of(group) for group in self.groups),
            meters=self.meters,
            inputs=InputsRecord.of(self.inputs),
        )

    def expected(self) -> SwitchPlan:
        """``plan`` itself on the published inputs, the overrides kept as the controller keeps
        them: while the detection section stays the same (a changed one starts over)."""
        detection = self.candidate.detection
        kept = detection is not None and detection == self.held.detection
        inputs = dataclasses.replace(self.inputs, overrides=self.inputs.overrides if kept else {})
        return plan(self.candidate, self.jobs, inputs)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    held_index = draw(st.integers(0, len(POLICIES) - 1))
    candidate_index = draw(st.sampled_from([held_index, draw(st.integers(0, len(POLICIES) - 1))]))
    inputs = draw(switch_inputs())
    jobs = (JOB,) if draw(st.booleans()) else ()
    held_plan = plan(POLICIES[held_index], jobs if draw(st.booleans()) else (), inputs).desired
    if draw(st.booleans()):  # the switch holds its plan, and nothing else
        return Case(
            POLICIES[held_index],
            POLICIES[candidate_index],
            DOCUMENTS[candidate_index],
            inputs,
            jobs,
            held_plan.flows,
            (),
            held_plan.groups,
            held_plan.meters,
        )
    flows = tuple(flow for flow in held_plan.flows if draw(st.integers(0, 9)))
    groups = tuple(group for group in held_plan.groups if draw(st.integers(0, 3)))
    meters = {meter.meter_id: meter for meter in held_plan.meters if draw(st.booleans())}
    meters.update({meter.meter_id: meter for meter in draw(foreign_meters)})
    held_groups = {group.group_id for group in groups}
    stale = [group for group in draw(stale_groups) if group.group_id not in held_groups]
    held_keys = {flow.key for flow in flows}
    return Case(
        held=POLICIES[held_index],
        candidate=POLICIES[candidate_index],
        candidate_document=DOCUMENTS[candidate_index],
        inputs=inputs,
        jobs=jobs,
        flows=flows,
        foreign=tuple(flow for flow in draw(foreign_flows) if flow.key not in held_keys),
        groups=(*groups, *stale),
        meters=tuple(meters.values()),
    )


PROPERTY = settings(max_examples=150, deadline=None, derandomize=True)


@PROPERTY
@given(cases())
def test_the_dry_run_is_the_switch_plan_and_its_diff_reaches_it(case: Case) -> None:
    stored = SwitchReport.from_json(case.report().to_json())
    live = LiveState(case.jobs, {1: case.held.detection})
    run = dry_run(case.candidate, stored, live)
    expected = case.expected()
    assert run.known
    assert run.plan == expected

    # flows: a switch holding the reported entries, with the shown changes applied
    switch = SimulatedSwitch()
    switch.install(case.flows)
    for flow in case.foreign:
        switch.add_foreign(flow.key, flow.cookie)
    switch.apply(
        FlowDiff(
            add=(*run.flows.added, *(change.planned for change in run.flows.changed)),
            delete=tuple(flow.key for flow in run.flows.removed),
            unchanged=run.flows.unchanged,
        )
    )
    assert not switch.foreign
    assert switch.entries == {flow.key: flow for flow in expected.desired.flows}

    # groups: added and modified by id, removed by id
    groups = {group.group_id: group for group in case.groups}
    groups.update({group.group_id: group for group in (*run.groups.add, *run.groups.modify)})
    for group_id in run.groups.delete:
        del groups[group_id]
    assert set(groups.values()) == set(expected.desired.groups)

    # meters: added and changed; the ones the plan does not name stay
    meters = {meter.meter_id: meter for meter in case.meters}
    meters.update({meter.meter_id: meter for meter in run.meters.added})
    meters.update({planned.meter_id: planned for _, planned in run.meters.changed})
    planned_meters = set(expected.desired.meters)
    assert planned_meters <= set(meters.values())
    assert set(meters.values()) - planned_meters == set(run.meters.kept)

    assert run.in_sync == (not switch_changed(case, expected))


def switch_changed(case: Case, expected: SwitchPlan) -> bool:
    """Whether the held flows, groups or meters differ from the plan (meters: any planned one
    missing or different)."""
    held = {(flow.key, flow.cookie) for flow in case.flows}
    held |= {(flow.key, flow.cookie) for flow in case.foreign}
    planned = {(flow.key, flow.cookie) for flow in expected.desired.flows}
    return (
        held != planned
        or set(case.groups) != set(expected.desired.groups)
        or not set(expected.desired.meters) <= set(case.meters)
    )


HTTP = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    # Each example writes the same keys (switch 1, version 1's policy, the job) over the
    # previous example's, and removes what it does not write.
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@HTTP
@given(case=cases())
def test_the_route_shows_the_switch_plan(
    case: Case, client: TestClient, redis_client: redis.Redis
) -> None:
    redis_client.flushdb()
    client.headers.update(bearer(redis_client))  # the flush took the client's token
    held_document = DOCUMENTS[POLICIES.index(case.held)]
    PolicyStore(redis_client).put(held_document, author="test")
    if case.jobs:
        JobStore(redis_client).put(JOB.name, _job_document(), ttl_s=600)
    switches = SwitchStore(redis_client)
    switches.heartbeat("ctl-1")
    switches.report(case.report())
    response = client.post("/v1/policy/plan", json=case.candidate_document)
    assert response.status_code == 200, response.text
    [switch] = response.json()["switches"]

    expected = case.expected().desired
    held = {flow.key: flow.cookie for flow in case.flows}
    held.update({flow.key: flow.cookie for flow in case.foreign})
    planned_keys = {flow.key for flow in expected.flows}
    assert sorted(switch["flows"]["added"]) == sorted(
        format_flow(flow) for flow in expected.flows if flow.key not in held
    )
    assert sorted(switch["flows"]["changed"]) == sorted(
        format_flow(flow, previous_cookie=held[flow.key])
        for flow in expected.flows
        if flow.key in held and held[flow.key] != flow.cookie
    )
    assert sorted(switch["flows"]["removed"]) == sorted(
        format_flow(InstalledFlow(key, cookie))
        for key, cookie in held.items()
        if key not in planned_keys
    )
    held_groups = {group.group_id: group for group in case.groups}
    assert sorted(switch["groups"]["added"]) == sorted(
        format_group(group) for group in expected.groups if group.group_id not in held_groups
    )
    planned_ids = {group.group_id for group in expected.groups}
    assert sorted(switch["groups"]["removed"]) == sorted(
        format_group(group) for gid, group in held_groups.items() if gid not in planned_ids
    )
    held_meters = {meter.meter_id: meter for meter in case.meters}
    assert switch["meters"]["added"] == [
        format_meter(meter) for meter in expected.meters if meter.meter_id not in held_meters
    ]
    assert switch["inputs"]["known"] is True
    assert switch["inputs"]["edge_ports"] == (
        None if case.inputs.fabric is None else sorted(case.inputs.fabric.edge_ports)
    )


def _job_document() -> dict[str, Any]:
    return {"class": "training", "endpoints": [{"ipv4": "10.0.0.0/24", "ports": [4791]}]}
