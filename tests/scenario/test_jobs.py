"""The jobs a scenario registers in flowlane mode, and the check of their class."""

from __future__ import annotations

from pathlib import Path

import pytest
from flowlane_bench.suite.jobs import JOB_TTL, workload_jobs
from flowlane_bench.suite.spec import ScenarioError, load_scenario, parse_scenario

from controller.policy.jobs import JobSpec

REPO = Path(__file__).resolve().parents[2]


def scenario_document(**training: object) -> dict[str, object]:
    return {
        "name": "jobs",
        "description": "jobs test",
        "topology": {"kind": "single", "hosts": ["a", "b", "c", "server"]},
        "policy": "policies/scenarios/isolation.yaml",
        "bottleneck": "s1-eth4",
        "workloads": [
            {
                "name": "inference",
                "kind": "inference",
                "clients": ["c"],
                "servers": ["server"],
                "rate": 10,
            },
            training,
        ],
    }


def test_allreduce_job_names_every_worker_on_the_ring_port() -> None:
    loaded = load_scenario(REPO / "mininet/scenarios/allreduce.yaml", REPO)
    (job,) = workload_jobs(loaded.scenario)
    assert job == {
        "name": "allreduce",
        "class": "training",
        "endpoints": [
            {"ipv4": "10.0.0.1", "ports": [29500]},
            {"ipv4": "10.0.0.2", "ports": [29500]},
            {"ipv4": "10.0.0.4", "ports": [29500]},
            {"ipv4": "10.0.0.5", "ports": [29500]},
        ],
        "ttl": JOB_TTL,
    }
    assert JobSpec.model_validate(job).traffic_class == "training"  # what the API accepts


def test_bulk_job_gives_receivers_their_iperf_ports_and_senders_any_port() -> None:
    document = scenario_document(
        name="bulk",
        kind="bulk",
        job="training",
        port=5301,
        flows=[{"src": "a", "dst": "server"}, {"src": "b", "dst": "server"}],
    )
    loaded = parse_scenario(document, "test", REPO)
    (job,) = workload_jobs(loaded.scenario)
    assert job["endpoints"] == [
        {"ipv4": "10.0.0.4", "ports": [5301, 5302]},
        {"ipv4": "10.0.0.1"},
        {"ipv4": "10.0.0.2"},
    ]
    JobSpec.model_validate(job)


def test_workloads_without_job_register_nothing() -> None:
    loaded = load_scenario(REPO / "mininet/scenarios/isolation.yaml", REPO)
    assert workload_jobs(loaded.scenario) == []


def test_job_class_must_exist_in_the_policy() -> None:
    document = scenario_document(
        name="bulk", kind="bulk", job="elephants", flows=[{"src": "a", "dst": "server"}]
    )
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(document, "test", REPO)
    (error,) = caught.value.errors
    assert error.path == "workloads[1].job"
    assert "no class 'elephants'" in error.message
