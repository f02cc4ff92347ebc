"""No cross-site writes: a write must be JSON and must not come from another origin.

A browser on the operator's machine can reach an API bound to 127.0.0.1.
Tokens already stop a forged request that carries none, but two cheap rules
close the rest: a write's body must be ``application/json`` (a cross-site
form or ``text/plain`` post cannot set that without a CORS preflight,
which this API never grants), and a write whose ``Origin`` (or
``Sec-Fetch-Site``) says it comes from another site is refused outright.
Command-line clients send neither header and are not affected.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final
from urllib.parse import urlsplit

from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

SAFE: Final = frozenset({"GET", "HEAD", "OPTIONS"})
JSON: Final = "application/json"


def refusal(method: str, headers: Mapping[str, str]) -> tuple[int, str] | None:
    """(status, reason) when a request must be refused before any route sees it."""
    if method in SAFE:
        return None
    fetch_site = headers.get("sec-fetch-site")
    if fetch_site in ("cross-site", "same-site"):
        return 403, f"cross-site request refused (Sec-Fetch-Site: {fetch_site})"
    origin = headers.get("origin")
    if origin is not None:
        host = headers.get("host", "")
        parts = urlsplit(origin)
        if origin == "null" or parts.netloc.lower() != host.lower():
            return 403, f"cross-origin request refused: Origin {origin} is not this API ({host})"
    has_body = headers.get("content-length", "0") not in ("", "0") or (
        "transfer-encoding" in headers
    )
    if has_body:
        media_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media_type != JSON:
            shown = media_type or "none"
            return 415, f"a request body must be {JSON} (Content-Type: {shown})"
    return None


class GuardMiddleware(BaseHTTPMiddleware):
    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        refused = refusal(request.method, request.headers)
        if refused is not None:
            status, detail = refused
            return JSONResponse({"detail": detail}, status_code=status)
        return await call_next(request)
