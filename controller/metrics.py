"""Prometheus metrics of the controller, on a registry the caller owns (tests pass their own)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from controller.qos.telemetry import QueueStats


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.switches = Gauge(
            "flowlane_switches_connected", "Datapaths connected now", registry=self.registry
        )
        self.flows = Gauge(
            "flowlane_switch_flows",
            "Flows the current plan puts on a switch",
            ["dpid", "table"],
            registry=self.registry,
        )
        self.flow_mods = Counter(
            "flowlane_flow_mods_total",
            "Flow mods sent",
            ["dpid", "command"],
            registry=self.registry,
        )
        self.sync_seconds = Histogram(
            "flowlane_switch_sync_seconds",
            "Time to bring one switch to its plan (flows, barrier, queues)",
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.refused_connections = Counter(
            "flowlane_switch_connections_refused_total",
            "Connections closed for claiming the datapath id of a live, answering switch",
            ["dpid"],
            registry=self.registry,
        )
        self.role_changes = Counter(
            "flowlane_switch_role_changes_total",
            "OpenFlow roles the switch confirmed to this controller (master or slave)",
            ["dpid", "role"],
            registry=self.registry,
        )
        self.mastership_stepdowns = Counter(
            "flowlane_switch_mastership_stepdowns_total",
            "Times the switch refused this controller as master (stale generation, or a"
            " write refused as from a slave) and it stepped down",
            ["dpid"],
            registry=self.registry,
        )
        self.switch_master = Gauge(
            "flowlane_switch_master",
            "1 while this controller's lease makes it master of the connected switch, 0 while"
            " it is slave of it; no series for a switch it is not connected to (only with"
            " Redis: several controllers share the switches)",
            ["dpid"],
            registry=self.registry,
        )
        self.sync_failures = Counter(
            "flowlane_switch_sync_failures_total",
            "Syncs that did not complete (timeouts, switch errors)",
            ["dpid"],
            registry=self.registry,
        )
        self.qos_errors = Counter(
            "flowlane_qos_errors_total",
            "OVSDB or tc failures while provisioning port queues",
            ["port"],
            registry=self.registry,
        )
        self.applied_version = Gauge(
            "flowlane_switch_policy_version",
            "Policy version a switch confirmed (barrier); -1 for a policy from a file",
            ["dpid"],
            registry=self.registry,
        )
        self.apply_seconds = Histogram(
            "flowlane_policy_apply_seconds",
            "From a new policy reaching the controller to a switch confirming it",
            registry=self.registry,
            buckets=(0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5),
        )
        self.store_up = Gauge(
            "flowlane_store_up",
            "1 while the controller's heartbeats reach Redis, 0 while they fail",
            registry=self.registry,
        )
        self.totals = SwitchTotals()
        self.registry.register(self.totals)
        self.stats_poll_seconds = Histogram(
            "flowlane_stats_poll_seconds",
            "Time to read one switch's flow and queue statistics",
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
        )
        self.detections = Counter(
            "flowlane_detections_total",
            "Flows moved to the elephant class, by what tripped the threshold",
            ["dpid", "reason"],
            registry=self.registry,
        )
        self.releases = Counter(
            "flowlane_releases_total",
            "Overrides dropped because their flow went idle or calm",
            ["dpid", "reason"],
            registry=self.registry,
        )
        self.overrides_active = Gauge(
            "flowlane_overrides_active",
            "Elephant overrides installed",
            ["dpid"],
            registry=self.registry,
        )
        self.tracked_flows = Gauge(
            "flowlane_tracked_flows",
            "Flows the detector keeps state for",
            ["dpid"],
            registry=self.registry,
        )
        self.untracked_flows = Counter(
            "flowlane_untracked_flows_total",
            "Counting-table entries left untracked because of detection.max_tracked",
            ["dpid"],
            registry=self.registry,
        )
        self.detection_poll_seconds = Histogram(
            "flowlane_detection_poll_seconds",
            "Time to read one switch's counting table and run the detector",
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
        )
        self.drift_repairs = Counter(
            "flowlane_drift_repairs_total",
            "Audits that found a switch off its plan and repaired it",
            ["dpid", "kind"],
            registry=self.registry,
        )
        # ---- the store ------------------------------------------------------------------
        self.store_regressions = Counter(
            "flowlane_store_regressions_total",
            "Times the store was found holding less than the controller enforces (Redis lost"
            " data: policy gone, an older or rewritten version, a new store epoch); the"
            " controller kept enforcing what it had",
            ["kind"],
            registry=self.registry,
        )
        self.store_regressed = Gauge(
            "flowlane_store_regressed",
            "1 while the store holds less than the controller enforces (until a new version"
            " is written), else 0",
            registry=self.registry,
        )
        # ---- fabric forwarding ---------------------------------------------------------
        self.link_tx_bits = Gauge(
            "flowlane_link_tx_bits_per_second",
            "Measured rate leaving a fabric port onto its link (port stats), bit/s",
            ["switch", "port"],
            registry=self.registry,
        )
        self.link_utilization = Gauge(
            "flowlane_link_utilization_ratio",
            "Measured rate of a fabric link over its capacity (1.0: full)",
            ["switch", "port"],
            registry=self.registry,
        )
        self.placements = Counter(
            "flowlane_placements_total",
            "Elephants pinned on (or released from) one path, by why",
            ["reason"],
            registry=self.registry,
        )
        self.reroutes = Counter(
            "flowlane_reroutes_total",
            "Pinned elephants moved to another path, by why (link down, load)",
            ["reason"],
            registry=self.registry,
        )
        self.pinned_flows = Gauge(
            "flowlane_pinned_flows",
            "Elephants pinned on one path now",
            registry=self.registry,
        )
        self.fabric_links = Gauge(
            "flowlane_fabric_links",
            "Usable switch-to-switch links (each physical link once)",
            registry=self.registry,
        )
        self.fabric_hosts = Gauge(
            "flowlane_fabric_hosts",
            "Hosts learned at the fabric's edge ports",
            registry=self.registry,
        )
        self.packet_ins = Counter(
            "flowlane_packet_ins_total",
            "Packets the switches sent to the controller, by kind (lldp, arp, ...)",
            ["kind"],
            registry=self.registry,
        )


class SwitchTotals(Collector):
    """Totals a switch or the kernel keeps (table-1 counters, HTB classes), exported as
    Prometheus counters, with the latest queue backlog and rate as gauges.

    The counts are read, not incremented here, so they cannot be ``Counter``s;
    a collector hands Prometheus each reading as it is. A switch that leaves
    takes its series with it (``forget``).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._classes: dict[str, dict[str, tuple[int, int]]] = {}
        self._queues: dict[str, tuple[QueueStats, ...]] = {}

    def set_classes(self, dpid: str, totals: Mapping[str, tuple[int, int]]) -> None:
        """class → (packets, bytes) marked on the switch."""
        with self._lock:
            self._classes[dpid] = dict(totals)

    def set_queues(self, dpid: str, queues: Sequence[QueueStats]) -> None:
        with self._lock:
            self._queues[dpid] = tuple(queues)

    def queues(self, dpid: str) -> tuple[QueueStats, ...]:
        with self._lock:
            return self._queues.get(dpid, ())

    def forget(self, dpid: str) -> None:
        with self._lock:
            self._classes.pop(dpid, None)
            self._queues.pop(dpid, None)

    def describe(self) -> Iterator[Metric]:
        return iter(self._families())

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            classes = {dpid: dict(t) for dpid, t in self._classes.items()}
            queues = dict(self._queues)
        return iter(self._families(classes, queues))

    @staticmethod
    def _families(
        classes: Mapping[str, Mapping[str, tuple[int, int]]] | None = None,
        queues: Mapping[str, Sequence[QueueStats]] | None = None,
    ) -> list[Metric]:
        marked_packets = CounterMetricFamily(
            "flowlane_class_packets",
            "Packets marked for a class on a switch (table 1 counters)",
            labels=["dpid", "class"],
        )
        marked_bytes = CounterMetricFamily(
            "flowlane_class_bytes",
            "Bytes marked for a class on a switch (table 1 counters)",
            labels=["dpid", "class"],
        )
        for dpid, totals in (classes or {}).items():
            for name, (packets, octets) in totals.items():
                marked_packets.add_metric([dpid, name], packets)
                marked_bytes.add_metric([dpid, name], octets)
        labels = ["dpid", "port", "class"]
        counters = {
            "bytes": CounterMetricFamily(
                "flowlane_queue_sent_bytes", "Bytes a port's class queue sent (HTB)", labels=labels
            ),
            "packets": CounterMetricFamily(
                "flowlane_queue_sent_packets",
                "Packets a port's class queue sent (HTB)",
                labels=labels,
            ),
            "drops": CounterMetricFamily(
                "flowlane_queue_dropped_packets",
                "Packets a port's class queue dropped (HTB)",
                labels=labels,
            ),
            "overlimits": CounterMetricFamily(
                "flowlane_queue_overlimits",
                "Times a port's class queue was over its rate and had to wait or borrow (HTB)",
                labels=labels,
            ),
        }
        gauges = {
            "backlog_bytes": GaugeMetricFamily(
                "flowlane_queue_backlog_bytes",
                "Bytes waiting in a port's class queue",
                labels=labels,
            ),
            "backlog_packets": GaugeMetricFamily(
                "flowlane_queue_backlog_packets",
                "Packets waiting in a port's class queue",
                labels=labels,
            ),
            "rate": GaugeMetricFamily(
                "flowlane_queue_rate_bytes_per_second",
                "What a port's class queue sent per second over the last reading",
                labels=labels,
            ),
            "min_rate": GaugeMetricFamily(
                "flowlane_queue_min_rate_bytes_per_second",
                "The guarantee of a port's class queue (HTB rate)",
                labels=labels,
            ),
            "priority": GaugeMetricFamily(
                "flowlane_queue_priority",
                "HTB priority of a port's class queue (0: a latency class, served first)",
                labels=labels,
            ),
        }
        for dpid, stats in (queues or {}).items():
            for queue in stats:
                key = [dpid, queue.port, queue.traffic_class]
                for field, family in counters.items():
                    family.add_metric(key, getattr(queue, field))
                gauges["backlog_bytes"].add_metric(key, queue.backlog_bytes)
                gauges["backlog_packets"].add_metric(key, queue.backlog_packets)
                if queue.rate_bps is not None:
                    gauges["rate"].add_metric(key, queue.rate_bps / 8)
                gauges["min_rate"].add_metric(key, queue.min_bps / 8)
                gauges["priority"].add_metric(key, queue.priority)
        return [marked_packets, marked_bytes, *counters.values(), *gauges.values()]
