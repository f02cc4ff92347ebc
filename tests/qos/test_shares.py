"""Shares between jobs: the queues of a per-job class, the entries that reach them, the checks."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any

import pytest

from controller.openflow.stats import FlowCounters, class_counters
from controller.pipeline import tables
from controller.pipeline.flows import InstalledFlow
from controller.pipeline.plan import PortState, SwitchInputs, plan
from controller.pipeline.planner import plan_switch
from controller.pipeline.simulate import run_packet
from controller.policy.errors import PolicyError
from controller.policy.jobs import JobSpec
from controller.policy.limits import MAX_JOB_QUEUES
from controller.policy.load import parse_policy
from controller.policy.model import Policy
from controller.qos.plan import HTB_MIN_RATE_BPS, PortQos, QueueSpec, plan_port_qos, tc_filters
from controller.qos.shares import assign_slots, job_slots, queue_classes, shares

M = 1_000_000
G = 1_000 * M

CLASSES: dict[str, dict[str, Any]] = {
    "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
    "training": {"priority": 1, "dscp": 26, "min_rate": "70%", "share": "per-job"},
    "best-effort": {"priority": 2, "dscp": 0, "min_rate": "10%"},
}


def make_policy(classes: dict[str, dict[str, Any]] | None = None, rate: str = "1Gbit") -> Policy:
    return parse_policy(
        {
            "classes": classes or CLASSES,
            "default_class": "best-effort",
            "ports": {"rate": rate},
        }
    )


POLICY = make_policy()
TRAINING = 700 * M  # 70 % of the 1 Gbit/s port


def job(name: str, weight: int = 1, hosts: Sequence[str] = ("10.0.0.1", "10.0.0.2")) -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": name,
            "class": "training",
            "weight": weight,
            "endpoints": [{"ipv4": host} for host in hosts],
        }
    )


def training_queues(qos: PortQos) -> list[QueueSpec]:
    return [q for q in qos.queues if q.class_name.split("/")[0] == "training"]


def test_no_job_leaves_the_class_one_queue_like_per_flow() -> None:
    per_flow = make_policy({**CLASSES, "training": {**CLASSES["training"], "share": "per-flow"}})
    assert plan_port_qos(POLICY, "p", None, ()) == plan_port_qos(per_flow, "p", None, ())
    (only,) = training_queues(plan_port_qos(POLICY, "p", None))
    assert (only.min_bps, only.jobs) == (TRAINING, ())


def test_one_job_shares_the_class_with_the_unregistered_flows() -> None:
    own, job_queue = training_queues(plan_port_qos(POLICY, "p", None, [job("a")]))
    assert (own.class_name, own.queue_id, own.dscp, own.jobs) == ("training", 1, 26, ())
    assert job_queue.jobs == ("a",)
    assert job_queue.class_name.startswith("training/job")
    assert job_queue.queue_id >= len(POLICY.classes)
    assert job_queue.dscp not in {c.dscp for c in POLICY.classes.values()}
    assert own.min_bps == job_queue.min_bps == TRAINING // 2


def test_weights_split_the_guarantee_and_the_parts_add_up() -> None:
    jobs = [job("a", weight=2), job("b", weight=1)]
    queues = training_queues(plan_port_qos(POLICY, "p", None, jobs))
    by_jobs = {q.jobs: q.min_bps for q in queues}
    # 2 + 1 + 1 (the unregistered flows as one more job)
    assert by_jobs == {(): TRAINING // 4, ("a",): TRAINING // 2, ("b",): TRAINING // 4}
    assert sum(by_jobs.values()) == TRAINING


def test_every_part_keeps_the_class_ceiling_and_priority_so_the_class_is_work_conserving() -> None:
    capped = make_policy({**CLASSES, "training": {**CLASSES["training"], "max_rate": "80%"}})
    queues = training_queues(plan_port_qos(capped, "p", None, [job("a"), job("b", 5)]))
    assert len(queues) == 3
    assert {q.max_bps for q in queues} == {800 * M}
    assert {q.priority for q in queues} == {1}
    uncapped = training_queues(plan_port_qos(POLICY, "p", None, [job("a"), job("b", 5)]))
    assert {q.max_bps for q in uncapped} == {G}


def test_jobs_of_other_classes_get_no_queue() -> None:
    other = JobSpec.model_validate(
        {"name": "x", "class": "inference", "endpoints": [{"ipv4": "10.0.0.9"}]}
    )
    assert plan_port_qos(POLICY, "p", None, [other]) == plan_port_qos(POLICY, "p", None)


def test_up_to_the_bound_every_job_has_its_own_queue() -> None:
    jobs = [job(f"job-{i}") for i in range(MAX_JOB_QUEUES)]
    qos = plan_port_qos(POLICY, "p", None, jobs)
    queues = training_queues(qos)
    assert len(queues) == MAX_JOB_QUEUES + 1
    assert sorted(j for q in queues for j in q.jobs) == sorted(j.name for j in jobs)
    assert all(len(q.jobs) <= 1 for q in queues)
    assert "shared" not in qos.note


def test_past_the_bound_jobs_share_queues_and_the_plan_says_so() -> None:
    jobs = [job(f"job-{i}", weight=1 + i % 3) for i in range(9)]
    qos = plan_port_qos(POLICY, "p", None, jobs)
    job_queues = [q for q in training_queues(qos) if q.jobs]
    assert len(job_queues) <= MAX_JOB_QUEUES
    assert sorted(j for q in job_queues for j in q.jobs) == sorted(j.name for j in jobs)
    shared = [q for q in job_queues if len(q.jobs) > 1]
    assert shared
    for queue in shared:
        assert f"{queue.class_name} shared by {', '.join(queue.jobs)}" in qos.note
    # a shared queue weighs the sum of its jobs' weights
    weights = {j.name: j.weight for j in jobs}
    total = sum(weights.values()) + 1
    for queue in job_queues:
        assert queue.min_bps == TRAINING * sum(weights[n] for n in queue.jobs) // total


def test_the_plan_does_not_depend_on_the_order_jobs_come_in() -> None:
    jobs = [job(f"j{i}", weight=i + 1) for i in range(11)]
    assert plan_port_qos(POLICY, "p", None, jobs) == plan_port_qos(
        POLICY, "p", None, list(reversed(jobs))
    )
    assert assign_slots(["b", "a", "c"], 8) == assign_slots(["c", "b", "a"], 8)


def test_a_job_keeps_its_queue_when_another_registers_unless_they_collide() -> None:
    before = assign_slots(["alpha"], MAX_JOB_QUEUES)
    after = assign_slots(["alpha", "beta"], MAX_JOB_QUEUES)
    assert after["alpha"] == before["alpha"]
    assert after["beta"] != after["alpha"]


def test_a_tiny_share_keeps_htbs_floor() -> None:
    tiny = make_policy(
        {**CLASSES, "training": {**CLASSES["training"], "min_rate": "10kbit"}}, rate="1Gbit"
    )
    queues = training_queues(plan_port_qos(tiny, "p", None, [job("a", 100)]))
    assert min(q.min_bps for q in queues) == HTB_MIN_RATE_BPS
    assert shares(10, []) == (10, {})


def test_each_job_queue_gets_a_filter_for_its_dscp() -> None:
    qos = plan_port_qos(POLICY, "p", None, [job("a"), job("b")])
    filters = {(f.protocol, f.dscp): f.classid for f in tc_filters(qos)}
    for queue in qos.queues:
        for protocol in ("ip", "ipv6"):
            assert filters[(protocol, queue.dscp)] == f"1:{queue.queue_id + 1:x}"
    assert len(filters) == 2 * len(qos.queues)


def ip(text: str) -> int:
    return int(ipaddress.IPv4Address(text))


def tcp(source: str, target: str) -> dict[str, int]:
    return {
        "eth_type": 0x0800,
        "ip_proto": 6,
        "ipv4_src": ip(source),
        "ipv4_dst": ip(target),
        "tcp_src": 40000,
        "tcp_dst": 5201,
    }


def test_a_jobs_flows_are_marked_with_its_queues_dscp_and_queue() -> None:
    a = job("a", hosts=("10.0.0.1", "10.0.0.2"))
    b = job("b", hosts=("10.0.0.3", "10.0.0.4"))
    flows = plan_switch(POLICY, {}, None, [a, b]).flows
    qos = plan_port_qos(POLICY, "p", None, [a, b])
    queue_of = {q.jobs: q for q in qos.queues if q.jobs}
    for spec, (source, target) in ((a, ("10.0.0.1", "10.0.0.2")), (b, ("10.0.0.4", "10.0.0.3"))):
        verdict = run_packet(flows, tcp(source, target))
        assert verdict.queue_id == queue_of[(spec.name,)].queue_id
        assert verdict.packet["ip_dscp"] == queue_of[(spec.name,)].dscp
    # flows of the class that no job names stay in the class's own queue
    unregistered = run_packet(flows, tcp("10.0.0.1", "10.0.0.3"))
    assert unregistered.packet["ip_dscp"] == 0  # best-effort: no rule names them
    per_flow = make_policy({**CLASSES, "training": {**CLASSES["training"], "share": "per-flow"}})
    verdict = run_packet(plan_switch(per_flow, {}, None, [a]).flows, tcp("10.0.0.1", "10.0.0.2"))
    assert (verdict.queue_id, verdict.packet["ip_dscp"]) == (1, 26)


def test_the_marking_table_does_not_change_when_jobs_come_and_go() -> None:
    def marks(jobs: Sequence[JobSpec]) -> set[object]:
        return {f for f in plan_switch(POLICY, {}, None, jobs).flows if f.table_id == tables.MARK}

    assert marks([]) == marks([job("a")]) == marks([job(f"j{i}") for i in range(12)])


def test_the_switch_plan_carries_the_job_queues_on_every_port() -> None:
    inputs = SwitchInputs(1, (PortState(1, "s1-eth1", G), PortState(2, "s1-eth2", 100 * M)))
    switch = plan(POLICY, [job("a", 3)], inputs)
    for port in ("s1-eth1", "s1-eth2"):
        assert any(q.jobs == ("a",) for q in switch.qos[port].queues)
    slow = {q.jobs: q for q in switch.qos["s1-eth2"].queues}
    assert slow[("a",)].min_bps == 70 * M * 3 // 4


def test_class_counters_count_job_queues_for_their_class() -> None:
    flows = plan_switch(POLICY, {}, None, [job("a")]).flows
    (slot_mark, *_) = [
        f
        for f in flows
        if f.table_id == tables.MARK
        and any(
            m.name == "metadata"
            and m.value == tables.class_metadata(job_slots(POLICY)["training"][0].queue_id)
            for m in f.match
        )
    ]
    counted = class_counters(
        POLICY, [FlowCounters(InstalledFlow(slot_mark.key, slot_mark.cookie), 3, 300)]
    )
    assert counted["training"] == (3, 300)
    assert queue_classes(POLICY)[job_slots(POLICY)["training"][-1].queue_id] == "training"


def test_share_must_be_per_flow_or_per_job() -> None:
    with pytest.raises(PolicyError) as info:
        make_policy({**CLASSES, "training": {**CLASSES["training"], "share": "per-host"}})
    assert "classes.training.share" in str(info.value)


def test_per_job_classes_need_free_dscps_for_their_queues() -> None:
    # 57 classes leave 7 DSCPs: not enough for one per-job class's 8 job queues
    classes: dict[str, dict[str, Any]] = {
        f"c{i}": {"priority": 2, "dscp": i, "min_rate": "8kbit"} for i in range(56)
    }
    classes["best-effort"] = {"priority": 2, "dscp": 63, "min_rate": "8kbit", "share": "per-job"}
    with pytest.raises(PolicyError) as info:
        make_policy(classes)
    assert "classes.best-effort.share" in str(info.value)
    assert "7 left" in str(info.value)
    del classes["c0"]  # 8 free now
    assert len(job_slots(make_policy(classes))["best-effort"]) == MAX_JOB_QUEUES


def test_two_per_job_classes_get_disjoint_queues_and_dscps() -> None:
    policy = make_policy({**CLASSES, "best-effort": {**CLASSES["best-effort"], "share": "per-job"}})
    slots = [s for class_slots in job_slots(policy).values() for s in class_slots]
    assert len(slots) == 2 * MAX_JOB_QUEUES
    assert len({s.queue_id for s in slots}) == len({s.dscp for s in slots}) == len(slots)
    assert max(s.queue_id for s in slots) < tables.CLASS_METADATA_MASK


def test_the_dry_run_names_the_jobs_of_each_job_queue() -> None:
    from controller.pipeline.describe import format_queue

    qos = plan_port_qos(POLICY, "p", None, [job("a"), job("b")])
    texts = [format_queue(q) for q in qos.queues]
    assert sum(t.endswith(", jobs a") for t in texts) == 1
    assert sum(t.endswith(", jobs b") for t in texts) == 1
    assert format_queue(qos.queues[0]).endswith("dscp 46")
