"""``GET /v1/controllers``: the controller instances sharing this Redis, as the mastership
keys say (``controller/mastership/``), with each one's heartbeat.

Read-only, and the same for every viewer: instance ids and the switches each
masters are shared infrastructure, carrying no tenant's job, host or flow.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from controller.api.schemas import (
    ControllerOut,
    ControllersOut,
    ErrorOut,
    MasteredOut,
    TakeoverOut,
)
from controller.api.services import Services, ServicesDep
from controller.mastership.view import InstanceView, MastershipView, Takeover

router = APIRouter(prefix="/v1", tags=["switches"])

_UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    503: {"model": ErrorOut, "description": "Redis unavailable"}
}


def _takeover(takeover: Takeover) -> TakeoverOut:
    return TakeoverOut(
        dpid=f"{takeover.dpid:016x}",
        at=takeover.at,
        previous=takeover.previous,
        generation=takeover.generation,
    )


def _age(then: float | None, now: float) -> float | None:
    return None if then is None else round(max(0.0, now - then), 3)


def controller_out(view: InstanceView, heartbeat: float | None, now: float) -> ControllerOut:
    return ControllerOut(
        id=view.id,
        alive=view.alive,
        registered_at=view.registered_at if view.alive else None,
        lease_age_s=_age(view.renewed_at, now) if view.alive else None,
        lease_expires_in_s=view.expires_in_s,
        heartbeat_age_s=_age(heartbeat, now),
        connected=[f"{dpid:016x}" for dpid in view.connected],
        masters=[
            MasteredOut(
                dpid=f"{m.dpid:016x}",
                generation=m.generation,
                since=m.since,
                # The takeover that made it this switch's owner, not an older one.
                taken_from=m.takeover.previous
                if m.takeover is not None and m.takeover.generation == m.generation
                else None,
            )
            for m in view.masters
        ],
        last_takeover=_takeover(view.takeovers[0]) if view.takeovers else None,
    )


def controllers_view(
    views: list[InstanceView], heartbeats: dict[str, float], now: float
) -> ControllersOut:
    """Pure: the answer from one reading of the keys and the heartbeats."""
    live = [view for view in views if view.alive]
    connected = {dpid for view in live for dpid in view.connected}
    mastered = {m.dpid for view in live for m in view.masters}
    return ControllersOut(
        controllers=[controller_out(v, heartbeats.get(v.id), now) for v in views],
        unmastered=[f"{dpid:016x}" for dpid in sorted(connected - mastered)],
    )


def _controllers(services: Services) -> ControllersOut:
    heartbeats = services.switches.heartbeats()
    views = MastershipView(services.redis, services.settings.prefix).instances(heartbeats)
    return controllers_view(views, heartbeats, time.time())


@router.get("/controllers", response_model=ControllersOut, responses=_UNAVAILABLE)
async def controllers(services: ServicesDep) -> ControllersOut:
    """Every controller instance: whether its lease is current, how old it is, the
    switches it is connected to and those it masters (with their generation ids), and
    its last takeover of a dead instance's switch.

    `unmastered` lists the switches a live instance is connected to that no live
    instance masters: empty but for a renewal or two after a master dies.
    """
    return await run_in_threadpool(_controllers, services)
