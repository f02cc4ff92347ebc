"""The plan the API shows is the plan the switch gets.

A switch actor's step runs against the simulated switch (which consumes the
encoded messages) until it is in sync, and publishes its report.  The report
goes through the store's record and JSON, as the Redis link writes it; the
API's dry run then plans a candidate policy from it.  Applying that candidate
to the switch must leave the simulated switch holding exactly what the dry
run showed: flows, groups and meters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.api.planning import LiveState, dry_run
from controller.link.redis_link import switch_report
from controller.openflow.observer import SyncReport
from controller.pipeline.desired import FabricInputs
from controller.pipeline.plan import PortState
from controller.policy.model import Policy
from controller.store.switches import SWITCH_REPORT
from controller.switch.commands import Report
from controller.switch.events import FabricChanged, PolicyChanged, PolicySnapshot, Received
from tests.support.ofswitch import PortSpec
from tests.support.plan_inputs import DPID, fabrics
from tests.switch.harness import StepHarness, policy, rule

POLICIES: dict[str, Policy] = {
    "plain": policy(),
    "rules": policy([rule("ssh", 22), rule("nccl", 29500, "best-effort")]),
    "fabric": policy([rule("nccl", 29500)], fabric=True),
    "fabric-plain": policy(fabric=True),
}


@dataclass(frozen=True)
class Case:
    ports: tuple[PortSpec, ...]
    down: frozenset[int]
    before: str
    after: str
    fabric: FabricInputs | None


@st.composite
def cases(draw: st.DrawFn) -> Case:
    numbers = draw(st.lists(st.integers(1, 8), min_size=2, max_size=5, unique=True))
    ports = tuple(PortSpec(n, f"s1-eth{n}") for n in sorted(numbers))
    down = frozenset(draw(st.sets(st.sampled_from(sorted(numbers)), max_size=2)))
    states = tuple(PortState(p.number, p.name, 10**10, p.number not in down) for p in ports)
    fabric = draw(st.one_of(st.none(), fabrics(states)))
    names = sorted(POLICIES)
    return Case(ports, down, draw(st.sampled_from(names)), draw(st.sampled_from(names)), fabric)


def snapshot(name: str, version: int) -> PolicySnapshot:
    return PolicySnapshot(POLICIES[name], version)


def last_report(commands: Sequence[object]) -> SyncReport:
    reports = [c.report for c in commands if isinstance(c, Report)]
    assert reports, "the switch published no report"
    return reports[-1]


def held(harness: StepHarness) -> tuple[list[tuple[object, int]], dict[int, object], dict]:
    switch = harness.switch
    flows = sorted((f.key, f.cookie) for f in switch.flows())
    return flows, dict(switch.groups()), dict(switch.meters())


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(cases())
def test_the_dry_run_shows_what_the_switch_ends_up_holding(case: Case) -> None:
    harness = StepHarness(snapshot(case.before, 1), case.ports, dpid=DPID)
    for number in sorted(case.down):
        harness.switch.port_down(number)
    harness.connect()
    harness.settle()
    if case.fabric is not None:
        harness.tell(FabricChanged(case.fabric))
        harness.settle()
    assert harness.holds_plan()

    # What the Redis link stores, read back as the API reads it.
    stored = SWITCH_REPORT.validate_json(
        SWITCH_REPORT.dump_json(switch_report(last_report(harness.commands), "c1"))
    )
    before = dry_run(POLICIES[case.before], stored, LiveState())
    assert before.in_sync, "a switch in sync shows changes in the dry run of its own policy"

    shown = dry_run(POLICIES[case.after], stored, LiveState()).plan.desired
    harness.tell(PolicyChanged(snapshot(case.after, 2)))
    harness.settle()

    flows, groups, meters = held(harness)
    assert flows == sorted((f.key, f.cookie) for f in shown.flows)
    assert groups == {group.group_id: group for group in shown.groups}
    # Meters are added and changed, never deleted (the controller leaves one it no longer
    # plans): every planned meter is held as planned.
    assert all(meters.get(meter.meter_id) == meter for meter in shown.meters)


def test_a_port_that_just_came_up_plans_alike_in_the_api_and_on_the_switch() -> None:
    ports = (PortSpec(1, "s1-eth1"), PortSpec(2, "s1-eth2"))
    harness = StepHarness(snapshot("fabric", 1), ports, dpid=DPID)
    harness.switch.port_down(2)
    harness.connect()
    harness.settle()
    status = harness.switch.port_up(2)  # up, but not settled: the fabric has not said so
    harness.tell(Received(status))
    harness.settle()
    stored = switch_report(last_report(harness.commands), "c1")
    assert stored.inputs is not None
    shown = dry_run(POLICIES["fabric"], stored, LiveState())
    assert shown.in_sync
    assert sorted((f.key, f.cookie) for f in shown.plan.desired.flows) == held(harness)[0]
