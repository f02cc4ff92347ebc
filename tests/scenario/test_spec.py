"""Scenario files: the shipped ones load; a broken one names every field at fault and why."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from flowlane_bench.suite.spec import (
    AllReduceWorkload,
    BulkWorkload,
    InferenceWorkload,
    Mode,
    ProbeWorkload,
    ScenarioError,
    load_scenario,
    parse_scenario,
    scenario_files,
)

from tests.support.scenarios import SHIPPED_SCENARIOS

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "mininet" / "scenarios"
SCENARIO_FILES = sorted(SCENARIOS.glob("*.yaml"))
ISOLATION_POLICY = REPO / "policies" / "scenarios" / "isolation.yaml"
FABRIC_RATES = {
    "collide": "10Mbit",
    "failover": "20Mbit",
    "jobs-fabric": "10Mbit",
    "jobs-share": "30Mbit",
    "jobs-weights": "30Mbit",
}
SHIPPED_MODES = {
    "collide": [Mode.STP, Mode.ECMP, Mode.FLOWLANE],
    "failover": [Mode.STP, Mode.ECMP, Mode.FLOWLANE],
    "leafspine": [Mode.FIFO, Mode.STATIC, Mode.STP, Mode.ECMP, Mode.FLOWLANE],
    "jobs-fabric": [Mode.ECMP, Mode.PERFLOW, Mode.FLOWLANE],
    "jobs-share": [Mode.FIFO, Mode.STATIC, Mode.PERFLOW, Mode.FLOWLANE],
    "jobs-weights": [Mode.PERFLOW, Mode.FLOWLANE],
}

BASE: dict[str, Any] = {
    "name": "probe",
    "description": "two training flows and an inference client on one switch",
    "topology": {"kind": "single", "hosts": ["train1", "train2", "infer1", "server"]},
    "policy": str(ISOLATION_POLICY),  # absolute: repo / policy is the policy itself
    "bottleneck": "s1-eth4",
    "workloads": [
        {
            "name": "training",
            "kind": "bulk",
            "flows": [{"src": "train1", "dst": "server"}, {"src": "train2", "dst": "server"}],
        },
        {
            "name": "inference",
            "kind": "inference",
            "clients": ["infer1"],
            "servers": ["server"],
            "rate": 100,
        },
    ],
}

POLICY = """\
classes:
  inference:   {priority: 0, dscp: 46, min_rate: 20%}
  training:    {priority: 1, dscp: 26, min_rate: 70%}
  best-effort: {priority: 2, dscp: 0,  min_rate: 10%}
default_class: best-effort
ports:
  overrides:
    s1-eth4: 50Mbit
"""


@pytest.fixture
def document() -> dict[str, Any]:
    return copy.deepcopy(BASE)


def write(directory: Path, document: object, stem: str = "probe") -> Path:
    path = directory / f"{stem}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def errors(path: Path, repo: Path) -> list[tuple[str, str]]:
    with pytest.raises(ScenarioError) as info:
        load_scenario(path, repo)
    assert str(path) in str(info.value)
    assert f"{len(info.value.errors)} error(s)" in str(info.value)
    return [(error.path, error.message) for error in info.value.errors]


def only_error(path: Path, repo: Path) -> tuple[str, str]:
    found = errors(path, repo)
    assert len(found) == 1, found
    return found[0]


# --------------------------------------------------------------------------------------------
# The shipped scenarios
# --------------------------------------------------------------------------------------------


def test_the_scenarios_are_shipped() -> None:
    assert list(scenario_files(SCENARIOS)) == list(SHIPPED_SCENARIOS)
    assert scenario_files(SCENARIOS)["incast"] == SCENARIOS / "incast.yaml"


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=lambda p: p.stem)
def test_every_shipped_scenario_loads(path: Path) -> None:
    loaded = load_scenario(path, REPO)
    scenario = loaded.scenario
    assert scenario.name == path.stem
    assert loaded.source == path
    assert scenario.policy == Path("policies/scenarios") / f"{path.stem}.yaml"
    assert set(loaded.policy_document["classes"]) == set(loaded.policy.classes)
    rate = FABRIC_RATES.get(path.stem, "50Mbit")
    assert loaded.policy_document["ports"]["overrides"][scenario.bottleneck] == rate
    plan = scenario.plan()
    assert scenario.bottleneck in plan.switch_ports()
    assert scenario.bottleneck in loaded.policy.ports.overrides
    assert loaded.policy.ports.configured_rate(scenario.bottleneck).bps == int(rate[:2]) * 10**6
    assert scenario.inference and scenario.training
    assert scenario.modes == SHIPPED_MODES.get(path.stem, [Mode.FIFO, Mode.STATIC, Mode.FLOWLANE])
    hosts = set(plan.host_names)
    for workload in scenario.workloads:
        if isinstance(workload, InferenceWorkload):
            assert set(workload.clients) | set(workload.servers) <= hosts
        elif isinstance(workload, BulkWorkload | ProbeWorkload):
            assert {end for f in workload.flows for end in (f.src, f.dst)} <= hosts
        else:
            assert set(workload.workers) <= hosts


@pytest.mark.parametrize(
    ("name", "faces"),
    [
        ("isolation", "server"),
        ("incast", "server"),
        ("allreduce", "s1"),
        ("leafspine", "spine2"),
    ],
)
def test_shipped_bottlenecks_face_what_their_policies_say(name: str, faces: str) -> None:
    scenario = load_scenario(SCENARIOS / f"{name}.yaml", REPO).scenario
    assert scenario.plan().switch_ports()[scenario.bottleneck] == faces


def test_shipped_values_are_parsed_with_units() -> None:
    scenario = load_scenario(SCENARIOS / "allreduce.yaml", REPO).scenario
    assert scenario.duration == 20.0
    assert scenario.ramp == 3.0
    ring = scenario.workloads[0]
    assert isinstance(ring, AllReduceWorkload)
    assert ring.size == 4 * 1024 * 1024
    assert ring.compute == pytest.approx(0.05)
    probe = scenario.workloads[1]
    assert isinstance(probe, InferenceWorkload)
    assert probe.response_size == 4096
    assert probe.burst is not None
    assert (probe.burst.active, probe.burst.quiet) == (1.0, 1.0)


# --------------------------------------------------------------------------------------------
# A valid probe and its defaults
# --------------------------------------------------------------------------------------------


def test_probe_loads_with_defaults(tmp_path: Path, document: dict[str, Any]) -> None:
    loaded = load_scenario(write(tmp_path, document), tmp_path)
    scenario = loaded.scenario
    assert scenario.duration == 20.0
    assert scenario.ramp == 2.0
    assert scenario.modes == [Mode.FIFO, Mode.STATIC, Mode.FLOWLANE]
    bulk = scenario.workloads[0]
    assert isinstance(bulk, BulkWorkload)
    assert bulk.first_port == 5201
    assert [w.name for w in scenario.training] == ["training"]
    assert [w.name for w in scenario.inference] == ["inference"]


def test_policy_relative_to_repo(tmp_path: Path, document: dict[str, Any]) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "mine.yaml").write_text(POLICY, encoding="utf-8")
    document["policy"] = "policies/mine.yaml"
    loaded = load_scenario(write(tmp_path, document), tmp_path)
    assert loaded.policy.default_class == "best-effort"
    assert loaded.policy_document["default_class"] == "best-effort"


def test_udp_bulk_with_a_rate_defaults_to_the_rocev2_port(
    tmp_path: Path, document: dict[str, Any]
) -> None:
    document["workloads"][0] |= {"protocol": "udp", "udp_rate": "20M"}
    bulk = load_scenario(write(tmp_path, document), tmp_path).scenario.workloads[0]
    assert isinstance(bulk, BulkWorkload)
    assert bulk.first_port == 4791


# --------------------------------------------------------------------------------------------
# Errors: one field at a time
# --------------------------------------------------------------------------------------------


def test_unknown_host_in_a_workload(tmp_path: Path, document: dict[str, Any]) -> None:
    document["workloads"][1]["clients"] = ["infer1", "nobody"]
    path, message = only_error(write(tmp_path, document), tmp_path)
    assert path == "workloads[1].clients[1]"
    assert "no host 'nobody' in the topology" in message
    assert "train1, train2, infer1, server" in message


def test_unknown_host_in_a_bulk_flow(tmp_path: Path, document: dict[str, Any]) -> None:
    document["workloads"][0]["flows"][1]["dst"] = "ghost"
    assert only_error(write(tmp_path, document), tmp_path)[0] == "workloads[0].flows[1].dst"


def test_duplicate_workload_names(tmp_path: Path, document: dict[str, Any]) -> None:
    document["workloads"][1]["name"] = "training"
    assert only_error(write(tmp_path, document), tmp_path) == (
        "workloads[1].name",
        "'training' is used twice",
    )


def test_bottleneck_port_not_in_the_topology(tmp_path: Path, document: dict[str, Any]) -> None:
    document["bottleneck"] = "s1-eth9"
    assert only_error(write(tmp_path, document), tmp_path) == (
        "bottleneck",
        "no port 's1-eth9' in the topology",
    )


def test_bottleneck_without_a_policy_rate(tmp_path: Path, document: dict[str, Any]) -> None:
    document["bottleneck"] = "s1-eth1"
    path, message = only_error(write(tmp_path, document), tmp_path)
    assert path == "bottleneck"
    assert "the policy sets no rate for 's1-eth1'" in message
    assert "ports.overrides" in message


def test_policy_override_naming_a_port_outside_the_topology(
    tmp_path: Path, document: dict[str, Any]
) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY + "    s2-eth1: 1Gbit\n", encoding="utf-8")
    document["policy"] = "policy.yaml"
    assert only_error(write(tmp_path, document), tmp_path) == (
        "policy",
        "ports.overrides names 's2-eth1', not a port of this topology",
    )


def test_no_inference_workload(tmp_path: Path, document: dict[str, Any]) -> None:
    document["workloads"][1] = {
        "name": "more-training",
        "kind": "allreduce",
        "workers": ["infer1", "server"],
        "size": "1MiB",
    }
    assert only_error(write(tmp_path, document), tmp_path) == (
        "workloads",
        "needs an inference workload (the latency probe)",
    )


def test_no_training_workload(tmp_path: Path, document: dict[str, Any]) -> None:
    second = copy.deepcopy(document["workloads"][1]) | {"name": "second", "clients": ["train1"]}
    document["workloads"][0] = second
    assert only_error(write(tmp_path, document), tmp_path) == (
        "workloads",
        "needs a training workload (bulk or allreduce)",
    )


def test_udp_without_udp_rate(tmp_path: Path, document: dict[str, Any]) -> None:
    document["workloads"][0]["protocol"] = "udp"
    path, message = only_error(write(tmp_path, document), tmp_path)
    assert path.startswith("workloads[0]")
    assert "udp flows need 'udp_rate'" in message


def test_udp_rate_on_tcp(tmp_path: Path, document: dict[str, Any]) -> None:
    document["workloads"][0]["udp_rate"] = "20M"
    path, message = only_error(write(tmp_path, document), tmp_path)
    assert path.startswith("workloads[0]")
    assert message == "'udp_rate' applies to udp flows only"


def test_bulk_flow_to_itself(tmp_path: Path, document: dict[str, Any]) -> None:
    document["workloads"][0]["flows"][0]["dst"] = "train1"
    assert only_error(write(tmp_path, document), tmp_path) == (
        "workloads[0].flows[0]",
        "src and dst are one host",
    )


def test_allreduce_worker_twice_in_the_ring(tmp_path: Path, document: dict[str, Any]) -> None:
    document["workloads"][0] = {
        "name": "ring",
        "kind": "allreduce",
        "workers": ["train1", "train2", "train1"],
        "size": "1MiB",
    }
    assert only_error(write(tmp_path, document), tmp_path) == (
        "workloads[0].workers",
        "a worker appears twice in the ring",
    )


def test_mode_listed_twice(tmp_path: Path, document: dict[str, Any]) -> None:
    document["modes"] = ["fifo", "flowlane", "fifo"]
    assert only_error(write(tmp_path, document), tmp_path) == ("modes", "a mode is listed twice")


def test_unknown_mode(tmp_path: Path, document: dict[str, Any]) -> None:
    document["modes"] = ["fifo", "turbo"]
    path, message = only_error(write(tmp_path, document), tmp_path)
    assert path == "modes[1]"
    assert "fifo" in message and "flowlane" in message


def test_unknown_field(tmp_path: Path, document: dict[str, Any]) -> None:
    document["colour"] = "blue"
    assert only_error(write(tmp_path, document), tmp_path)[0] == "colour"


def test_name_differs_from_the_file_name(tmp_path: Path, document: dict[str, Any]) -> None:
    path = write(tmp_path, document, stem="other")
    assert only_error(path, tmp_path) == ("name", "'probe' differs from the file name 'other'")


def test_every_cross_field_error_at_once(tmp_path: Path, document: dict[str, Any]) -> None:
    document["workloads"][1]["servers"] = ["nobody"]
    document["workloads"][1]["name"] = "training"
    document["bottleneck"] = "s1-eth7"
    found = dict(errors(write(tmp_path, document), tmp_path))
    assert set(found) == {"workloads[1].servers[0]", "workloads[1].name", "bottleneck"}


def test_structural_errors_are_all_reported(tmp_path: Path, document: dict[str, Any]) -> None:
    document["duration"] = "soon"
    document["workloads"][1]["rate"] = -1
    document["topology"]["hosts"] = ["ok", "Bad_Name"]
    paths = [p for p, _ in errors(write(tmp_path, document), tmp_path)]
    assert "duration" in paths
    assert "workloads[1].inference.rate" in paths
    assert "topology.single.hosts[1]" in paths


# --------------------------------------------------------------------------------------------
# Errors: the document and the policy file
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind"), [("- a\n- b\n", "list"), ("just text\n", "str"), ("", "empty")]
)
def test_document_that_is_not_a_mapping(tmp_path: Path, text: str, kind: str) -> None:
    path = tmp_path / "probe.yaml"
    path.write_text(text, encoding="utf-8")
    assert only_error(path, tmp_path) == ("(document)", f"a scenario is a mapping, got {kind}")


def test_yaml_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "probe.yaml"
    path.write_text("name: probe\ntopology: {kind: single\n", encoding="utf-8")
    where, message = only_error(path, tmp_path)
    assert where.startswith("line ")
    assert "column" in where
    assert message.startswith("invalid YAML")


def test_missing_scenario_file(tmp_path: Path) -> None:
    where, message = only_error(tmp_path / "absent.yaml", tmp_path)
    assert where == "(file)"
    assert "cannot read" in message


def test_bad_policy_file_errors_are_prefixed_with_policy(
    tmp_path: Path, document: dict[str, Any]
) -> None:
    bad = POLICY.replace("priority: 1", "priority: 9").replace("default_class: best-effort", "")
    (tmp_path / "policy.yaml").write_text(bad, encoding="utf-8")
    document["policy"] = "policy.yaml"
    found = errors(write(tmp_path, document), tmp_path)
    assert found, found
    assert all(path.startswith("policy (") for path, _ in found), found
    paths = {path for path, _ in found}
    assert "policy (classes.training.priority)" in paths
    assert "policy (default_class)" in paths


def test_missing_policy_file(tmp_path: Path, document: dict[str, Any]) -> None:
    document["policy"] = "nowhere.yaml"
    path, message = only_error(write(tmp_path, document), tmp_path)
    assert path == "policy ((file))"
    assert "cannot read" in message


def test_parse_scenario_skips_the_file_name_check() -> None:
    document = copy.deepcopy(BASE)
    loaded = parse_scenario(document, "memory", REPO)
    assert loaded.scenario.name == "probe"
    assert loaded.source is None
