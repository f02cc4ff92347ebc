"""The scenario's fabric as the controller's Topology, its optimum, and traced paths."""

from __future__ import annotations

from pathlib import Path

import pytest
from flowlane_bench.suite import fabric
from flowlane_bench.suite.spec import load_scenario
from flowlane_bench.suite.topology import leaf_spine

from controller.fabric.model import Link, PortRef
from controller.fabric.optimum import Commodity, max_throughput

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "mininet" / "scenarios"
MBIT = 1_000_000


def loaded(name: str):  # type: ignore[no-untyped-def]
    return load_scenario(SCENARIOS / f"{name}.yaml", REPO)


def test_port_numbers_come_from_mininet_names() -> None:
    assert fabric.port_number("leaf1-eth3") == 3
    assert fabric.port_number("spine12-eth10") == 10
    with pytest.raises(ValueError, match="not a Mininet switch port name"):
        fabric.port_number("leaf1")


def test_the_collide_fabric_is_what_the_controller_should_discover() -> None:
    scenario = loaded("collide")
    plan = scenario.scenario.plan()
    topology = fabric.fabric_topology(plan, scenario.policy)
    assert topology.switches == {0x101, 0x102, 0x103, 0x104, 0x201, 0x202}
    # 4 leaves x 2 spines, each link both ways, all usable.
    assert len(topology.links) == 16 and topology.usable_links == topology.links
    assert Link(PortRef(0x101, 3), PortRef(0x201, 1)) in topology.links  # leaf1-eth3 -> spine1
    assert Link(PortRef(0x202, 4), PortRef(0x104, 4)) in topology.links  # spine2-eth4 -> leaf4
    assert len(topology.hosts) == 8
    h1 = topology.host_by_ip(0x0A000001)
    assert h1 is not None and h1.at == PortRef(0x101, 1) and h1.mac == 1
    h8 = topology.host_by_ip(0x0A000008)
    assert h8 is not None and h8.at == PortRef(0x104, 2)
    # Capacities are the policy's rates: 10 Mbit up and down the fabric, 10 Gbit elsewhere.
    assert topology.capacity(PortRef(0x101, 3)) == 10 * MBIT
    assert topology.capacity(PortRef(0x202, 1)) == 10 * MBIT
    assert topology.capacity(PortRef(0x101, 1)) == 10_000 * MBIT
    assert topology.default_capacity_bps == 10_000 * MBIT


def test_commodities_of_collide() -> None:
    scenario = loaded("collide")
    plan = scenario.scenario.plan()
    commodities = fabric.training_commodities(scenario.scenario, plan)
    assert len(commodities) == 8
    assert commodities[0] == Commodity(PortRef(0x101, 1), PortRef(0x102, 1), None)  # h1 -> h3
    udp = [c for c in commodities if c.limit_bps is not None]
    assert [c.limit_bps for c in udp] == [9.5 * MBIT, 9.5 * MBIT]
    # Every leaf sends two flows and receives two: a perfect placement fills each link once.
    for leaf in (0x101, 0x102, 0x103, 0x104):
        assert sum(c.src.dpid == leaf for c in commodities) == 2
        assert sum(c.dst.dpid == leaf for c in commodities) == 2


def test_the_collide_optimum_fills_every_uplink() -> None:
    assert fabric.optimum_bps(loaded("collide")) == pytest.approx(80 * MBIT, rel=1e-6)


def test_the_failover_optimum_before_and_after_a_failure() -> None:
    scenario = loaded("failover")
    plan = scenario.scenario.plan()
    topology = fabric.fabric_topology(plan, scenario.policy)
    training = fabric.training_commodities(scenario.scenario, plan)
    assert max_throughput(topology, training) == pytest.approx(40 * MBIT, rel=1e-6)
    local = fabric.without_links(topology, plan, [("leaf1", "spine2")])
    assert max_throughput(local, training) == pytest.approx(20 * MBIT, rel=1e-6)
    remote = fabric.without_links(topology, plan, [("spine2", "leaf2")])
    assert max_throughput(remote, training) == pytest.approx(20 * MBIT, rel=1e-6)
    assert len(local.links) == len(topology.links) - 2


def test_the_leafspine_optimum_counts_both_uplinks() -> None:
    # Two TCP flows and an 8 Mbit/s UDP flow leave leaf1 over two 50 Mbit uplinks.
    assert fabric.optimum_bps(loaded("leafspine")) == pytest.approx(100 * MBIT, rel=1e-6)


def test_the_probe_is_carried_at_its_wire_rate() -> None:
    scenario = loaded("failover")
    plan = scenario.scenario.plan()
    (probe,) = scenario.scenario.probes
    commodity = fabric.probe_commodity(probe, plan, probe.flows[0])
    assert commodity.src == PortRef(0x101, 3) and commodity.dst == PortRef(0x102, 1)
    assert commodity.limit_bps == 1000 * (64 + 42) * 8


@pytest.mark.parametrize(("text", "bps"), [("19M", 19e6), ("500k", 5e5), ("1.5G", 1.5e9), ("7", 7)])
def test_iperf_rates_are_decimal(text: str, bps: float) -> None:
    assert fabric.iperf_rate_bps(text) == bps


def test_an_unreadable_iperf_rate() -> None:
    with pytest.raises(ValueError, match="not an iperf3 rate"):
        fabric.iperf_rate_bps("fast")


def test_raised_ports_are_the_burst_path() -> None:
    plan = leaf_spine(2, 2, 1)  # leaf1: h1 on 1, spine1 on 2, spine2 on 3
    before = {"leaf1": {1: 5, 2: 10, 3: 10}, "spine2": {1: 0, 2: 7}, "leaf2": {1: 3}}
    after = {
        "leaf1": {1: 6, 2: 12, 3: 310},  # LLDP on eth2, the burst on eth3
        "spine2": {1: 1, 2: 307},
        "leaf2": {1: 303},
        "spine1": {1: 2, 2: 2},
    }
    path = fabric.raised_ports(plan, before, after, 300)
    assert path == ["leaf1-eth3", "leaf2-eth1", "spine2-eth2"]


def test_the_first_crossing_pair_is_chosen() -> None:
    plan = leaf_spine(2, 2, 2)  # leaf uplinks: eth3 (spine1), eth4 (spine2)
    paths = [
        ["leaf1-eth3", "spine1-eth2", "leaf2-eth1"],
        ["leaf1-eth4", "spine2-eth2", "leaf2-eth2"],
    ]
    assert fabric.first_crossing(paths, plan, ("leaf1", "spine2")) == 1
    assert fabric.first_crossing(paths, plan, ("spine1", "leaf2")) == 0
    assert fabric.first_crossing(paths[:1], plan, ("leaf1", "spine2")) == 0  # none: the first


def test_the_rings_optimum_counts_each_ring_once_at_a_links_rate() -> None:
    """jobs-fabric's two rings over two spines can each have links of their own: each moves at
    one 10 Mbit/s link's rate, and a run measures a ring's rate once, not per hop."""
    assert fabric.optimum_bps(loaded("jobs-fabric")) == pytest.approx(20 * MBIT)


def test_the_late_job_variant_runs_on_jobs_fabrics_fabric_and_policy() -> None:
    """The variant's figures are read against jobs-fabric's: same topology (MTU included),
    policy, inference and ring sizes; only the rings' hosts and ring-b's start differ."""
    base = loaded("jobs-fabric").scenario
    late = load_scenario(SCENARIOS / "variants" / "jobs-late.yaml", REPO).scenario
    assert late.topology == base.topology and late.policy == base.policy
    assert fabric.optimum_bps(
        load_scenario(SCENARIOS / "variants" / "jobs-late.yaml", REPO)
    ) == pytest.approx(20 * MBIT)
    assert late.inference == base.inference
    assert [(w.size, w.compute) for w in late.training] == [
        (w.size, w.compute) for w in base.training
    ]
