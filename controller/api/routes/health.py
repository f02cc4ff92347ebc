"""Liveness and readiness, for a process supervisor or a load balancer.

Ready means a write would be applied as written: Redis answers, at least
one controller beats (within ``controller_max_age_s``, a few heartbeat
intervals: ``controller/store/liveness.py``), and no live controller has
found the store holding less than what it enforces (``controller/store/epoch.py``).
The 503 says which of those failed, and since when.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from controller.api.auth import needs
from controller.api.errors import ApiError
from controller.api.schemas import ErrorOut, HealthOut, ReadyOut
from controller.api.services import Services, ServicesDep
from controller.store.epoch import EpochStore, RegressionFlag

router = APIRouter(tags=["health"])

_NOT_READY: dict[int | str, dict[str, Any]] = {
    503: {
        "model": ErrorOut,
        "description": "Redis unreachable, no live controller, or a controller found that the"
        " store lost data (the detail says which)",
    }
}


@router.get("/healthz", response_model=HealthOut, openapi_extra=needs(None))
def healthz() -> HealthOut:
    """The process answers. Touches nothing else, so a Redis outage does not restart it."""
    return HealthOut(status="ok")


def readiness_problem(
    live: Sequence[str],
    last_beat: tuple[str, float] | None,
    flags: Sequence[RegressionFlag],
    max_age_s: float,
    now: float,
) -> str | None:
    """Why the API is not ready, or None; pure, so each reason is tested without Redis.

    ``last_beat`` is the newest heartbeat of any controller, live or not;
    ``flags`` are the controllers' store-regression flags, of which only the
    live controllers' count (a dead controller enforces nothing).
    """
    if not live:
        if last_beat is None:
            return f"no controller heartbeat in the last {max_age_s:g} s (none recorded)"
        controller, beat = last_beat
        stamp = datetime.fromtimestamp(beat, UTC).isoformat(timespec="seconds")
        return (
            f"no controller heartbeat in the last {max_age_s:g} s: the last was {controller}'s"
            f" at {stamp}, {max(now - beat, 0.0):.1f} s ago"
        )
    alive = set(live)
    found = [flag.message() for flag in flags if flag.controller in alive]
    return "; ".join(found) if found else None


def _readiness(services: Services) -> ReadyOut:
    services.redis.ping()
    max_age = services.settings.controller_max_age_s
    now = time.time()
    live = services.switches.live_controllers(max_age, now=now)
    last_beat = None if live else services.switches.last_heartbeat()
    flags = EpochStore(services.redis, services.settings.prefix).flags() if live else []
    problem = readiness_problem(live, last_beat, flags, max_age, now)
    if problem is not None:
        raise ApiError(503, problem)
    return ReadyOut(status="ready", controllers=sorted(live))


@router.get("/readyz", response_model=ReadyOut, responses=_NOT_READY, openapi_extra=needs(None))
async def readyz(services: ServicesDep) -> ReadyOut:
    """Ready when Redis answers, a controller beats, and none found the store behind it."""
    return await run_in_threadpool(_readiness, services)
