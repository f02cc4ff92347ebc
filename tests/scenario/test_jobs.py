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
        "weight": 1,
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


def test_the_job_shares_scenarios_register_their_weights_and_perflow_shares_per_flow() -> None:
    from flowlane_bench.suite.modes import mode_policy
    from flowlane_bench.suite.spec import Mode

    loaded = load_scenario(REPO / "mininet/scenarios/jobs-weights.yaml", REPO)
    assert loaded.scenario.jobs == {"job-a": 2, "job-b": 1}
    assert [job["weight"] for job in workload_jobs(loaded.scenario)] == [2, 1]
    assert mode_policy(loaded.policy_document, Mode.FLOWLANE).classes["training"].share == (
        "per-job"
    )
    assert mode_policy(loaded.policy_document, Mode.PERFLOW).classes["training"].share == (
        "per-flow"
    )


def test_job_figures_weigh_each_jobs_goodput_and_take_the_slowest_ring() -> None:
    from flowlane_bench.suite.report import AllReduceResult, PhaseResult, TrainingFlow, job_figures

    def flow(workload: str, bps: float) -> TrainingFlow:
        return TrainingFlow(workload=workload, label="x", goodput_bps=bps)

    def ring(name: str, p50: float) -> AllReduceResult:
        return AllReduceResult(
            workload=name,
            workers=4,
            iterations=3,
            iteration_ms=[p50] * 3,
            iteration_ms_mean=p50,
            iteration_ms_p99=p50,
            iteration_ms_p50=p50,
            ring_goodput_bps=1e6,
        )

    phase = PhaseResult(
        phase="flowlane",
        policy="p",
        training_flows=[flow("a", 20e6), flow("b", 2e6), flow("b", 8e6), flow("other", 5e6)],
        allreduce=[ring("r1", 900.0), ring("r2", 1400.0)],
    )
    weighted = job_figures(phase, {"a": 2, "b": 1})
    assert weighted["job_goodput_bps"] == {"a": 20e6, "b": 10e6}
    assert weighted["jobs_jain"] == 1.0  # 2:1 goodput for 2:1 weights
    assert weighted["jobs_ratio"] == 2.0
    assert weighted["allreduce_p50_ms"] == 1400.0
    equal = job_figures(phase, {"a": 1, "b": 1})
    assert equal["jobs_jain"] == round(30**2 / (2 * (20**2 + 10**2)), 4)
    assert "jobs_jain" not in job_figures(phase, {"a": 1})
