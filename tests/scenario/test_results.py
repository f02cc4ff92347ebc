"""Workload outputs to phase results, from outputs shaped like loadgen, iperf3 -J and allreduce."""

from __future__ import annotations

from typing import Any

import pytest
from flowlane_bench.suite.report import AllReduceResult, TrainingFlow
from flowlane_bench.suite.results import (
    INFERENCE,
    TRAINING,
    IperfRun,
    WorkloadOutputError,
    allreduce_result,
    inference_result,
    inference_spans,
    iperf_flow,
    phase_result,
    worker_iterations,
)
from flowlane_bench.suite.stats import Span

MIB = 1024 * 1024

# --------------------------------------------------------------------------------------------
# Recorded-output builders
# --------------------------------------------------------------------------------------------


def loadgen_client(
    latencies: list[float],
    *,
    errors: int = 0,
    kinds: dict[str, int] | None = None,
    rate_target: float = 100.0,
    rate_achieved: float = 99.0,
    start: float = 1_700_000_000.0,
    timeline: list[list[float]] | None = None,
    raw: bool = True,
) -> dict[str, Any]:
    """One ``flowlane_bench.loadgen`` client report (``--raw-latencies``)."""
    ordered = sorted(latencies)
    client: dict[str, Any] = {
        "requests_scheduled": len(latencies) + errors,
        "requests_completed": len(latencies),
        "errors": errors,
        "error_kinds": kinds or {},
        "rate_target": rate_target,
        "rate_achieved": rate_achieved,
        "duration_s": 10.0,
        "latency_ms": {
            "p50": ordered[len(ordered) // 2] if ordered else None,
            "max": ordered[-1] if ordered else None,
        },
        "samples": len(latencies),
        "window_start_unix": start,
        "timeline": timeline if timeline is not None else [[0.0, len(latencies), 1300]],
    }
    if raw:
        client["latencies_ms"] = list(latencies)
    return client


def iperf_tcp(intervals: list[tuple[float, float, int]], received_bps: float) -> dict[str, Any]:
    """``iperf3 -c ... -J`` of one TCP stream: intervals (start, end, bytes) and the end sums."""
    return {
        "start": {
            "version": "iperf 3.12",
            "connected": [{"socket": 5, "local_host": "10.0.0.1", "remote_host": "10.0.0.4"}],
            "test_start": {"protocol": "TCP", "num_streams": 1, "omit": 2, "duration": 12},
        },
        "intervals": [
            {
                "streams": [{"socket": 5, "start": s, "end": e, "bytes": b}],
                "sum": {
                    "start": s,
                    "end": e,
                    "seconds": e - s,
                    "bytes": b,
                    "bits_per_second": b * 8 / (e - s),
                    "omitted": False,
                },
            }
            for s, e, b in intervals
        ],
        "end": {
            "sum_sent": {"bytes": 10**9, "bits_per_second": received_bps * 1.01},
            "sum_received": {"bytes": 10**9, "bits_per_second": received_bps},
        },
    }


def iperf_udp(sent_bps: float, lost_percent: float) -> dict[str, Any]:
    """``iperf3 -u -J`` as older iperf3 prints it: one ``end.sum`` with the loss."""
    return {
        "start": {"test_start": {"protocol": "UDP", "num_streams": 1}},
        "intervals": [
            {"sum": {"start": 0.0, "end": 1.0, "bytes": 2_500_000, "packets": 1900}},
        ],
        "end": {
            "sum": {
                "start": 0,
                "end": 10.0,
                "bytes": 25_000_000,
                "bits_per_second": sent_bps,
                "jitter_ms": 0.05,
                "lost_packets": 1900,
                "packets": 19000,
                "lost_percent": lost_percent,
            }
        },
    }


def worker(
    rank: int, ends: list[float], *, start: float, per_iteration: int, workers: int = 4
) -> dict[str, Any]:
    """One ``flowlane_bench.allreduce`` report: iterations back to back, ending at ``ends`` (s)."""
    durations, previous = [], 0.0
    for end in ends:
        durations.append(round((end - previous) * 1000, 4))
        previous = end
    return {
        "rank": rank,
        "workers": workers,
        "size_bytes": 4 * MIB,
        "chunk_bytes": MIB,
        "iterations": len(ends),
        "warmup_iterations": 1,
        "iteration_ms": durations,
        "iteration_ms_mean": sum(durations) / len(durations),
        "iteration_ms_p99": max(durations),
        "bytes_sent": per_iteration * len(ends),
        "elapsed_s": ends[-1],
        "goodput_bps": per_iteration * len(ends) * 8 / ends[-1],
        "window_start_unix": start,
        "timeline": [[end, per_iteration] for end in ends],
    }


# --------------------------------------------------------------------------------------------
# Inference
# --------------------------------------------------------------------------------------------


def test_inference_pools_every_client() -> None:
    first = loadgen_client(
        [float(v) for v in range(100, 50, -1)], errors=2, kinds={"timeout": 2}, rate_target=60.0
    )
    second = loadgen_client(
        [float(v) for v in range(1, 51)],
        errors=3,
        kinds={"timeout": 1, "reset": 2},
        rate_target=40.0,
        rate_achieved=39.5,
    )
    result = inference_result([first, second])
    assert result.samples == 100
    latency = result.latency_ms
    assert (latency.p50, latency.p90, latency.p99, latency.p999) == (50.0, 90.0, 99.0, 100.0)
    assert latency.max == 100.0
    assert latency.mean == 50.5
    assert result.errors == 5
    assert result.error_kinds == {"timeout": 3, "reset": 2}
    assert result.rate_target == 100.0
    assert result.rate_achieved == 138.5
    assert result.cdf[-1] == (100.0, 1.0)
    assert result.cdf[0] == (1.0, 0.01)


def test_inference_client_without_samples_is_pooled_with_the_others() -> None:
    silent = loadgen_client([], errors=4, kinds={"refused": 4}, raw=False)
    result = inference_result([silent, loadgen_client([2.0, 4.0])])
    assert result.samples == 2
    assert result.errors == 4
    assert result.error_kinds == {"refused": 4}
    assert result.latency_ms.p50 == 2.0
    assert result.latency_ms.mean == 3.0


def test_inference_without_samples_is_an_error_naming_the_kinds() -> None:
    clients = [
        loadgen_client([], errors=5, kinds={"timeout": 5}),
        loadgen_client([], errors=2, kinds={"refused": 2}, raw=False),
    ]
    with pytest.raises(WorkloadOutputError, match="no inference request completed") as info:
        inference_result(clients)
    assert "'timeout': 5" in str(info.value)
    assert "'refused': 2" in str(info.value)


def test_inference_without_clients_is_an_error() -> None:
    with pytest.raises(WorkloadOutputError):
        inference_result([])


def test_inference_spans_are_the_timeline_buckets_on_the_shared_clock() -> None:
    clients = [
        loadgen_client([1.0], start=1000.0, timeline=[[0.0, 3, 3900], [0.5, 0, 0]]),
        loadgen_client([1.0], start=1000.2, timeline=[[0.0, 1, 1300]]),
    ]
    assert inference_spans(clients, 0.5) == [
        Span(1000.0, 1000.5, 3900),
        Span(1000.5, 1001.0, 0),
        Span(1000.2, 1000.7, 1300),
    ]


# --------------------------------------------------------------------------------------------
# iperf3
# --------------------------------------------------------------------------------------------


def test_iperf_tcp_goodput_is_the_receiver_sum() -> None:
    report = iperf_tcp([(0.0, 1.0, 3_000_000), (1.0, 2.0, 2_900_000)], 23_456_789.04)
    flow, spans = iperf_flow(IperfRun("training", "train1->server", 500.0, report))
    assert flow == TrainingFlow(workload="training", label="train1->server", goodput_bps=23456789.0)
    assert spans == [Span(500.0, 501.0, 3_000_000), Span(501.0, 502.0, 2_900_000)]


def test_iperf_udp_goodput_is_the_sent_rate_less_the_lost_share() -> None:
    flow, spans = iperf_flow(IperfRun("roce", "a->b", 10.0, iperf_udp(20e6, 10.0)))
    assert flow.goodput_bps == pytest.approx(18e6)
    assert spans == [Span(10.0, 11.0, 2_500_000)]


def test_iperf_udp_prefers_a_receiver_sum_when_there_is_one() -> None:
    report = iperf_udp(20e6, 10.0)
    report["end"]["sum_received"] = {"bits_per_second": 17.5e6}
    flow, _ = iperf_flow(IperfRun("roce", "a->b", 0.0, report))
    assert flow.goodput_bps == 17.5e6


def test_iperf_error_names_the_workload_and_the_reason() -> None:
    report = {
        "start": {},
        "intervals": [],
        "end": {},
        "error": "unable to connect to server: Connection refused",
    }
    with pytest.raises(WorkloadOutputError) as info:
        iperf_flow(IperfRun("training", "train2->server", 0.0, report))
    message = str(info.value)
    assert message.startswith("training train2->server: iperf3 failed")
    assert "Connection refused" in message


def test_iperf_without_an_end_summary_is_an_error() -> None:
    report = iperf_tcp([(0.0, 1.0, 100)], 1.0)
    report["end"] = {}
    with pytest.raises(WorkloadOutputError, match="no end summary"):
        iperf_flow(IperfRun("training", "x", 0.0, report))


# --------------------------------------------------------------------------------------------
# All-reduce
# --------------------------------------------------------------------------------------------

PER_ITERATION = 6 * MIB  # 2 * (4 - 1) * 1 MiB chunks
HALF_SECONDS = [0.5 * i for i in range(1, 11)]  # ten 500 ms iterations from the window start


def test_worker_iterations_on_the_shared_clock() -> None:
    report = worker(0, [0.25, 0.75, 1.0], start=100.0, per_iteration=10)
    iterations = worker_iterations(report)
    assert [(round(i.start, 9), i.end, i.bytes) for i in iterations] == [
        (100.0, 100.25, 10),
        (100.25, 100.75, 10),
        (100.75, 101.0, 10),
    ]


def test_allreduce_measures_the_iterations_that_start_in_the_window() -> None:
    # rank 0's iterations: starts 1000.0, 1000.5, ... 1004.5; the window holds 1002.0-1003.5
    workers = [
        worker(rank, HALF_SECONDS, start=1000.0, per_iteration=PER_ITERATION)
        for rank in (3, 1, 0, 2)
    ]
    result, flows, spans = allreduce_result("ring", workers, (1002.0, 1004.0))
    assert result.workload == "ring"
    assert result.workers == 4
    assert result.iterations == 4
    assert result.iteration_ms == [500.0] * 4
    assert result.iteration_ms_mean == 500.0
    assert result.iteration_ms_p99 == 500.0
    goodput = round(4 * PER_ITERATION * 8 / 2.0, 1)  # four iterations in 2 s
    assert [f.label for f in flows] == ["rank0", "rank1", "rank2", "rank3"]
    assert all(f.goodput_bps == goodput and f.workload == "ring" for f in flows)
    assert result.ring_goodput_bps == goodput
    # every iteration of every worker, a quarter of its bytes each: the mean link's rate
    assert len(spans) == 40
    assert sum(s.bytes for s in spans) == 10 * PER_ITERATION


def test_allreduce_iteration_figures_are_rank_zeros() -> None:
    rank0 = worker(0, [0.1, 0.3, 0.6, 1.0, 1.5], start=50.0, per_iteration=1_000)
    rank1 = worker(1, [0.2, 0.4, 0.7, 1.1, 1.5], start=50.0, per_iteration=1_000, workers=2)
    result, flows, _ = allreduce_result("ring", [rank1, rank0], (50.05, 51.2))
    # rank 0's starts: 50.0, 50.1, 50.3, 50.6, 51.0 -> the last four are inside
    assert result.iteration_ms == [200.0, 300.0, 400.0, 500.0]
    assert result.iterations == 4
    assert result.iteration_ms_mean == 350.0
    assert result.iteration_ms_p99 == 500.0
    # rank 1's starts: 50.0, 50.2, 50.4, 50.7, 51.1 -> four inside, 50.2 to 51.5
    assert flows[1].goodput_bps == round(4_000 * 8 / 1.3, 1)
    assert flows[0].goodput_bps == round(4_000 * 8 / 1.4, 1)
    assert result.ring_goodput_bps == round((flows[0].goodput_bps + flows[1].goodput_bps) / 2, 1)


def test_allreduce_window_end_is_exclusive() -> None:
    workers = [worker(0, HALF_SECONDS, start=0.0, per_iteration=8)]
    result, _, _ = allreduce_result("ring", workers, (1.0, 2.0))
    assert result.iterations == 2  # starts 1.0 and 1.5; 2.0 is outside


def test_allreduce_with_no_iteration_inside_the_window_is_an_error() -> None:
    workers = [
        worker(0, HALF_SECONDS, start=1000.0, per_iteration=PER_ITERATION),
        worker(1, HALF_SECONDS, start=1000.0, per_iteration=PER_ITERATION),
    ]
    with pytest.raises(WorkloadOutputError) as info:
        allreduce_result("ring", workers, (1010.0, 1020.0))
    message = str(info.value)
    assert message.startswith("ring: rank 0 ran no iteration inside the measured window")
    assert "(10 in all)" in message


def test_allreduce_one_late_rank_is_enough_to_fail() -> None:
    early = worker(0, HALF_SECONDS, start=1000.0, per_iteration=8)
    late = worker(1, [0.5], start=1004.0, per_iteration=8)  # starts at 1004.0 only
    with pytest.raises(WorkloadOutputError, match="rank 1 ran no iteration"):
        allreduce_result("ring", [early, late], (1001.0, 1003.0))


def test_allreduce_without_workers_is_an_error() -> None:
    with pytest.raises(WorkloadOutputError, match="ring: no worker reported"):
        allreduce_result("ring", [], (0.0, 1.0))


# --------------------------------------------------------------------------------------------
# Phases
# --------------------------------------------------------------------------------------------


def ring(
    goodput: float, spans: list[Span]
) -> tuple[AllReduceResult, list[TrainingFlow], list[Span]]:
    result = AllReduceResult(
        workload="ring",
        workers=2,
        iterations=1,
        iteration_ms=[100.0],
        iteration_ms_mean=100.0,
        iteration_ms_p99=100.0,
        ring_goodput_bps=goodput,
    )
    flows = [
        TrainingFlow(workload="ring", label="rank0", goodput_bps=goodput - 1),
        TrainingFlow(workload="ring", label="rank1", goodput_bps=goodput + 1),
    ]
    return result, flows, spans


def test_phase_sums_bulk_flows_and_the_ring_rate() -> None:
    bulk = [
        (TrainingFlow(workload="training", label="a", goodput_bps=20e6), [Span(0.0, 1.0, 1_000)]),
        (TrainingFlow(workload="training", label="b", goodput_bps=15e6), [Span(1.0, 2.0, 500)]),
    ]
    phase = phase_result(
        "flowlane",
        "flowlane mode of policies/scenarios/isolation.yaml",
        inference=inference_result([loadgen_client([1.0, 2.0, 3.0])]),
        inference_spans=[Span(0.5, 1.0, 250)],
        bulk=bulk,
        allreduce=[ring(10e6, [Span(0.0, 2.0, 2_000)])],
        origin=0.0,
        length_s=2.0,
        interval_s=1.0,
    )
    assert phase.phase == "flowlane"
    assert phase.policy == "flowlane mode of policies/scenarios/isolation.yaml"
    assert phase.training_goodput_bps == 45e6  # 20 + 15 + the ring's 10, not its ranks' 20
    assert [f.label for f in phase.training_flows] == ["a", "b", "rank0", "rank1"]
    assert [a.workload for a in phase.allreduce] == ["ring"]
    assert phase.inference is not None and phase.inference.samples == 3
    assert set(phase.timeline) == {TRAINING, INFERENCE}
    assert phase.timeline[TRAINING] == [(0.5, 2_000 * 8.0), (1.5, 1_500 * 8.0)]
    assert phase.timeline[INFERENCE] == [(0.5, 250 * 8.0), (1.5, 0.0)]


def test_idle_phase_has_no_training_figures() -> None:
    phase = phase_result(
        "idle",
        "flowlane mode of p.yaml",
        inference=inference_result([loadgen_client([1.0])]),
        inference_spans=[],
        bulk=[],
        allreduce=[],
        origin=0.0,
        length_s=1.0,
    )
    assert phase.training_goodput_bps is None
    assert phase.training_flows == []
    assert phase.allreduce == []
    assert set(phase.timeline) == {INFERENCE}
    assert len(phase.timeline[INFERENCE]) == 2


def test_alone_phase_has_no_inference() -> None:
    phase = phase_result(
        "alone",
        "flowlane mode of p.yaml",
        inference=None,
        inference_spans=[],
        bulk=[],
        allreduce=[ring(5e6, [Span(10.0, 11.0, 100)])],
        origin=10.0,
        length_s=1.5,
        interval_s=0.5,
    )
    assert phase.inference is None
    assert phase.training_goodput_bps == 5e6
    assert set(phase.timeline) == {TRAINING}
    assert phase.timeline[TRAINING] == [(0.25, 50 * 8 / 0.5), (0.75, 50 * 8 / 0.5), (1.25, 0.0)]


def test_phase_from_recorded_outputs_end_to_end() -> None:
    origin = 2000.0
    bulk_run = IperfRun(
        "training",
        "train1->server",
        origin,
        iperf_tcp([(float(s), float(s + 1), 3_000_000) for s in range(4)], 24e6),
    )
    workers = [
        worker(rank, HALF_SECONDS, start=origin, per_iteration=PER_ITERATION) for rank in (0, 1)
    ]
    clients = [loadgen_client([5.0, 6.0], start=origin + 2.0, timeline=[[0.0, 2, 2600]])]
    phase = phase_result(
        "fifo",
        "fifo mode of policies/scenarios/allreduce.yaml",
        inference=inference_result(clients),
        inference_spans=inference_spans(clients, 0.5),
        bulk=[iperf_flow(bulk_run)],
        allreduce=[allreduce_result("ring", workers, (origin + 1.0, origin + 4.0))],
        origin=origin,
        length_s=5.0,
    )
    ring_rate = round(6 * PER_ITERATION * 8 / 3.0, 1)
    assert phase.training_goodput_bps == round(24e6 + ring_rate, 1)
    assert len(phase.timeline[TRAINING]) == 10
    inference_line = dict(phase.timeline[INFERENCE])
    assert inference_line[2.25] == 2600 * 8 / 0.5
    assert sum(inference_line.values()) == 2600 * 8 / 0.5


def test_udp_flows_count_toward_goodput_but_not_fairness() -> None:
    """A fixed-rate UDP stream's share is its sender's choice: Jain's index leaves it out."""
    from flowlane_bench.suite.report import IDLE, Headline, InferenceResult, Latency, headline

    tcp = [
        iperf_flow(IperfRun("bulk", f"t{i}", 0.0, iperf_tcp([], bps)))
        for i, bps in enumerate((2e7, 2e7))
    ]
    udp, _ = iperf_flow(IperfRun("roce", "u", 0.0, iperf_udp(8e6, 0.0), "udp"))
    assert udp.congestion_controlled is False and all(flow.congestion_controlled for flow, _ in tcp)
    latency = Latency(p50=1, p90=1, p99=2, p999=2, max=2, mean=1)
    inference = InferenceResult(
        latency_ms=latency, samples=10, errors=0, rate_target=1, rate_achieved=1, cdf=[(2.0, 1.0)]
    )
    loaded = phase_result(
        "flowlane",
        "test",
        inference=inference,
        inference_spans=[],
        bulk=[*tcp, (udp, [])],
        allreduce=[],
        origin=0.0,
        length_s=1.0,
    )
    idle = loaded.model_copy(update={"phase": IDLE})
    (row,) = headline({IDLE: idle, "flowlane": loaded}, ["flowlane"], 50_000_000)
    assert isinstance(row, Headline)
    assert row.goodput_over_capacity == round(48e6 / 50e6, 4)  # the UDP flow's 8 Mbit/s included
    assert row.jain == 1.0  # the two equal TCP flows only
