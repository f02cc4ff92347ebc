"""The switch totals collector: counters read from switches and HTB classes are exported as
Prometheus counters (``_total``), backlog and rate as gauges, and a gone switch leaves."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from controller.metrics import ControllerMetrics
from controller.qos.telemetry import QueueStats


def test_totals_are_counters_and_leave_with_their_switch() -> None:
    metrics = ControllerMetrics()
    metrics.totals.set_classes("00000000000000aa", {"inference": (5, 700), "training": (9, 9000)})
    queue = QueueStats("s1-eth1", "inference", 0, 700, 5, 2, 1, 1514, 1, 16000.0, 1.0)
    metrics.totals.set_queues("00000000000000aa", [queue])
    samples = scrape(metrics)
    switch = {"dpid": "00000000000000aa"}
    where = {**switch, "port": "s1-eth1", "class": "inference"}
    assert samples[("flowlane_class_bytes_total", key({**switch, "class": "training"}))] == 9000
    assert samples[("flowlane_class_packets_total", key({**switch, "class": "inference"}))] == 5
    for name, value in (
        ("flowlane_queue_sent_bytes_total", 700),
        ("flowlane_queue_sent_packets_total", 5),
        ("flowlane_queue_dropped_packets_total", 2),
        ("flowlane_queue_overlimits_total", 1),
        ("flowlane_queue_backlog_bytes", 1514),
        ("flowlane_queue_backlog_packets", 1),
        ("flowlane_queue_rate_bytes_per_second", 2000),
    ):
        assert samples[(name, key(where))] == value, name
    text = generate_latest(metrics.registry).decode()
    assert "# TYPE flowlane_queue_sent_bytes_total counter" in text
    metrics.totals.forget("00000000000000aa")
    assert not any(dict(labels).get("dpid") for _, labels in scrape(metrics))


def key(labels: dict[str, str]) -> frozenset[tuple[str, str]]:
    return frozenset(labels.items())


def scrape(metrics: ControllerMetrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = generate_latest(metrics.registry).decode()
    return {
        (sample.name, key(sample.labels)): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
