"""Switches alike share what they plan: the same plan as each would make alone.

After a policy change every switch re-plans at once; with the policy's ``BasePlans`` the
ports' queues are planned once per speed (and per override) and the flow diff once per
pair of plans.  Nothing shared may differ from what one switch planning alone gets.
"""

from __future__ import annotations

from controller.pipeline.diff import diff_flows
from controller.pipeline.plan import PortState, SwitchInputs, plan
from controller.pipeline.planner import BasePlans
from controller.policy.jobs import JobSpec
from controller.policy.load import parse_policy
from controller.policy.model import Policy

G = 1_000_000_000


def _policy(flipped: int | None = None) -> Policy:
    return parse_policy(
        {
            "classes": {
                "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
                "training": {"priority": 1, "dscp": 26, "min_rate": "70%", "share": "per-job"},
                "best-effort": {"priority": 2, "dscp": 0, "min_rate": "10%"},
            },
            "default_class": "best-effort",
            "rules": [
                {
                    "name": f"service-{i}",
                    "match": {"tcp_dst": 10_000 + i},
                    "class": "training" if (i % 2 == 0) != (i == flipped) else "inference",
                }
                for i in range(12)
            ],
            "ports": {"rate": "1Gbit", "overrides": {"s3-eth1": "100Mbit"}},
        }
    )


JOBS = (
    JobSpec.model_validate(
        {"name": "llm", "class": "training", "endpoints": [{"ipv4": "10.0.0.1"}]}
    ),
)


def _switch(number: int, speed: int | None) -> SwitchInputs:
    ports = (
        PortState(1, f"s{number}-eth1", speed),
        PortState(2, f"s{number}-eth2", 10 * G),
        PortState(0xFFFFFFFE, f"s{number}", None),
    )
    return SwitchInputs(number, ports)


def test_shared_queues_are_each_switchs_own() -> None:
    policy = _policy()
    shared = BasePlans(policy)
    switches = [_switch(1, G), _switch(2, G), _switch(3, G), _switch(4, 100_000_000)]
    for jobs in ((), JOBS):
        for inputs in switches:
            alone = plan(policy, jobs, inputs)
            together = plan(policy, jobs, inputs, shared)
            assert together == alone
            assert {name: qos.port_name for name, qos in together.qos.items()} == {
                port.name: port.name for port in inputs.ports
            }
    # The override of s3-eth1 is its own, whatever was planned for s1-eth1 at that speed.
    assert plan(policy, (), switches[2], shared).qos["s3-eth1"].rate_bps == 100_000_000


def test_a_shared_diff_is_the_diff() -> None:
    before, after = _policy(), _policy(flipped=3)
    old = plan(before, (), _switch(1, G), BasePlans(before)).desired.flows
    new = plan(after, (), _switch(1, G), BasePlans(after)).desired.flows
    first = diff_flows(old, new)
    assert diff_flows(old, new) is first  # the second switch's diff: the first one's
    assert first == diff_flows(list(old), list(new))  # the general diff agrees
    assert first.add and not first.delete
