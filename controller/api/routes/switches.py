"""``GET /v1/switches``: what the live controllers report about their switches."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path
from starlette.concurrency import run_in_threadpool

from controller.api.errors import ApiError
from controller.api.routes.flows import DPID_PATTERN, parse_dpid
from controller.api.schemas import (
    ErrorOut,
    SwitchesOut,
    SwitchOut,
    SwitchQueuesOut,
    ValidationErrorOut,
)
from controller.api.services import Services, ServicesDep
from controller.store.switches import SwitchReport

router = APIRouter(prefix="/v1", tags=["switches"])

_UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    503: {"model": ErrorOut, "description": "Redis unavailable"}
}


def switch_out(report: SwitchReport, applied: int | None) -> SwitchOut:
    return SwitchOut(
        dpid=report.dpid_hex,
        controller=report.controller,
        datapath_type=report.datapath_type,
        connected_at=report.connected_at,
        updated_at=report.updated_at,
        applied_version=applied,
        flow_count=len(report.flows),
        ports=list(report.ports),
    )


def _switches(services: Services) -> SwitchesOut:
    reports = services.live_reports()
    applied = services.switches.applied()
    return SwitchesOut(
        active_version=services.policies.active_version(),
        switches=[switch_out(r, applied.get(r.dpid_hex)) for r in reports],
    )


@router.get("/switches", response_model=SwitchesOut, responses=_UNAVAILABLE)
async def switches(services: ServicesDep) -> SwitchesOut:
    """Switches of controllers whose heartbeat is fresh, by dpid.

    ``applied_version`` is the policy version a barrier confirmed on the
    switch; compare it with ``active_version`` to see who lags.
    """
    return await run_in_threadpool(_switches, services)


def _queues(services: Services, dpid: str) -> SwitchQueuesOut:
    if dpid not in services.live_switches():
        raise ApiError(404, f"no live switch {dpid}")
    read = services.queues.get(dpid)
    if read is None:
        raise ApiError(
            404,
            f"switch {dpid} has no queue telemetry: its controller provisions no queues on it"
            " (not in its local OVSDB, or run with --no-qos), or has not read them yet",
        )
    updated_at, queues = read
    return SwitchQueuesOut(
        dpid=dpid,
        updated_at=updated_at,
        queues=queues,
    )


@router.get(
    "/switches/{dpid}/queues",
    response_model=SwitchQueuesOut,
    responses={
        404: {"model": ErrorOut, "description": "No such live switch, or no reading yet"},
        422: {"model": ValidationErrorOut, "description": "Not a dpid"},
        **_UNAVAILABLE,
    },
)
async def switch_queues(
    services: ServicesDep,
    dpid: str = Path(pattern=DPID_PATTERN, description="The switch: hex or decimal dpid"),
) -> SwitchQueuesOut:
    """The switch's port queues by class: bytes, packets, drops, overlimits, backlog and
    rate, as its controller last read them from the HTB classes (about once a second)."""
    try:
        hex_dpid = f"{parse_dpid(dpid):016x}"
    except ValueError as exc:
        raise ApiError(404, str(exc)) from None
    return await run_in_threadpool(_queues, services, hex_dpid)
