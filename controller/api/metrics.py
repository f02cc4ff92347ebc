"""Request counts and latencies by route template, on the app's own Prometheus registry.

Labels use the route's template (``/v1/policy/history``), never the raw
path, so a scan of random URLs adds one ``unmatched`` series, not thousands.
Refusals are also counted by kind (``flowlane_api_refusals_total``): the
audit log summarises them (controller/api/audit.py), the metrics count
every one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from controller.api.audit import REFUSALS
from controller.store.errors import StoreUnavailableError

UNMATCHED = "unmatched"


class StoreCollector(Collector):
    """What the store says, read at each scrape: the active policy version and how old each
    controller's heartbeat is, and whether Redis answered at all (``flowlane_store_up``)."""

    def __init__(self, read: Callable[[], tuple[int | None, dict[str, float]]]) -> None:
        self._read = read

    def describe(self) -> Iterator[Metric]:
        return iter(self._families(None, {}, up=True))

    def collect(self) -> Iterator[Metric]:
        try:
            version, beats = self._read()
        except StoreUnavailableError:
            return iter(self._families(None, {}, up=False))
        return iter(self._families(version, beats, up=True))

    @staticmethod
    def _families(version: int | None, beats: dict[str, float], up: bool) -> list[Metric]:
        store_up = GaugeMetricFamily(
            "flowlane_store_up", "1 when the API's last read of Redis succeeded", value=int(up)
        )
        active = GaugeMetricFamily(
            "flowlane_policy_active_version", "The store's active policy version"
        )
        if version is not None:
            active.add_metric([], version)
        ages = GaugeMetricFamily(
            "flowlane_controller_heartbeat_age_seconds",
            "Seconds since each controller's last heartbeat in the store",
            labels=["controller"],
        )
        now = time.time()
        for controller, beat in sorted(beats.items()):
            ages.add_metric([controller], max(0.0, now - beat))
        return [store_up, active, ages]


class ApiMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.requests = Counter(
            "flowlane_api_requests_total",
            "HTTP requests answered, by method, route template and status",
            ["method", "route", "status"],
            registry=registry,
        )
        self.latency = Histogram(
            "flowlane_api_request_seconds",
            "Time to answer a request (a ?wait=applied write includes the wait)",
            ["method", "route"],
            registry=registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.refusals = Counter(
            "flowlane_api_refusals_total",
            "Requests refused, by kind: unauthenticated (401), forbidden (403), not_found (404),"
            " method_not_allowed (405), body_timeout (408), too_large (413),"
            " unsupported_media_type (415), rate_limited (429)",
            ["kind"],
            registry=registry,
        )
        for kind in REFUSALS.values():  # every kind shows, at 0, before the first refusal
            self.refusals.labels(kind)
        self.audit_folded = Counter(
            "flowlane_api_audit_folded_total",
            "Refusals counted into an audit summary entry instead of an entry of their own",
            registry=registry,
        )


def route_template(scope: Scope) -> str:
    """The matched route's path template; the router stores the route in the scope."""
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) else UNMATCHED


class MetricsMiddleware:
    """Plain ASGI middleware: it sees the status even of responses made by exception handlers."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # what the client gets if the app raises before it answers
        started = time.perf_counter()

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            route = route_template(scope)
            method = str(scope.get("method", ""))
            self.metrics.requests.labels(method, route, str(status)).inc()
            kind = REFUSALS.get(status)
            if kind is not None:
                self.metrics.refusals.labels(kind).inc()
            self.metrics.latency.labels(method, route).observe(time.perf_counter() - started)
