"""``create_app``: the flowlane REST API over the Redis policy and switch stores.

The API never talks to a switch: it stores policy versions, which the
controllers pick up, and reads what the controllers report back.  It holds
no state of its own, so any number of API processes can share one Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from starlette.concurrency import run_in_threadpool

from controller.api.audit import AuditLog, AuditMiddleware
from controller.api.auth import AuthGateMiddleware, authorize
from controller.api.bootstrap import bootstrap_admin
from controller.api.docs import install_docs
from controller.api.errors import install_error_handlers
from controller.api.guards import GuardMiddleware
from controller.api.limits import BodyLimitMiddleware, FailureLimiter
from controller.api.metrics import ApiMetrics, MetricsMiddleware, StoreCollector
from controller.api.openapi import install_openapi
from controller.api.routes import (
    controllers,
    events,
    fabric,
    flows,
    health,
    jobs,
    metrics,
    policy,
    switches,
    tokens,
)
from controller.api.schemas import RollbackIn
from controller.api.services import Services
from controller.api.settings import ApiSettings
from controller.store.epoch import EpochStore
from controller.store.errors import StoreUnavailableError

DESCRIPTION = """\
Versioned traffic-class policies for the flowlane controllers, and what the
controllers report about their switches.

- Every write is validated first: an invalid document is refused with every
  error and its path (422), and nothing is stored.
- The ETag of a policy is its version. Send it back in `If-Match` to write only
  over the version you read (412 otherwise).
- `?wait=applied` answers once every live switch confirms the new version
  (504 naming the switches that did not).
- `?wait=applied` with no live switch is refused (409) and stores nothing;
  without `wait`, a write is stored only.
- Redis unreachable: 503 with `Retry-After` on every route that needs it,
  until it is back.
- Every route but `/healthz` and `/readyz` needs a bearer token
  (`Authorization: Bearer <token>`): `viewer` reads, `operator` also manages
  jobs, `admin` also writes policy and manages tokens. 401 without a valid
  token, 403 when its role is too low, 429 with `Retry-After` after too many
  failed authentications from one address (a valid token is never held
  back). The token is checked before the body is read; a body must arrive
  within 30 s (408 otherwise: `flowlane api --body-timeout`). The author of
  a version is the name of the token that wrote it.
- Writes take `application/json` bodies only (415 otherwise) of at most
  8 MiB by default (413 otherwise: `flowlane api --max-body`), and refuse
  cross-origin browser requests (403). A policy may expand to at most 65 536
  classification entries per switch and a job to 16 384 (422 with the count).
  Every write and every refused attempt is in the audit log (`GET /v1/audit`);
  refusals from one client within a second are one summary entry (`count`).
"""


def create_app(settings: ApiSettings) -> FastAPI:
    services = Services.connect(settings)
    api_metrics = ApiMetrics(settings.registry)
    audit_log = AuditLog(services.audit, on_folded=api_metrics.audit_folded.inc)
    limiter = FailureLimiter(settings.auth_failure_burst, settings.auth_failure_rate)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # The first process on a store gives it its epoch; with Redis down a controller
        # does, once Redis is back (controller/store/epoch.py).
        with contextlib.suppress(StoreUnavailableError):
            await run_in_threadpool(EpochStore(services.redis, settings.prefix).ensure)
        bootstrap = (
            asyncio.create_task(
                bootstrap_admin(
                    services.tokens, settings.token_file, settings.bootstrap_token_ttl_s
                )
            )
            if settings.token_file is not None
            else None
        )
        services.applied_watch.start()
        summaries = asyncio.create_task(audit_log.run())
        try:
            yield
        finally:
            if bootstrap is not None:
                bootstrap.cancel()
            summaries.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await summaries
            await audit_log.flush(everything=True)  # refusals counted and not yet written
            await run_in_threadpool(services.applied_watch.stop)
            services.redis.close()

    app = FastAPI(
        dependencies=[Depends(authorize)],
        title="flowlane",
        version="1",
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served from the package by install_docs, not from a CDN
        redoc_url=None,
        openapi_tags=[
            {"name": "policy", "description": "The versioned policy document"},
            {"name": "switches", "description": "Switches as their controllers report them"},
            {"name": "jobs", "description": "Endpoints a scheduler puts in a class, for a while"},
            {"name": "flows", "description": "Tracked flows, and why each has its class"},
            {"name": "fabric", "description": "Topology, paths and pinned elephants"},
            {"name": "events", "description": "Policy versions, jobs and reclassifications"},
            {"name": "access", "description": "API tokens and the audit log (admin)"},
            {"name": "health", "description": "Liveness, readiness and metrics"},
        ],
    )
    app.state.services = services
    app.state.auth_limiter = limiter
    install_error_handlers(app)
    # The last added runs first: metrics see everything, the audit sees refusals by the gate,
    # the guard and the size limit, and the gate checks the token before the body limit
    # reads a byte of the body.
    app.add_middleware(
        BodyLimitMiddleware, max_bytes=settings.max_body_bytes, timeout_s=settings.body_timeout_s
    )
    app.add_middleware(GuardMiddleware)
    app.add_middleware(AuthGateMiddleware, limiter=limiter)
    app.add_middleware(AuditMiddleware, log=audit_log)
    app.add_middleware(MetricsMiddleware, metrics=api_metrics)
    settings.registry.register(
        StoreCollector(lambda: (services.policies.active_version(), services.switches.heartbeats()))
    )
    app.include_router(health.router)
    app.include_router(policy.build_router(settings))
    app.include_router(switches.router)
    app.include_router(controllers.router)
    app.include_router(jobs.router)
    app.include_router(flows.router)
    app.include_router(fabric.router)
    app.include_router(events.router)
    app.include_router(tokens.router)
    app.include_router(metrics.router)
    install_openapi(app, body_models=[RollbackIn])
    install_docs(app)
    return app
