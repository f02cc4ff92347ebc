"""Request bodies above a size are refused (413) before the app sees a byte of them.

A body whose ``Content-Length`` is too large is refused without reading it.
A chunked body is read up to the limit and refused as soon as it passes
it; one within the limit is handed to the app as it came. Nothing larger
than the limit is ever held, so a hostile client costs the API at most
``max_bytes`` per connection, and the event loop never parses it (routes
decode and validate bodies in the thread pool).
"""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from controller.api.settings import MAX_BODY_BYTES


def declared_length(scope: Scope) -> int | None:
    """The ``Content-Length`` of a request, if it sent a valid one."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def too_large(limit: int) -> JSONResponse:
    return JSONResponse(
        {"detail": f"request body larger than {limit} bytes (the API's --max-body)"},
        status_code=413,
    )


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = declared_length(scope)
        if length is not None:
            if length > self.max_bytes:
                await too_large(self.max_bytes)(scope, receive, send)
                return
            await self.app(scope, receive, send)  # the server stops at the declared length
            return
        # No length (chunked, or no body at all): read it whole, up to the limit.
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await too_large(self.max_bytes)(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        buffered = iter(messages)

        async def replay() -> Message:
            return next(buffered, None) or await receive()

        await self.app(scope, replay, send)
