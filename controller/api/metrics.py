"""Request counts and latencies by route template, on the app's own Prometheus registry.

Labels use the route's template (``/v1/policy/history``), never the raw
path, so a scan of random URLs adds one ``unmatched`` series, not thousands.
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

UNMATCHED = "unmatched"


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
            self.metrics.latency.labels(method, route).observe(time.perf_counter() - started)
