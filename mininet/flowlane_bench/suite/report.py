"""The report a scenario run writes (``report.json``), and the headline figures read from it.

Phases are the runs that make up one invocation: ``idle`` (inference alone,
the latency reference), ``alone`` (training alone, the all-reduce reference),
``control`` (both loads, training kept off inference's path) and one per mode
with training and inference together.  Every figure of every phase is kept,
so plots and tables are made from the report alone.

Inference p99 is read against two references, because on a small machine
the loads share the CPUs as well as the network: ``p99/idle`` isolates
nothing (CPU and network contention together), ``p99/control`` isolates what
the network adds (control carries the same CPU load, with no shared queue).

On a fabric the training goodput is also read against the optimum (the
fabric's maximum multi-commodity throughput for the training flows), and a
scenario with link events reports, per event, what the probe stream lost and
how long training took to get back to the new optimum.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from flowlane_bench.suite.stats import jain_index

IDLE = "idle"
ALONE = "alone"
CONTROL = "control"
REFERENCES = (IDLE, ALONE, CONTROL)

TARGETS = {
    "p99_over_control": ("<=", 1.25),
    "p99_over_idle": ("<=", 1.5),
    "goodput_over_capacity": (">=", 0.93),
    "allreduce_over_alone": ("<=", 1.10),
    "jain": (">=", 0.95),
    "goodput_over_optimum": (">=", 0.95),
    "jobs_jain": (">=", 0.95),
}
"""flowlane's targets for the headline figures; FIFO and static are shown next to them."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Latency(_Model):
    """Milliseconds, nearest-rank percentiles over every client's measured requests."""

    p50: float
    p90: float
    p99: float
    p999: float
    max: float
    mean: float


class InferenceResult(_Model):
    latency_ms: Latency
    samples: int
    errors: int
    error_kinds: dict[str, int] = Field(default_factory=dict)
    rate_target: float
    """Requests/s all clients together were scheduled to send (mean, bursts included)."""
    rate_achieved: float
    cdf: list[tuple[float, float]]
    """(latency ms, fraction of requests at or below it)."""


class TrainingFlow(_Model):
    workload: str
    label: str
    goodput_bps: float
    congestion_controlled: bool = True
    """False for fixed-rate UDP: its share is set by its sender, so fairness leaves it out."""


class AllReduceResult(_Model):
    workload: str
    workers: int
    iterations: int
    iteration_ms: list[float]
    """Iterations that started inside the measured window (every worker's, rank 0's view)."""
    iteration_ms_mean: float
    iteration_ms_p99: float
    iteration_ms_p50: float | None = None
    """Nearest rank; None in reports written before it was kept."""
    ring_goodput_bps: float
    """Mean over workers of what each sent per second: the rate of one ring link."""


class ProbeResult(_Model):
    """The probe stream of a phase: the pair it ran between, its traced path, its losses."""

    workload: str
    label: str
    """``src->dst``: the first candidate pair whose path crossed the first failing link."""
    path: list[str]
    """Switch ports whose transmit counters a traced burst raised, in switch order."""
    crosses_first_event: bool
    rate: int
    sent: int
    received: int
    lost: int
    loss_ms: float
    """Lost datagrams / rate: milliseconds of the stream's traffic lost."""
    longest_gap_ms: float


class EventResult(_Model):
    """One link event in a phase and what followed it, until the next event or the end."""

    at_s: float
    executed_s: float
    """When the runner carried it out, on the phase's clock; what follows is read from here."""
    link: tuple[str, str]
    state: str
    probe_crossed: bool | None = None
    """Whether the probe's traced path used this link (None: no probe)."""
    probe_lost: int | None = None
    probe_loss_ms: float | None = None
    probe_longest_gap_ms: float | None = None
    optimum_bps: float | None = None
    """Training optimum with the links down at this moment."""
    recovery_s: float | None = None
    """From the event until training throughput held >= 0.9 of ``optimum_bps`` (None: never)."""


class PhaseResult(_Model):
    phase: str
    policy: str
    """What the controller ran: ``<mode> mode of <policy file>``."""
    inference: InferenceResult | None = None
    training_flows: list[TrainingFlow] = Field(default_factory=list)
    allreduce: list[AllReduceResult] = Field(default_factory=list)
    training_goodput_bps: float | None = None
    """Bulk flows summed plus each all-reduce's ring rate: what crossed the bottleneck."""
    timeline: dict[str, list[tuple[float, float]]] = Field(default_factory=dict)
    """Per class (training, inference): (seconds since the phase started, bit/s)."""
    timeline_interval_s: float = 0.5
    probe: ProbeResult | None = None
    events: list[EventResult] = Field(default_factory=list)


class Headline(_Model):
    mode: str
    inference_p99_ms: float
    p99_over_idle: float
    """Against inference alone: CPU and network contention together."""
    p99_over_control: float | None = None
    """Against the control phase (same CPU load, no shared queue): the network's share."""
    goodput_over_capacity: float | None
    allreduce_over_alone: float | None
    jain: float | None
    goodput_over_optimum: float | None = None
    job_goodput_bps: dict[str, float] = Field(default_factory=dict)
    """Each job's flows' goodput summed (training workloads registered as jobs in flowlane
    mode; the same workloads in every mode, registered or not)."""
    jobs_jain: float | None = None
    """Jain index of the jobs' goodput per unit of weight: 1.0 when shares follow weights."""
    jobs_ratio: float | None = None
    """The first job's goodput over the second's (in the scenario's order)."""
    allreduce_p50_ms: float | None = None
    """The slowest all-reduce's median iteration time: a job is as fast as its slowest flow."""


class Report(_Model):
    scenario: str
    description: str
    scenario_file: str
    spec: dict[str, Any]
    policy_file: str
    bottleneck: str
    capacity_bps: int
    optimum_bps: float | None = None
    """The training flows' optimum on the intact fabric (None: not computed)."""
    duration_s: float
    ramp_s: float
    modes: list[str]
    environment: dict[str, Any]
    started_at: str
    finished_at: str
    phases: dict[str, PhaseResult]
    headline: list[Headline]
    targets: dict[str, tuple[str, float]] = Field(default_factory=lambda: dict(TARGETS))
    plots: list[str] = Field(default_factory=list)


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, 4)


def headline(
    phases: dict[str, PhaseResult],
    modes: list[str],
    capacity_bps: int,
    optimum_bps: float | None = None,
    jobs: Mapping[str, int] | None = None,
) -> list[Headline]:
    """One row per mode: each figure against its reference phase, in the same run.

    ``jobs``: the training workloads that are jobs, with their weights (job figures).
    """
    idle = phases[IDLE].inference
    alone = phases.get(ALONE)
    control = phases[CONTROL].inference if CONTROL in phases else None
    rows = []
    for mode in modes:
        phase = phases[mode]
        assert phase.inference is not None and idle is not None
        allreduce_ratio = None
        if phase.allreduce and alone is not None and alone.allreduce:
            loaded = sum(a.iteration_ms_mean for a in phase.allreduce)
            reference = sum(a.iteration_ms_mean for a in alone.allreduce)
            allreduce_ratio = _ratio(loaded, reference)
        goodputs = [f.goodput_bps for f in phase.training_flows if f.congestion_controlled]
        rows.append(
            Headline(
                mode=mode,
                inference_p99_ms=phase.inference.latency_ms.p99,
                p99_over_idle=round(phase.inference.latency_ms.p99 / idle.latency_ms.p99, 3),
                p99_over_control=(
                    round(phase.inference.latency_ms.p99 / control.latency_ms.p99, 3)
                    if control is not None and control.latency_ms.p99 > 0
                    else None
                ),
                goodput_over_capacity=_ratio(phase.training_goodput_bps, capacity_bps),
                allreduce_over_alone=allreduce_ratio,
                jain=round(jain_index(goodputs), 4) if len(goodputs) > 1 else None,
                goodput_over_optimum=_ratio(phase.training_goodput_bps, optimum_bps),
                **job_figures(phase, jobs or {}),
            )
        )
    return rows


def job_figures(phase: PhaseResult, jobs: Mapping[str, int]) -> dict[str, Any]:
    """Per job goodput, their Jain index by weight and ratio; the slowest all-reduce's p50."""
    figures: dict[str, Any] = {}
    goodput = {
        name: round(sum(f.goodput_bps for f in phase.training_flows if f.workload == name), 1)
        for name in jobs
    }
    if goodput:
        figures["job_goodput_bps"] = goodput
    if len(goodput) > 1 and all(goodput.values()):
        figures["jobs_jain"] = round(jain_index([goodput[n] / jobs[n] for n in goodput]), 4)
        first, second = list(goodput)[:2]
        figures["jobs_ratio"] = round(goodput[first] / goodput[second], 3)
    medians = [a.iteration_ms_p50 for a in phase.allreduce if a.iteration_ms_p50 is not None]
    if medians:
        figures["allreduce_p50_ms"] = max(medians)
    return figures


def meets(figure: str, value: float | None) -> bool | None:
    """Whether ``value`` meets flowlane's target for ``figure`` (None: not measured)."""
    if value is None:
        return None
    op, target = TARGETS[figure]
    return value <= target if op == "<=" else value >= target
