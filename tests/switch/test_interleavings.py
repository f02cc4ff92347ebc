"""Random interleavings of everything that reaches a switch, against the simulated switch.

Policies, job sets, port flaps, time passing, answers held back and released,
a message refused, a barrier never answered, an entry deleted behind the
controller's back: in any order, at any point of a sync.  Once the switch is
left alone, its tables must be exactly the plan of the newest inputs, and no
change may have been applied twice for one desired state (a mod is only sent
again after the inputs changed, after the switch refused it, or after someone
else undid it).
"""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from os_ken.ofproto import ofproto_v1_3 as v13

from controller.openflow import wire
from controller.pipeline import tables
from controller.policy.jobs import JobSpec
from controller.switch.events import PolicyChanged, PolicySnapshot
from tests.support.ofswitch import ModRecord, PortSpec
from tests.switch.harness import DPID, NO_QOS, StepHarness, policy, ports, rule

POLICIES = (
    policy([rule("a", 5001)]),
    policy([rule("a", 5001), rule("b", 5002, "best-effort")]),
    policy([rule("a", 5001)], fabric=True),
    policy([{"name": "in3", "match": {"in_port": f"s{DPID:x}-eth3"}, "class": "training"}]),
)


def _job(name: str, address: str) -> JobSpec:
    return JobSpec.model_validate(
        {"name": name, "class": "training", "endpoints": [{"ipv4": address}]}
    )


JOB_SETS: tuple[tuple[JobSpec, ...], ...] = (
    (),
    (_job("j1", "10.0.1.0/24"),),
    (_job("j1", "10.0.1.0/24"), _job("j2", "10.0.2.0/24")),
)

OPS = st.one_of(
    st.tuples(st.just("policy"), st.integers(0, len(POLICIES) - 1)),
    st.tuples(st.just("jobs"), st.integers(0, len(JOB_SETS) - 1)),
    st.tuples(st.just("flap"), st.sampled_from([1, 2])),
    st.tuples(st.just("port3"), st.booleans()),
    st.tuples(st.just("deliver"), st.integers(1, 6)),
    st.tuples(st.just("advance"), st.sampled_from([0.1, 0.5, 1.0, 2.5])),
    st.tuples(st.just("hold"), st.booleans()),
    st.tuples(st.just("reject"), st.just(0)),
    st.tuples(st.just("drop_barrier"), st.just(0)),
    st.tuples(st.just("drift"), st.integers(0, 1000)),
)


class Run:
    """A harness that numbers the desired states it asks for: every change of inputs is a
    new generation, and each applied mod is recorded with the generation it was sent in."""

    def __init__(self) -> None:
        self.policy_index, self.jobs_index = 0, 0
        self.version, self.jobs_version = 1, 0
        self.harness = StepHarness(self.snapshot(), ports(1, 2), NO_QOS)
        self.generation = 0
        self.applied: list[tuple[int, tuple[object, ...]]] = []
        self._seen = 0

    def snapshot(self) -> PolicySnapshot:
        return PolicySnapshot(
            POLICIES[self.policy_index], self.version, JOB_SETS[self.jobs_index], self.jobs_version
        )

    def record(self) -> None:
        mods: list[ModRecord] = self.harness.switch.mods_received
        for mod in mods[self._seen :]:
            if mod.error is None:
                self.applied.append((self.generation, mod.summary))
        self._seen = len(mods)

    def changed(self) -> None:
        self.record()
        self.generation += 1

    def apply(self, op: str, arg: object) -> None:
        h = self.harness
        switch = h.switch
        if op == "policy":
            self.changed()
            self.policy_index, self.version = int(arg), self.version + 1  # type: ignore[call-overload]
            h.tell(PolicyChanged(self.snapshot()))
        elif op == "jobs":
            self.changed()
            self.jobs_index, self.jobs_version = int(arg), self.jobs_version + 1  # type: ignore[call-overload]
            h.tell(PolicyChanged(self.snapshot()))
        elif op == "flap":
            self.changed()
            number = int(arg)  # type: ignore[call-overload]
            down = number in switch.live_ports()
            h.inbox.append(switch.port_down(number) if down else switch.port_up(number))
        elif op == "port3":
            present = any(p.number == 3 for p in switch.ports())
            if bool(arg) and not present:
                self.changed()
                h.inbox.append(switch.add_port(PortSpec(3, f"s{DPID:x}-eth3")))
            elif not arg and present:
                self.changed()
                h.inbox.append(switch.delete_port(3))
        elif op == "deliver":
            for _ in range(int(arg)):  # type: ignore[call-overload]
                h.deliver_one()
        elif op == "advance":
            h.advance(float(arg))  # type: ignore[arg-type]
        elif op == "hold":
            if arg:
                switch.hold()
            else:
                h.release()
        elif op == "reject":
            switch.reject(v13.OFPT_FLOW_MOD, v13.OFPET_FLOW_MOD_FAILED, v13.OFPFMFC_UNKNOWN)
        elif op == "drop_barrier":
            switch.drop_barriers(1)
        elif op == "drift":
            # Someone deletes an entry behind the controller's back: the audit puts it back.
            flows = [f for f in switch.flows() if f.key.table_id != tables.COUNT]
            if flows:
                self.changed()
                switch.inject(wire.flow_delete(flows[int(arg) % len(flows)].key))  # type: ignore[call-overload]
        self.record()

    def quiesce(self) -> None:
        h = self.harness
        h.release()
        config = h.config
        h.advance(config.audit_interval_s)  # an audit after the last drift
        for _ in range(20):
            h.advance(config.reply_timeout_s + config.retry_s + 0.1)
            state = h.state
            if state.sync is None and state.wanted is None and not state.retries:
                break
        self.record()


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, min_size=1, max_size=30))
def test_any_interleaving_ends_with_the_plan_and_no_mod_applied_twice(
    ops: list[tuple[str, object]],
) -> None:
    run = Run()
    run.harness.connect()
    for op, arg in ops:
        run.apply(op, arg)
    run.quiesce()
    harness = run.harness
    state = harness.state
    assert state.sync is None and state.wanted is None and not state.retries
    assert state.ports is not None
    assert tuple(p.number for p in state.ports) == tuple(p.number for p in harness.switch.ports())
    assert harness.holds_plan()
    twice = [item for item, n in Counter(run.applied).items() if n > 1]
    assert not twice
