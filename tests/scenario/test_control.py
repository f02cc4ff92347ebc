"""The control phase's plan: sinks beside the senders, flows that keep off inference's ports."""

from __future__ import annotations

from pathlib import Path

import pytest
from flowlane_bench.suite.control import (
    ControlFlow,
    control_flows,
    control_pairs,
    control_plan,
    host_switch,
    sinks,
    with_rates,
)
from flowlane_bench.suite.report import ALONE, PhaseResult, TrainingFlow
from flowlane_bench.suite.spec import BulkFlow, BulkWorkload, Scenario, load_scenario
from flowlane_bench.suite.topology import single, with_hosts

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "mininet" / "scenarios"


def shipped(name: str) -> Scenario:
    return load_scenario(SCENARIOS / f"{name}.yaml", REPO).scenario


def alone(*flows: tuple[str, str, float]) -> PhaseResult:
    return PhaseResult(
        phase=ALONE,
        policy="flowlane mode of p.yaml",
        training_flows=[
            TrainingFlow(workload=w, label=label, goodput_bps=g) for w, label, g in flows
        ],
    )


def inference_ports(scenario: Scenario, plan_ports: dict[str, str]) -> set[str]:
    """Every switch port facing an inference client or server: what control must not use."""
    hosts = {h for w in scenario.inference for h in (*w.clients, *w.servers)}
    return {port for port, peer in plan_ports.items() if peer in hosts}


def test_with_hosts_keeps_every_port_name_and_address() -> None:
    plan = single(["a", "b"])
    grown = with_hosts(plan, [("sink1", "s1")])
    assert grown.switch_ports() == {**plan.switch_ports(), "s1-eth3": "sink1"}
    assert grown.hosts[:2] == plan.hosts
    assert (grown.hosts[2].ip, grown.hosts[2].mac) == ("10.0.0.3", "00:00:00:00:00:03")
    with pytest.raises(ValueError, match="no switch s9"):
        with_hosts(plan, [("sink1", "s9")])
    with pytest.raises(ValueError, match="unique"):
        with_hosts(plan, [("a", "s1")])


def test_isolation_sends_training_to_a_sink_on_its_own_port() -> None:
    scenario = shipped("isolation")
    plan = scenario.plan()
    assert sinks(scenario, plan) == {"s1": "sink1"}
    grown = control_plan(scenario, plan)
    ports = grown.switch_ports()
    assert ports["s1-eth5"] == "sink1"
    assert {port: ports[port] for port in plan.switch_ports()} == plan.switch_ports()
    flows = control_flows(scenario, plan)
    assert [(f.label, f.src, f.port, f.protocol, f.rate) for f in flows] == [
        ("train1->server@sink1", "train1", 5201, "tcp", None),
        ("train2->server@sink1", "train2", 5202, "tcp", None),
    ]
    # The bottleneck and every port facing inference's hosts carry no control flow.
    used = {port for port, peer in ports.items() if peer in {"sink1", "train1", "train2"}}
    assert scenario.bottleneck not in used
    assert not used & inference_ports(scenario, ports)


def test_leaf_spine_sinks_stay_on_the_senders_leaves() -> None:
    """A control flow never takes an uplink: inference may hash onto any of them."""
    scenario = shipped("collide")
    plan = scenario.plan()
    by_switch = sinks(scenario, plan)
    assert by_switch == {f"leaf{i}": f"sink{i}" for i in range(1, 5)}
    grown = control_plan(scenario, plan)
    for flow in control_flows(scenario, plan):
        assert host_switch(grown, flow.sink) == host_switch(plan, flow.src)
    # Sinks are linked after the uplinks: leaf1-eth3/eth4 still face the spines.
    assert grown.switch_ports()["leaf1-eth3"] == "spine1"
    assert grown.switch_ports()["leaf1-eth5"] == "sink1"


def test_udp_keeps_its_rate_and_clashing_ports_move_up() -> None:
    scenario = shipped("leafspine")  # h1->h4 and h2->h5 TCP, h1->h5 UDP 8M: all on leaf1
    flows = control_flows(scenario, scenario.plan())
    assert {f.sink for f in flows} == {"sink1"}
    assert [(f.workload, f.port, f.protocol, f.rate) for f in flows] == [
        ("training", 5201, "tcp", None),
        ("training", 5202, "tcp", None),
        ("rocev2", 4791, "udp", "8M"),
    ]
    assert len({f.port for f in flows}) == len(flows)  # one iperf3 server each


def test_a_port_taken_on_the_same_sink_moves_to_the_next_free_one() -> None:
    """Two RoCEv2 workloads from one leaf both send to 4791: one sink serves one test per port."""
    base = shipped("leafspine")
    second = BulkWorkload(
        kind="bulk",
        name="rocev2-b",
        protocol="udp",
        udp_rate="4M",
        flows=[BulkFlow(src="h2", dst="h6")],
    )
    scenario = base.model_copy(update={"workloads": [*base.workloads, second]})
    flows = control_flows(scenario, scenario.plan())
    assert [(f.workload, f.port) for f in flows if f.protocol == "udp"] == [
        ("rocev2", 4791),
        ("rocev2-b", 4792),
    ]
    assert all(f.port != 8000 for f in flows)  # nor the inference server's port


def test_allreduce_workers_become_one_stream_each() -> None:
    scenario = shipped("allreduce")
    plan = scenario.plan()
    flows = control_flows(scenario, plan)
    assert [(f.stands_for, f.src, f.sink, f.port) for f in flows] == [
        ("rank0", "w1", "sink1", 29500),
        ("rank1", "w2", "sink1", 29501),
        ("rank2", "w3", "sink2", 29502),
        ("rank3", "w4", "sink2", 29503),
    ]
    # The dumbbell's middle link (both directions) carries nothing of control.
    assert all(host_switch(plan, f.src) == {"sink1": "s1", "sink2": "s2"}[f.sink] for f in flows)


def test_rates_come_from_the_alone_phase() -> None:
    scenario = shipped("leafspine")
    flows = control_flows(scenario, scenario.plan())
    paced = with_rates(
        flows,
        alone(
            ("training", "h1->h4", 21_000_000.4),
            ("training", "h2->h5", 20e6),
            ("rocev2", "h1->h5", 8e6),
        ),
    )
    assert [f.rate for f in paced] == ["21000000", "20000000", "8M"]
    assert [f.label for f in paced] == [f.label for f in flows]


def test_a_flow_missing_from_alone_cannot_be_paced() -> None:
    flow = ControlFlow("training", "a->b", "a", "sink1", 5201, "tcp")
    with pytest.raises(ValueError, match="training a->b: the alone phase has no goodput"):
        with_rates([flow], alone(("training", "other", 1e6)))
    with pytest.raises(ValueError, match="no goodput"):
        with_rates([flow], alone(("training", "a->b", 0.0)))


def test_pairs_to_ping_before_control() -> None:
    flows = control_flows(shipped("leafspine"), shipped("leafspine").plan())
    assert control_pairs(flows) == [("h1", "sink1"), ("h2", "sink1")]


def test_every_shipped_scenario_plans_a_control_phase() -> None:
    for path in sorted(SCENARIOS.glob("*.yaml")):
        scenario = load_scenario(path, REPO).scenario
        plan = scenario.plan()
        grown = control_plan(scenario, plan)
        flows = control_flows(scenario, plan)
        assert flows, path.stem
        ports = grown.switch_ports()
        sink_ports = {port for port, peer in ports.items() if peer.startswith("sink")}
        assert scenario.bottleneck not in sink_ports
        assert not sink_ports & set(plan.switch_ports()), path.stem
