"""``GET /v1/switches``: what the live controllers report about their switches."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from controller.api.schemas import ErrorOut, PortOut, QueueOut, SwitchesOut, SwitchOut
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
        ports=[
            PortOut(
                name=port.name,
                number=port.number,
                link_bps=port.link_bps,
                rate_bps=port.rate_bps,
                queues=[
                    QueueOut(
                        queue_id=q.queue_id,
                        class_name=q.class_name,
                        min_bps=q.min_bps,
                        max_bps=q.max_bps,
                        priority=q.priority,
                        dscp=q.dscp,
                    )
                    for q in port.queues
                ],
            )
            for port in report.ports
        ],
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
