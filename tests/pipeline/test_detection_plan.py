"""The pipeline with detection on: what is counted, with which origin, and what is not."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from controller.flowid import FlowId
from controller.pipeline import tables
from controller.pipeline.flows import Learn, Owner, cookie_owner
from controller.pipeline.planner import Origin, learned_origin, plan_switch
from controller.pipeline.simulate import run_packet
from controller.policy.jobs import JobSpec
from controller.policy.load import load_policy_file, parse_policy

REPO = Path(__file__).resolve().parents[2]
DETECTION = load_policy_file(REPO / "policies" / "examples" / "detection.yaml")
WITH_RULES = parse_policy(
    {
        "classes": {
            "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
            "training": {"priority": 1, "dscp": 26, "min_rate": "70%"},
        },
        "default_class": "inference",
        "rules": [
            {"name": "rocev2", "match": {"udp_dst": 4791}, "class": "training"},
            {"name": "marked", "match": {"ip_dscp": 26}, "class": "training"},
        ],
        "detection": {"elephant": {"bytes": "10MiB", "class": "training"}},
    }
)


def ip(text: str) -> int:
    return int(ipaddress.IPv4Address(text))


def learns(entry_instructions: object) -> list[Learn]:
    found = []
    for instruction in entry_instructions:  # type: ignore[attr-defined]
        for action in getattr(instruction, "actions", ()):
            if isinstance(action, Learn):
                found.append(action)
    return found


def test_unclaimed_tcp_is_counted_with_the_default_origin() -> None:
    packet = {
        "eth_type": 0x0800,
        "ip_proto": 6,
        "ipv4_src": ip("10.0.0.1"),
        "ipv4_dst": ip("10.0.0.2"),
        "tcp_src": 40000,
        "tcp_dst": 5201,
    }
    verdict = run_packet(plan_switch(DETECTION, {}).flows, packet)
    entry = next(f for f in plan_switch(DETECTION, {}).flows if f.key == verdict.trace[0])
    (learn,) = learns(entry.instructions)
    assert learn.table_id == tables.COUNT and learn.idle_timeout == 10
    assert learned_origin(learn.cookie) == (Origin.DEFAULT, 0)
    assert verdict.packet["ip_dscp"] == 46


def test_rule_entries_count_with_their_rule_index_and_non_l4_rules_do_not() -> None:
    flows = plan_switch(WITH_RULES, {}).flows
    origins = {learned_origin(ln.cookie) for f in flows for ln in learns(f.instructions)}
    assert (Origin.RULE, 0) in origins  # rocev2: UDP, counted
    assert (Origin.RULE, 1) not in origins  # ip_dscp only: any protocol, not counted


def test_jobs_count_tcp_and_udp_and_keep_other_ip_one_priority_below() -> None:
    job = JobSpec.model_validate(
        {
            "name": "j",
            "class": "training",
            "endpoints": [{"ipv4": "10.0.0.1"}, {"ipv4": "10.0.0.2"}],
        }
    )
    flows = [f for f in plan_switch(DETECTION, {}, None, [job]).flows if f.owner is Owner.JOB]
    counted = [f for f in flows if learns(f.instructions)]
    assert {learned_origin(learns(f.instructions)[0].cookie) for f in counted} == {(Origin.JOB, 0)}
    icmp = {
        "eth_type": 0x0800,
        "ip_proto": 1,
        "ipv4_src": ip("10.0.0.1"),
        "ipv4_dst": ip("10.0.0.2"),
    }
    verdict = run_packet(plan_switch(DETECTION, {}, None, [job]).flows, icmp)
    assert verdict.packet["ip_dscp"] == 26
    assert verdict.trace[0].priority == tables.job_priority(0) - 1


def test_overrides_are_exact_and_keep_counting() -> None:
    flow = FlowId(0x0800, 6, ip("10.0.0.1"), ip("10.0.0.2"), 40000, 5201)
    plan = plan_switch(DETECTION, {}, {flow: "training"})
    (override,) = [f for f in plan.flows if cookie_owner(f.cookie) is Owner.DETECTOR]
    assert override.priority == tables.OVERRIDE_PRIORITY
    assert learns(override.instructions)
    packet = {
        "eth_type": 0x0800,
        "ip_proto": 6,
        "ipv4_src": flow.src,
        "ipv4_dst": flow.dst,
        "tcp_src": 40000,
        "tcp_dst": 5201,
    }
    assert run_packet(plan.flows, packet).packet["ip_dscp"] == 26
    other = {**packet, "tcp_src": 40001}
    assert run_packet(plan.flows, other).packet["ip_dscp"] == 46
