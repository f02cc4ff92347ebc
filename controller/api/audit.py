"""The audit log: every write and every refused attempt, in a Redis stream, in bounded space.

An entry says who (token name, role, tenant), from where (client address),
what (method, route template, path, and what the route noted: versions
before and after, a job's name, a token's name) and the outcome (status).
Reads that succeed are not logged (the metrics count them); a read refused
for its token is. Entries are read with ``GET /v1/audit`` (admin) and
``flowlane audit [--follow]``.

Bounded, because a client without a token can send as many requests as it
likes and each refused one is worth recording:

- Size. An entry's path is cut to ``PATH_MAX_CHARS`` and the whole entry to
  ``ENTRY_MAX_BYTES`` of JSON (``bounded``; the store refuses anything larger
  too), and the stream keeps ``AUDIT_MAX_LEN`` entries: at most about
  ``AUDIT_MAX_LEN * ENTRY_MAX_BYTES`` (49 MiB) of data in Redis, whatever
  is sent. A 60 KB path costs what a short one does.
- Rate. Refusals (401, 403, 404, 405, 408, 413, 415, 429) are summarised
  (``RefusalSummary``): a client's first refusal is written as it is, the
  ones that follow within a second are counted and written as one summary
  entry (``count``, ``refusals`` by status, a few ``paths``) a second later.
  At most one entry per client a second, and at most
  ``REFUSAL_ENTRIES_PER_S`` refusal entries a second from all clients
  together (the rest wait their turn, counted): rewriting the whole log
  takes hours of sustained requests, and the metrics
  (``flowlane_api_refusals_total``) show every refusal as it happens.
  Writes that succeed or fail for another reason (409, 412, 422, 5xx) are
  written one by one, as before: they come from a valid token.

Writing the entry must never fail the request it describes: with Redis
down the write failed anyway (503), and the entry is logged instead.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import redis
from fastapi import Request
from starlette.concurrency import run_in_threadpool
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.responses import Response
from starlette.types import ASGIApp

from controller.auth.model import Principal
from controller.store.errors import StoreUnavailableError
from controller.store.events import EventStore

LOG = logging.getLogger("flowlane.audit")
READS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
REFUSED: Final = frozenset({401, 403, 429})
"""Reads are audited only when refused for their token (or its failures)."""

REFUSALS: Final[Mapping[int, str]] = {
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "body_timeout",
    413: "too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
}
"""Statuses a client can draw without a valid token, or with one by probing: summarised in
the audit, counted by kind in ``flowlane_api_refusals_total``."""

AUDIT_MAX_LEN: Final = 100_000
"""Audit entries kept (about: the stream is trimmed approximately)."""
ENTRY_MAX_BYTES: Final = 512
"""Largest entry (its JSON): an ordinary one is 200-350 bytes."""
PATH_MAX_CHARS: Final = 128
"""Longest path kept in an entry; a longer one is cut, and its length noted."""
CUT_CHARS: Final = 32
"""What every text of an entry is cut to when the entry is still too large."""
CORE: Final = (
    "token",
    "role",
    "tenant",
    "client",
    "method",
    "route",
    "path",
    "status",
    "outcome",
    "count",
)
SUMMARY_INTERVAL_S: Final = 1.0
"""At most one entry per client per interval."""
REFUSAL_ENTRIES_PER_S: Final = 10
"""Refusal entries (first ones and summaries) written per interval, all clients together."""
MAX_SUMMARISED_CLIENTS: Final = 1024
"""Clients with refusals waiting for their summary; more share one ``(other clients)``."""
OTHERS: Final = "(other clients)"
SAMPLE_PATHS: Final = 3


def note(request: Request, **fields: Any) -> None:
    """Add what a route knows (versions, names) to its request's audit entry."""
    noted: dict[str, Any] = getattr(request.state, "audit", None) or {}
    noted.update(fields)
    request.state.audit = noted


def outcome(status: int) -> str:
    if status < 400:
        return "ok"
    return "refused" if status < 500 else "failed"


def audit_entry(
    *,
    principal: Principal | None,
    client: str | None,
    method: str,
    route: str | None,
    path: str,
    status: int,
    noted: dict[str, Any],
) -> dict[str, Any]:
    """One entry; the route's notes cannot overwrite who, where or what."""
    return {
        **noted,
        "token": principal.name if principal is not None else None,
        "role": principal.role.name if principal is not None else None,
        "tenant": principal.tenant if principal is not None else None,
        "client": client,
        "method": method,
        "route": route,
        "path": path,
        "status": status,
        "outcome": outcome(status),
    }


def should_audit(method: str, status: int) -> bool:
    return method not in READS or status in REFUSED


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _size(entry: Mapping[str, Any]) -> int:
    return len(json.dumps(entry))


def _cut_texts(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return cut(value, limit)
    if isinstance(value, list):
        return [_cut_texts(v, limit) for v in value[:SAMPLE_PATHS]]
    if isinstance(value, dict):
        return {cut(str(k), limit): _cut_texts(v, limit) for k, v in list(value.items())[:16]}
    return value


def bounded(entry: Mapping[str, Any], max_bytes: int = ENTRY_MAX_BYTES) -> dict[str, Any]:
    """``entry`` made to fit ``max_bytes`` of JSON, losing as little as it can: the path is
    always cut to ``PATH_MAX_CHARS``; then, only if needed, every text is cut short; then
    only who, where and what are kept; and as a last resort only the status."""
    out = dict(entry)
    path = out.get("path")
    if isinstance(path, str) and len(path) > PATH_MAX_CHARS:
        out["path"] = cut(path, PATH_MAX_CHARS)
        out["path_length"] = len(path)
    if _size(out) <= max_bytes:
        return out
    out = {key: _cut_texts(value, CUT_CHARS) for key, value in out.items()}
    out["truncated"] = True
    if _size(out) <= max_bytes:
        return out
    out = {key: out[key] for key in CORE if key in out} | {"truncated": True}
    if _size(out) <= max_bytes:
        return out
    return {"status": entry.get("status"), "outcome": entry.get("outcome"), "truncated": True}


# ---- refusals, summarised -------------------------------------------------------------------


@dataclass(slots=True)
class _Pending:
    """Refusals of one client waiting for their summary entry."""

    sample: dict[str, Any]
    since: float
    statuses: Counter[int] = field(default_factory=Counter)
    paths: list[str] = field(default_factory=list)

    def add(self, entry: Mapping[str, Any]) -> None:
        self.statuses[int(entry.get("status") or 0)] += 1
        path = cut(str(entry.get("path", "")), PATH_MAX_CHARS)
        if path not in self.paths and len(self.paths) < SAMPLE_PATHS:
            self.paths.append(path)

    def entry(self, client: str) -> dict[str, Any]:
        return {
            **self.sample,
            "client": client,
            "count": sum(self.statuses.values()),
            "refusals": {str(status): n for status, n in sorted(self.statuses.items())},
            "paths": self.paths,
            "since": round(self.since, 3),
        }


class RefusalSummary:
    """Which refusals to write now, and which to fold into a later summary entry.

    Pure bookkeeping, with an injected clock; used from the event loop only
    (the middleware and the flusher both run there), so it needs no lock.
    """

    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        interval_s: float = SUMMARY_INTERVAL_S,
        entries_per_interval: int = REFUSAL_ENTRIES_PER_S,
        max_clients: int = MAX_SUMMARISED_CLIENTS,
    ) -> None:
        self._clock = clock
        self.interval_s = interval_s
        self._budget = entries_per_interval
        self._max_clients = max_clients
        self._written: dict[str, float] = {}
        """When each client last had an entry written (only those within an interval)."""
        self._pending: dict[str, _Pending] = {}
        self._window_start = float("-inf")
        self._window_used = 0

    def refuse(self, entry: Mapping[str, Any]) -> dict[str, Any] | None:
        """The entry to write now, or None when it is folded into the client's summary."""
        now = self._roll()
        client = str(entry.get("client") or "unknown")
        if (
            client not in self._pending
            and self._may_write(client, now)
            and self._window_used < self._budget
        ):
            self._note_written(client, now)
            return dict(entry)
        key = client
        if client not in self._pending and len(self._pending) >= self._max_clients:
            key = OTHERS
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = _Pending(sample=bounded(entry), since=now)
        pending.add(entry)
        return None

    def due(self, everything: bool = False) -> list[dict[str, Any]]:
        """Summary entries to write now, oldest first: those of clients whose last entry is
        an interval old, within this interval's budget (``everything``: all, at shutdown)."""
        now = self._roll()
        out: list[dict[str, Any]] = []
        for client, pending in list(self._pending.items()):
            if not everything:
                if self._window_used >= self._budget:
                    break
                if not self._may_write(client, now):
                    continue
            out.append(pending.entry(client))
            del self._pending[client]
            self._note_written(client, now)
        self._written = {
            c: t for c, t in self._written.items() if now - t < self.interval_s
        }  # older ones may write again anyway: forgetting them keeps the table small
        return out

    def waiting(self) -> int:
        """Refusals counted and not written yet."""
        return sum(sum(p.statuses.values()) for p in self._pending.values())

    def _may_write(self, client: str, now: float) -> bool:
        last = self._written.get(client)
        return last is None or now - last >= self.interval_s

    def _note_written(self, client: str, now: float) -> None:
        self._written[client] = now
        self._window_used += 1

    def _roll(self) -> float:
        now = self._clock()
        if now - self._window_start >= self.interval_s:
            self._window_start = now
            self._window_used = 0
        return now


class AuditLog:
    """Writes entries to the audit stream: refusals through the summary, a summary flusher
    running with the app."""

    def __init__(
        self,
        store: EventStore,
        summary: RefusalSummary | None = None,
        on_folded: Callable[[], None] = lambda: None,
    ) -> None:
        self.store = store
        self.summary = summary or RefusalSummary()
        self._on_folded = on_folded

    async def record(self, entry: dict[str, Any]) -> None:
        if int(entry.get("status", 0)) in REFUSALS:
            now = self.summary.refuse(entry)
            if now is None:
                self._on_folded()
                return
            entry = now
        await self._write(entry)

    async def flush(self, everything: bool = False) -> None:
        for entry in self.summary.due(everything):
            await self._write(entry)

    async def run(self) -> None:
        """Write summaries as they fall due, until cancelled (the app's lifespan)."""
        while True:
            await asyncio.sleep(self.summary.interval_s / 2)
            try:
                await self.flush()
            except Exception:  # a bug here must not end the summaries for the process's life
                LOG.exception("audit summaries not written")

    async def _write(self, entry: dict[str, Any]) -> None:
        entry = bounded(entry, ENTRY_MAX_BYTES)
        try:
            await run_in_threadpool(self.store.append, str(entry.get("outcome", "?")), entry)
        except (StoreUnavailableError, redis.RedisError) as exc:
            LOG.warning("audit entry not stored (%s): %s", exc, entry)


class AuditMiddleware(BaseHTTPMiddleware):
    def __init__(self, app: ASGIApp, log: AuditLog) -> None:
        super().__init__(app)
        self.log = log

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        response = await call_next(request)
        if should_audit(request.method, response.status_code):
            route = request.scope.get("route")
            principal = getattr(request.state, "principal", None)
            entry = audit_entry(
                principal=principal if isinstance(principal, Principal) else None,
                client=request.client.host if request.client is not None else None,
                method=request.method,
                route=getattr(route, "path", None),
                path=request.url.path,
                status=response.status_code,
                noted=getattr(request.state, "audit", None) or {},
            )
            await self.log.record(entry)
        return response
