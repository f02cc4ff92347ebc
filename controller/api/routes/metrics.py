"""``GET /metrics``: the API's Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from controller.api.services import get_services

router = APIRouter(tags=["health"])


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
def metrics(request: Request) -> Response:
    """Prometheus text format: requests by route template and status, latency by route."""
    registry = get_services(request).settings.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
