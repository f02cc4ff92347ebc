"""Turn what the workload processes printed into a phase's results.

The processes are the load generator (``mininet/flowlane_bench/loadgen.py``), iperf3 and the
all-reduce worker (``mininet/flowlane_bench/allreduce.py``); each prints one JSON object.
The functions here only read those objects, so they are tested with
recorded outputs, without a network.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flowlane_bench.suite.report import (
    AllReduceResult,
    InferenceResult,
    Latency,
    PhaseResult,
    TrainingFlow,
)
from flowlane_bench.suite.stats import Span, cdf_points, percentile, throughput_series

TRAINING = "training"
INFERENCE = "inference"


class WorkloadOutputError(ValueError):
    """A workload's output cannot be used; the message says which workload and why."""


def inference_result(clients: Sequence[Mapping[str, Any]]) -> InferenceResult:
    """Every client's measured requests as one distribution."""
    latencies = sorted(value for client in clients for value in client.get("latencies_ms", []))
    if not latencies:
        kinds = Counter[str]()
        for client in clients:
            kinds.update(client.get("error_kinds", {}))
        raise WorkloadOutputError(f"no inference request completed (errors: {dict(kinds)})")
    kinds = Counter[str]()
    for client in clients:
        kinds.update(client.get("error_kinds", {}))
    return InferenceResult(
        latency_ms=Latency(
            p50=percentile(latencies, 50),
            p90=percentile(latencies, 90),
            p99=percentile(latencies, 99),
            p999=percentile(latencies, 99.9),
            max=latencies[-1],
            mean=round(sum(latencies) / len(latencies), 3),
        ),
        samples=len(latencies),
        errors=sum(int(client["errors"]) for client in clients),
        error_kinds=dict(kinds),
        rate_target=round(sum(float(client["rate_target"]) for client in clients), 3),
        rate_achieved=round(sum(float(client["rate_achieved"]) for client in clients), 3),
        cdf=cdf_points(latencies),
    )


def inference_spans(clients: Sequence[Mapping[str, Any]], interval_s: float) -> list[Span]:
    """The load generator's completion buckets as spans on the shared clock."""
    spans = []
    for client in clients:
        origin = float(client["window_start_unix"])
        for offset, _completed, size in client["timeline"]:
            spans.append(Span(origin + offset, origin + offset + interval_s, int(size)))
    return spans


@dataclass(frozen=True)
class IperfRun:
    """One iperf3 client's JSON report and when (unix time) it was started."""

    workload: str
    label: str
    started_unix: float
    report: Mapping[str, Any]
    protocol: str = "tcp"


def iperf_flow(run: IperfRun) -> tuple[TrainingFlow, list[Span]]:
    """Receiver goodput of one iperf3 stream, and its per-interval bytes.

    The goodput is what the receiver got after the omitted ramp (``-O``).  For
    UDP without a receiver sum (older iperf3) it is the sent rate less the
    lost share.
    """
    report = run.report
    if "error" in report:
        raise WorkloadOutputError(f"{run.workload} {run.label}: iperf3 failed: {report['error']}")
    end = report.get("end", {})
    if "sum_received" in end:
        goodput = float(end["sum_received"]["bits_per_second"])
    elif "sum" in end:
        summary = end["sum"]
        goodput = float(summary["bits_per_second"]) * (
            1 - float(summary.get("lost_percent", 0)) / 100
        )
    else:
        raise WorkloadOutputError(f"{run.workload} {run.label}: iperf3 report has no end summary")
    spans = interval_spans(run.started_unix, report.get("intervals", []))
    flow = TrainingFlow(
        workload=run.workload,
        label=run.label,
        goodput_bps=round(goodput, 1),
        congestion_controlled=run.protocol != "udp",
    )
    return flow, spans


def interval_spans(started_unix: float, intervals: Sequence[Mapping[str, Any]]) -> list[Span]:
    """iperf3's per-interval bytes on the shared clock.

    After the omitted ramp (``-O``) iperf3 restarts its clock: the first
    measured interval starts at 0 again.  Measured intervals are therefore
    placed after the last omitted one, or a timeline would show the ramp's
    traffic twice and everything after it early by the ramp's length.
    """
    omitted_s = 0.0
    spans = []
    for interval in intervals:
        summary = interval["sum"]
        start, end = float(summary["start"]), float(summary["end"])
        if summary.get("omitted"):
            omitted_s = max(omitted_s, end)
            spans.append(Span(started_unix + start, started_unix + end, int(summary["bytes"])))
        else:
            spans.append(
                Span(
                    started_unix + omitted_s + start,
                    started_unix + omitted_s + end,
                    int(summary["bytes"]),
                )
            )
    return spans


@dataclass(frozen=True)
class Iteration:
    start: float
    end: float
    bytes: int


def worker_iterations(worker: Mapping[str, Any]) -> list[Iteration]:
    """One worker's measured iterations on the shared clock."""
    origin = float(worker["window_start_unix"])
    return [
        Iteration(origin + end - duration_ms / 1000, origin + end, int(size))
        for duration_ms, (end, size) in zip(worker["iteration_ms"], worker["timeline"], strict=True)
    ]


def allreduce_result(
    workload: str, workers: Sequence[Mapping[str, Any]], window: tuple[float, float]
) -> tuple[AllReduceResult, list[TrainingFlow], list[Span]]:
    """Iterations that started inside ``window`` (unix times) are the measured ones.

    Training runs before inference starts (the ramp), so only the iterations
    that overlapped the inference measurement count toward the loaded figures.
    """
    if not workers:
        raise WorkloadOutputError(f"{workload}: no worker reported")
    flows: list[TrainingFlow] = []
    spans: list[Span] = []
    rank0: list[Iteration] = []
    for worker in sorted(workers, key=lambda w: int(w["rank"])):
        iterations = worker_iterations(worker)
        # One ring link carries one worker's stream: the timeline shows a link's rate.
        spans += [Span(i.start, i.end, i.bytes // len(workers)) for i in iterations]
        inside = [i for i in iterations if window[0] <= i.start < window[1]]
        if not inside:
            raise WorkloadOutputError(
                f"{workload}: rank {worker['rank']} ran no iteration inside the measured window"
                f" ({len(iterations)} in all): lengthen the duration or shrink the size"
            )
        elapsed = inside[-1].end - inside[0].start
        goodput = sum(i.bytes for i in inside) * 8 / elapsed if elapsed > 0 else 0.0
        flows.append(
            TrainingFlow(
                workload=workload, label=f"rank{worker['rank']}", goodput_bps=round(goodput, 1)
            )
        )
        if not rank0:
            rank0 = inside
    times = sorted(round((i.end - i.start) * 1000, 3) for i in rank0)
    result = AllReduceResult(
        workload=workload,
        workers=len(workers),
        iterations=len(rank0),
        iteration_ms=[round((i.end - i.start) * 1000, 3) for i in rank0],
        iteration_ms_mean=round(sum(times) / len(times), 3),
        iteration_ms_p99=percentile(times, 99),
        iteration_ms_p50=percentile(times, 50),
        ring_goodput_bps=round(sum(f.goodput_bps for f in flows) / len(flows), 1),
    )
    return result, flows, spans


def phase_result(
    phase: str,
    policy: str,
    *,
    inference: InferenceResult | None,
    inference_spans: Sequence[Span],
    bulk: Sequence[tuple[TrainingFlow, list[Span]]],
    allreduce: Sequence[tuple[AllReduceResult, list[TrainingFlow], list[Span]]],
    origin: float,
    length_s: float,
    interval_s: float = 0.5,
) -> PhaseResult:
    flows = [flow for flow, _ in bulk] + [flow for _, ring, _ in allreduce for flow in ring]
    training_spans = [span for _, spans in bulk for span in spans]
    training_spans += [span for _, _, spans in allreduce for span in spans]
    goodput = None
    if bulk or allreduce:
        goodput = sum(flow.goodput_bps for flow, _ in bulk) + sum(
            result.ring_goodput_bps for result, _, _ in allreduce
        )
    timeline = {}
    if bulk or allreduce:
        timeline[TRAINING] = throughput_series(training_spans, origin, length_s, interval_s)
    if inference is not None:
        timeline[INFERENCE] = throughput_series(inference_spans, origin, length_s, interval_s)
    return PhaseResult(
        phase=phase,
        policy=policy,
        inference=inference,
        training_flows=flows,
        allreduce=[result for result, _, _ in allreduce],
        training_goodput_bps=None if goodput is None else round(goodput, 1),
        timeline=timeline,
        timeline_interval_s=interval_s,
    )
