"""A topology's MTU: from the scenario file to every link Mininet will make (jumbo frames)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from flowlane_bench.suite import topology
from flowlane_bench.suite.spec import ScenarioError, TopologySpec, load_scenario
from flowlane_bench.suite.topology import ETHERNET_MTU, JUMBO_MTU
from flowlane_bench.topologies import MtuIntf, PlannedTopo
from pydantic import TypeAdapter

from tests.scenario.test_spec import BASE

REPO = Path(__file__).resolve().parents[2]


def scenario_file(directory: Path, topology_fields: dict[str, Any]) -> Path:
    document = copy.deepcopy(BASE)
    document["topology"] |= topology_fields
    path = directory / "probe.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def test_a_plan_is_ethernet_unless_told() -> None:
    assert topology.single(["a", "b"]).mtu == ETHERNET_MTU == 1500
    assert topology.leaf_spine(2, 2, 1).mtu == ETHERNET_MTU


@pytest.mark.parametrize("mtu", [1499, 9001, 0])
def test_a_plan_refuses_an_mtu_out_of_range(mtu: int) -> None:
    with pytest.raises(ValueError, match="mtu must be 1500-9000"):
        topology.TopologyPlan((), (), (), mtu=mtu)


def test_the_control_phase_sinks_get_the_plan_mtu() -> None:
    plain = topology.single(["a", "b"])
    plan = topology.TopologyPlan(plain.switches, plain.hosts, plain.links, mtu=JUMBO_MTU)
    assert topology.with_hosts(plan, [("sink1", "s1")]).mtu == JUMBO_MTU


@pytest.mark.parametrize(
    "fields",
    [
        {"kind": "single", "hosts": ["a", "b"]},
        {"kind": "dumbbell", "left": ["a"], "right": ["b"]},
        {"kind": "leaf-spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 1},
    ],
    ids=lambda fields: fields["kind"],
)
def test_every_topology_kind_takes_an_mtu(fields: dict[str, Any]) -> None:
    spec = TypeAdapter(TopologySpec)
    assert spec.validate_python(fields).plan().mtu == ETHERNET_MTU
    jumbo = spec.validate_python(fields | {"mtu": 9000}).plan()
    assert jumbo.mtu == JUMBO_MTU
    assert jumbo.switch_ports() == spec.validate_python(fields).plan().switch_ports()


def test_a_scenario_file_sets_the_mtu(tmp_path: Path) -> None:
    loaded = load_scenario(scenario_file(tmp_path, {"mtu": 4096}), tmp_path)
    assert loaded.scenario.plan().mtu == 4096


def test_a_scenario_without_mtu_is_ethernet(tmp_path: Path) -> None:
    loaded = load_scenario(scenario_file(tmp_path, {}), tmp_path)
    assert loaded.scenario.plan().mtu == ETHERNET_MTU


@pytest.mark.parametrize("mtu", [1280, 9216])
def test_a_scenario_mtu_out_of_range_is_refused(tmp_path: Path, mtu: int) -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario(scenario_file(tmp_path, {"mtu": mtu}), tmp_path)
    assert [error.path for error in info.value.errors] == ["topology.single.mtu"]


def test_jobs_fabric_runs_jumbo_frames() -> None:
    """The training fabric's MTU, as AI fabrics run (docs/jobs.md, "Jumbo frames")."""
    loaded = load_scenario(REPO / "mininet" / "scenarios" / "jobs-fabric.yaml", REPO)
    assert loaded.scenario.plan().mtu == JUMBO_MTU


def test_mininet_links_carry_the_plan_mtu_to_both_ends() -> None:
    """Built as a graph only (no network): each link names the interface class and its MTU."""
    plain = topology.single(["a", "b"])
    jumbo = topology.TopologyPlan(plain.switches, plain.hosts, plain.links, mtu=JUMBO_MTU)
    for plan, expected in ((plain, None), (jumbo, JUMBO_MTU)):
        topo = PlannedTopo(plan=plan)
        for a, b in (("a", "s1"), ("b", "s1")):
            info = topo.linkInfo(a, b)
            assert info.get("mtu") == expected
            assert (info.get("intf") is MtuIntf) == (expected is not None)
