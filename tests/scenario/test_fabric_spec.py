"""Fabric scenarios' fields: modes that need loops, link events, the probe, the references.

Every error names the field at fault, the way policy errors do.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from flowlane_bench.suite.spec import (
    LinkState,
    Mode,
    ProbeWorkload,
    Reference,
    ScenarioError,
    load_scenario,
)

REPO = Path(__file__).resolve().parents[2]
FAILOVER_POLICY = REPO / "policies" / "scenarios" / "failover.yaml"

FABRIC: dict[str, Any] = {
    "name": "fab",
    "description": "two leaves, two spines, three hosts per leaf",
    "topology": {"kind": "leaf-spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 3},
    "policy": str(FAILOVER_POLICY),
    "bottleneck": "leaf1-eth5",
    "duration": "10s",
    "ramp": "2s",
    "modes": ["stp", "ecmp", "flowlane"],
    "references": ["idle"],
    "events": [
        {"at": "4s", "link": ["leaf1", "spine2"], "state": "down"},
        {"at": "8s", "link": ["leaf1", "spine2"], "state": "up"},
    ],
    "workloads": [
        {"name": "training", "kind": "bulk", "flows": [{"src": "h1", "dst": "h4"}]},
        {
            "name": "probe",
            "kind": "probe",
            "flows": [{"src": "h3", "dst": "h4"}, {"src": "h3", "dst": "h5"}],
        },
        {
            "name": "inference",
            "kind": "inference",
            "clients": ["h3"],
            "servers": ["h6"],
            "rate": 50,
        },
    ],
}


@pytest.fixture
def document() -> dict[str, Any]:
    return copy.deepcopy(FABRIC)


def write(directory: Path, document: object) -> Path:
    path = directory / "fab.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def errors(tmp_path: Path, document: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ScenarioError) as info:
        load_scenario(write(tmp_path, document), tmp_path)
    return [(error.path, error.message) for error in info.value.errors]


def only_error(tmp_path: Path, document: dict[str, Any]) -> tuple[str, str]:
    found = errors(tmp_path, document)
    assert len(found) == 1, found
    return found[0]


def test_a_fabric_scenario_loads(tmp_path: Path, document: dict[str, Any]) -> None:
    scenario = load_scenario(write(tmp_path, document), tmp_path).scenario
    assert scenario.modes == [Mode.STP, Mode.ECMP, Mode.FLOWLANE]
    assert scenario.references == [Reference.IDLE]
    assert [(e.at, e.link, e.state) for e in scenario.events] == [
        (4.0, ("leaf1", "spine2"), LinkState.DOWN),
        (8.0, ("leaf1", "spine2"), LinkState.UP),
    ]
    (probe,) = scenario.probes
    assert isinstance(probe, ProbeWorkload)
    assert (probe.rate, probe.size, probe.port) == (1000, 64, 7000)
    assert [w.name for w in scenario.training] == ["training"]
    assert [w.name for w in scenario.inference] == ["inference"]


def test_defaults_keep_todays_scenarios(tmp_path: Path, document: dict[str, Any]) -> None:
    for key in ("events", "references"):
        del document[key]
    scenario = load_scenario(write(tmp_path, document), tmp_path).scenario
    assert scenario.events == []
    assert scenario.references == [Reference.IDLE, Reference.ALONE, Reference.CONTROL]


@pytest.mark.parametrize("mode", ["stp", "ecmp"])
def test_forwarding_modes_need_a_fabric_with_loops(
    tmp_path: Path, document: dict[str, Any], mode: str
) -> None:
    document["topology"] = {"kind": "single", "hosts": [f"h{i}" for i in range(1, 7)]}
    document["policy"] = str(REPO / "policies" / "scenarios" / "isolation.yaml")
    document["bottleneck"] = "s1-eth4"
    document["modes"] = ["flowlane", mode]
    document["events"] = []
    path, message = only_error(tmp_path, document)
    assert path == "modes[1]"
    assert f"'{mode}'" in message and "leaf-spine" in message


def test_an_unknown_mode_names_the_field(tmp_path: Path, document: dict[str, Any]) -> None:
    document["modes"] = ["stp", "ospf"]
    path, message = only_error(tmp_path, document)
    assert path == "modes[1]"
    assert "stp" in message and "ecmp" in message


def test_an_event_on_a_missing_link(tmp_path: Path, document: dict[str, Any]) -> None:
    document["events"][0]["link"] = ["leaf1", "leaf2"]
    document["events"][1]["link"] = ["leaf1", "leaf2"]
    found = errors(tmp_path, document)
    assert found == [
        ("events[0].link", "no link between leaf1 and leaf2"),
        ("events[1].link", "no link between leaf1 and leaf2"),
    ]


def test_an_event_on_a_host_link_is_refused(tmp_path: Path, document: dict[str, Any]) -> None:
    document["events"] = [{"at": "4s", "link": ["h1", "leaf1"], "state": "down"}]
    path, message = only_error(tmp_path, document)
    assert path == "events[0].link"
    assert "no switch 'h1'" in message and "spine2" in message


def test_events_must_be_in_time_order(tmp_path: Path, document: dict[str, Any]) -> None:
    document["events"][1]["at"] = "3s"
    path, message = only_error(tmp_path, document)
    assert path == "events[1].at"
    assert "before the event above" in message


def test_events_must_fall_inside_the_phase(tmp_path: Path, document: dict[str, Any]) -> None:
    document["events"][1]["at"] = "12s"  # ramp 2 s + duration 10 s
    path, message = only_error(tmp_path, document)
    assert path == "events[1].at"
    assert "past the phase" in message and "12s" in message


def test_a_repair_needs_a_failure_first(tmp_path: Path, document: dict[str, Any]) -> None:
    document["events"] = [{"at": "4s", "link": ["spine2", "leaf1"], "state": "up"}]
    path, message = only_error(tmp_path, document)
    assert path == "events[0].state"
    assert "never went down" in message


def test_a_link_cannot_fail_twice(tmp_path: Path, document: dict[str, Any]) -> None:
    document["events"][1] = {"at": "8s", "link": ["spine2", "leaf1"], "state": "down"}
    path, message = only_error(tmp_path, document)
    assert path == "events[1].state"
    assert "already down" in message


def test_an_event_state_is_down_or_up(tmp_path: Path, document: dict[str, Any]) -> None:
    document["events"][0]["state"] = "flapping"
    path, message = only_error(tmp_path, document)
    assert path == "events[0].state"
    assert "'down'" in message and "'up'" in message


def test_an_event_link_has_two_ends(tmp_path: Path, document: dict[str, Any]) -> None:
    document["events"][0]["link"] = ["leaf1"]
    path, message = only_error(tmp_path, document)
    assert path.startswith("events[0].link")
    assert "required" in message.lower()


def test_probe_hosts_are_checked(tmp_path: Path, document: dict[str, Any]) -> None:
    document["workloads"][1]["flows"][1]["dst"] = "h9"
    path, message = only_error(tmp_path, document)
    assert path == "workloads[1].flows[1].dst"
    assert "no host 'h9'" in message


def test_a_probe_to_itself_is_refused(tmp_path: Path, document: dict[str, Any]) -> None:
    document["workloads"][1]["flows"][0]["dst"] = "h3"
    path, message = only_error(tmp_path, document)
    assert path == "workloads[1].flows[0]"
    assert "one host" in message


@pytest.mark.parametrize(
    ("field", "value", "where"),
    [("rate", 5, "rate"), ("rate", 50_000, "rate"), ("port", 0, "port"), ("size", "8B", "")],
)
def test_probe_fields_are_bounded(
    tmp_path: Path, document: dict[str, Any], field: str, value: object, where: str
) -> None:
    document["workloads"][1][field] = value
    path, message = only_error(tmp_path, document)
    assert path == f"workloads[1].probe{'.' + where if where else ''}"
    if field == "size":
        assert "'size' must be 16-1400 bytes" in message


def test_one_probe_workload_at_most(tmp_path: Path, document: dict[str, Any]) -> None:
    second = copy.deepcopy(document["workloads"][1]) | {"name": "probe2", "port": 7001}
    document["workloads"].append(second)
    assert only_error(tmp_path, document) == (
        "workloads",
        "at most one probe workload (one stream)",
    )


def test_references_need_idle(tmp_path: Path, document: dict[str, Any]) -> None:
    document["references"] = ["alone"]
    path, message = only_error(tmp_path, document)
    assert path == "references"
    assert "needs 'idle'" in message


def test_references_are_listed_once(tmp_path: Path, document: dict[str, Any]) -> None:
    document["references"] = ["idle", "idle"]
    assert only_error(tmp_path, document) == ("references", "a reference is listed twice")


def test_an_allreduce_needs_the_alone_reference(tmp_path: Path, document: dict[str, Any]) -> None:
    document["workloads"].append(
        {"name": "ring", "kind": "allreduce", "workers": ["h1", "h4"], "size": "1MiB"}
    )
    path, message = only_error(tmp_path, document)
    assert path == "references"
    assert "needs 'alone'" in message


def test_an_unknown_reference_names_the_field(tmp_path: Path, document: dict[str, Any]) -> None:
    document["references"] = ["idle", "warm"]
    path, _ = only_error(tmp_path, document)
    assert path == "references[1]"


def test_control_needs_the_alone_reference(tmp_path: Path, document: dict[str, Any]) -> None:
    document["references"] = ["idle", "control"]
    path, message = only_error(tmp_path, document)
    assert path == "references"
    assert "'control' needs 'alone'" in message and "rate" in message


def test_control_with_alone_loads(tmp_path: Path, document: dict[str, Any]) -> None:
    document["references"] = ["idle", "alone", "control"]
    scenario = load_scenario(write(tmp_path, document), tmp_path).scenario
    assert scenario.references == [Reference.IDLE, Reference.ALONE, Reference.CONTROL]


def test_sink_host_names_are_reserved_for_control(tmp_path: Path, document: dict[str, Any]) -> None:
    single = {"kind": "single", "hosts": ["a", "sink1", "c", "server"]}
    workloads = [
        {"name": "training", "kind": "bulk", "flows": [{"src": "a", "dst": "server"}]},
        {
            "name": "inference",
            "kind": "inference",
            "clients": ["c"],
            "servers": ["server"],
            "rate": 5,
        },
    ]
    document |= {
        "topology": single,
        "policy": str(REPO / "policies" / "scenarios" / "isolation.yaml"),
        "bottleneck": "s1-eth4",
        "modes": ["flowlane"],
        "events": [],
        "workloads": workloads,
        "references": ["idle", "alone", "control"],
    }
    path, message = only_error(tmp_path, document)
    assert path == "topology" and "sink1 is reserved" in message
    document["references"] = ["idle", "alone"]  # no control phase, no sinks: the name is free
    assert load_scenario(write(tmp_path, document), tmp_path).scenario.topology.kind == "single"
