"""The audit log: every write and every refused attempt, in a Redis stream.

An entry says who (token name, role, tenant), from where (client address),
what (method, route template, path, and what the route noted: versions
before and after, a job's name, a token's name) and the outcome (status).
Reads that succeed are not logged (the metrics count them); a read refused
for its token is. Entries are read with ``GET /v1/audit`` (admin) and
``flowlane audit [--follow]``.

Writing the entry must never fail the request it describes: with Redis
down the write failed anyway (503), and the entry is logged instead.
"""

from __future__ import annotations

import logging
from typing import Any, Final

import redis
from fastapi import Request
from starlette.concurrency import run_in_threadpool
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.responses import Response

from controller.auth.model import Principal
from controller.store.errors import StoreUnavailableError

LOG = logging.getLogger("flowlane.audit")
READS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
REFUSED: Final = frozenset({401, 403})


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


class AuditMiddleware(BaseHTTPMiddleware):
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
            services = request.app.state.services
            try:
                await run_in_threadpool(services.audit.append, entry["outcome"], entry)
            except (StoreUnavailableError, redis.RedisError) as exc:
                LOG.warning("audit entry not stored (%s): %s", exc, entry)
        return response
