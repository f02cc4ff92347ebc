"""Queues as the step handles them: what QoS work it asks for, when, and what it makes of the
answers (logs, metrics, reports, telemetry).  The blocking work itself is not run here."""

from __future__ import annotations

import logging
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.qos.ovsdb import Bridge
from controller.qos.provision import QosOutcome
from controller.qos.telemetry import ClassCounters
from controller.switch.commands import QosApply, QueueRead, QueuesObserved, Report
from controller.switch.events import (
    PolicyChanged,
    PolicySnapshot,
    QosChanged,
    QosDone,
    QosResult,
    QueueReadResult,
    QueuesRead,
)
from controller.switch.state import SwitchConfig
from tests.support.ofswitch import PortSpec
from tests.switch.harness import DPID, StepHarness, policy, rule

TAG = f"{DPID:016x}"
CONFIG = SwitchConfig(manage_qos=True, reply_timeout_s=2.0, audit_interval_s=5.0)
BRIDGE = Bridge("br0", DPID, "netdev")


def connected(detection: bool = False, config: SwitchConfig = CONFIG) -> StepHarness:
    snapshot = PolicySnapshot(policy([rule("a", 5001)], detection=detection), 1)
    harness = StepHarness(snapshot, config=config)
    harness.connect(phase=5.0)
    harness.settle()
    return harness


def applies(harness: StepHarness) -> list[QosApply]:
    return [w.job for w in harness.qos_work if isinstance(w.job, QosApply)]


def done(harness: StepHarness, outcome: QosOutcome | None = None, **kwargs: object) -> None:
    job = applies(harness)[-1]
    result = QosResult(job.plans, BRIDGE, outcome=outcome or QosOutcome(), **kwargs)  # type: ignore[arg-type]
    harness.tell(QosDone(result))


def test_a_first_sync_asks_for_queues_once_and_reports_them_when_the_bridge_is_known() -> None:
    harness = connected()
    (job,) = applies(harness)
    assert job.plans == harness.state.qos_plans and set(job.plans) == {
        f"s{DPID:x}-eth1",
        f"s{DPID:x}-eth2",
    }
    assert job.bridge is None and job.count_limit is None and job.refresh_interval_s is None
    reports = [c.report for c in harness.commands if isinstance(c, Report)]
    assert reports[-1].queues == () and reports[-1].datapath_type is None
    done(harness)
    reports = [c.report for c in harness.commands if isinstance(c, Report)]
    assert len(reports) == 2
    assert reports[-1].queues == tuple(job.plans.values()) and reports[-1].datapath_type == "netdev"
    assert harness.state.qos_applied is job.plans
    assert f"switch {TAG}: queues on 2/2 ports (netdev datapath)" in harness.logs(logging.DEBUG)


def test_a_failed_port_is_counted_logged_and_retried_at_the_next_sync() -> None:
    harness = connected(config=replace(CONFIG, queue_read_interval_s=60.0))
    port = f"s{DPID:x}-eth1"
    done(harness, QosOutcome(failed={port: "boom"}))
    assert [m.labels for m in harness.metrics("qos_errors")] == [(port,)]
    assert f"switch {TAG} port {port}: QoS not applied: boom; will retry" in harness.logs(
        logging.ERROR
    )
    assert harness.state.qos_applied is None
    harness.advance(5.0)  # the audit
    assert len(applies(harness)) == 2
    assert applies(harness)[-1].bridge == BRIDGE  # looked up once


def test_a_sync_that_changes_no_queue_asks_for_no_qos_work() -> None:
    harness = connected()
    done(harness)
    harness.tell(PolicyChanged(PolicySnapshot(policy([rule("a", 5001), rule("b", 5002)]), 2)))
    harness.settle()
    assert len(applies(harness)) == 1


def test_asks_while_work_is_out_coalesce() -> None:
    harness = connected()
    harness.tell(QosChanged())
    harness.tell(QosChanged())
    assert len(harness.qos_work) == 1
    done(harness)
    assert len(applies(harness)) == 2
    done(harness)
    assert len(applies(harness)) == 2


def test_repairs_after_the_first_sync_are_drift() -> None:
    harness = connected()
    port = f"s{DPID:x}-eth2"
    done(harness, QosOutcome(changed_ports=[port], filtered_ports=[port], burst_ports=[port]))
    assert [m.labels for m in harness.metrics("drift_repairs")] == [(TAG, "qos")]
    assert f"switch {TAG}: queues set on {port}; tc filters set on {port}" in harness.logs(
        logging.INFO
    )
    assert f"switch {TAG}: HTB burst set on {port}" in harness.logs(logging.INFO)


def test_detection_caps_the_counting_table_and_checks_the_refresh_once() -> None:
    harness = connected(detection=True)
    (job,) = applies(harness)
    assert job.count_limit is not None and job.refresh_interval_s == 0.5
    done(harness, count_limited=job.count_limit, refresh_warning="refresh is slow")
    warnings = [c for c in harness.commands if getattr(c, "once", False)]
    assert len(warnings) == 1 and warnings[0].args == ("refresh is slow",)  # type: ignore[union-attr]
    harness.tell(QosChanged())
    job = applies(harness)[-1]
    assert job.count_limit is None and job.refresh_interval_s is None


def test_queue_telemetry_reads_and_a_latency_class_starting_to_drop_is_a_warning() -> None:
    harness = connected()
    done(harness)
    harness.advance(1.0)
    reads = [w.job for w in harness.qos_work if isinstance(w.job, QueueRead)]
    assert len(reads) == 1 and reads[0].bridge == BRIDGE
    port = f"s{DPID:x}-eth1"

    def answer(drops: int, wall: float, short: frozenset[str] = frozenset()) -> None:
        counters = {port: {"1:1": ClassCounters(1000, 10, drops, 0, 300, 2)}}
        harness.tell(QueuesRead(QueueReadResult(counters, short, {}, wall, BRIDGE)))

    answer(0, 10.0)
    harness.advance(1.0)
    answer(3, 11.0)
    observed = [c for c in harness.commands if isinstance(c, QueuesObserved)]
    assert len(observed) == 2 and len(observed[-1].drops) == 1
    line = f"switch {TAG} port {port}: latency class inference dropped 3 packet(s) (backlog 300 B)"
    assert harness.logs(logging.WARNING) == [line]
    harness.advance(1.0)
    answer(5, 12.0, frozenset({port}))  # still dropping: no second warning; burst lost: re-apply
    assert harness.logs(logging.WARNING) == [line]
    assert len(applies(harness)) == 2


QOS_OPS = st.one_of(
    st.tuples(st.just("changed"), st.just(0)),
    st.tuples(st.just("policy"), st.integers(0, 2)),
    st.tuples(st.just("answer"), st.booleans()),
    st.tuples(st.just("advance"), st.sampled_from([0.3, 1.0, 5.0])),
    st.tuples(st.just("port3"), st.booleans()),
)


@settings(max_examples=40, deadline=None)
@given(st.lists(QOS_OPS, max_size=25))
def test_one_qos_item_out_at_a_time_and_the_last_one_applies_the_newest_plans(
    ops: list[tuple[str, object]],
) -> None:
    policies = [policy([rule("a", 5001)]), policy([rule("b", 5002)]), policy(detection=True)]
    harness = connected()
    answered = 0
    version = 1

    def answer(ok: bool) -> None:
        nonlocal answered
        work = harness.qos_work[answered]
        answered += 1
        if isinstance(work.job, QosApply):
            outcome = QosOutcome() if ok else QosOutcome(failed={"x": "boom"})
            harness.tell(QosDone(QosResult(work.job.plans, BRIDGE, outcome=outcome)))
        else:
            harness.tell(QueuesRead(QueueReadResult({}, wall=harness.now, bridge=BRIDGE)))

    for op, arg in ops:
        if op == "changed":
            harness.tell(QosChanged())
        elif op == "policy":
            version += 1
            harness.tell(PolicyChanged(PolicySnapshot(policies[int(arg)], version)))  # type: ignore[call-overload]
        elif op == "answer" and answered < len(harness.qos_work):
            answer(bool(arg))
        elif op == "advance":
            harness.advance(float(arg))  # type: ignore[arg-type]
        elif op == "port3":
            present = any(p.number == 3 for p in harness.switch.ports())
            if arg and not present:
                harness.inbox.append(harness.switch.add_port(PortSpec(3, f"s{DPID:x}-eth3")))
            elif not arg and present:
                harness.inbox.append(harness.switch.delete_port(3))
        harness.settle()
        assert len(harness.qos_work) - answered <= 1  # one item out at a time

    def answer_all() -> None:
        while answered < len(harness.qos_work):
            answer(True)
            harness.settle()

    answer_all()
    harness.advance(CONFIG.audit_interval_s)  # a failed port is tried again after an audit
    answer_all()
    applies_ = [w.job for w in harness.qos_work if isinstance(w.job, QosApply)]
    assert applies_[-1].plans == harness.state.qos_plans
    assert harness.state.qos_applied == harness.state.qos_plans
    assert set(harness.state.qos_plans) == {p.name for p in harness.switch.ports()}


def test_queues_fenced_by_a_lost_lease_are_a_warning_and_not_asked_again() -> None:
    """The blocking pool found the lease gone (a pause past the TTL): nothing was written, the
    step says so once, and does not ask again (it would spin until the step-down arrives)."""
    harness = connected()
    job = applies(harness)[-1]
    harness.tell(QosDone(QosResult(job.plans, BRIDGE, fenced=True)))
    assert harness.logs(logging.ERROR) == []
    assert any("no longer holds its lease" in line for line in harness.logs(logging.WARNING))
    assert harness.state.qos_applied is None  # a later master's sync wants them again
    assert len(applies(harness)) == 1
