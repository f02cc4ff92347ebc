"""Liveness and readiness, for a process supervisor or a load balancer."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from controller.api.errors import ApiError
from controller.api.schemas import ErrorOut, HealthOut, ReadyOut
from controller.api.services import Services, ServicesDep

router = APIRouter(tags=["health"])

_NOT_READY: dict[int | str, dict[str, Any]] = {
    503: {"model": ErrorOut, "description": "Redis unreachable, or no live controller"}
}


@router.get("/healthz", response_model=HealthOut)
def healthz() -> HealthOut:
    """The process answers. Touches nothing else, so a Redis outage does not restart it."""
    return HealthOut(status="ok")


def _readiness(services: Services) -> ReadyOut:
    services.redis.ping()
    max_age = services.settings.controller_max_age_s
    controllers = services.switches.live_controllers(max_age)
    if not controllers:
        raise ApiError(503, f"no controller heartbeat in the last {max_age:g} s")
    return ReadyOut(status="ready", controllers=sorted(controllers))


@router.get("/readyz", response_model=ReadyOut, responses=_NOT_READY)
async def readyz(services: ServicesDep) -> ReadyOut:
    """Ready when Redis answers and at least one controller beats: a write would be applied."""
    return await run_in_threadpool(_readiness, services)
