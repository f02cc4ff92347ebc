"""Bounds on what a client can make the API hold or do: bodies, slow bodies, failed tokens.

Bodies. A body whose ``Content-Length`` is above ``max_bytes`` is refused
(413) without reading it. Any other body is read whole before the app sees
it, up to the limit (a chunked one is refused as soon as it passes it), and
within ``timeout_s`` of the request's arrival (408 otherwise): a client that
sends half a body and stalls gets its answer and its connection closed, it
does not hold a task and a buffer for ever. Nothing larger than the limit is
held, and the event loop never parses a body (routes decode and validate
them in the thread pool). This runs after the token check
(``controller/api/auth.py``), so a client without a valid token never gets
a byte of its body read.

Failed authentication. ``FailureLimiter`` is a token bucket per client
address that only failures draw from: ``burst`` failures at once, then
``rate`` a second. A client over it gets 429 with ``Retry-After`` instead of
401, and a valid token from the same address is never held back (it is
checked first). The buckets live in the API process, not in Redis, so that a
client without a token writes nothing to the store; behind N API processes a
client gets N buckets.

Slow request heads. uvicorn waits for a request's headers for ever: a client
that opens connections and trickles headers would hold them up to the
server's connection limit, and every other client would then get 503.
``head_deadline_protocol`` gives each connection ``timeout_s`` to send a
complete request head, from when it opens and again after each response;
then it is closed.
"""

from __future__ import annotations

import asyncio
import ipaddress
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from controller.api.settings import (
    AUTH_FAILURE_BURST,
    AUTH_FAILURE_RATE,
    BODY_TIMEOUT_S,
    MAX_BODY_BYTES,
)

CLOSE: Final = {"Connection": "close"}
"""On an answer given before the body was read whole: the rest of it is not wanted, and a
connection left open would let the client keep trickling it."""


def declared_length(scope: Scope) -> int | None:
    """The ``Content-Length`` of a request, if it sent a valid one."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def has_body(scope: Scope) -> bool:
    """Whether the request announces a body (a length above 0, or a transfer encoding)."""
    length = declared_length(scope)
    if length is not None:
        return length > 0
    return any(name == b"transfer-encoding" for name, _ in scope.get("headers", ()))


def too_large(limit: int) -> JSONResponse:
    return JSONResponse(
        {"detail": f"request body larger than {limit} bytes (the API's --max-body)"},
        status_code=413,
        headers=CLOSE,
    )


def too_slow(timeout_s: float) -> JSONResponse:
    return JSONResponse(
        {"detail": f"request body not received within {timeout_s:g} s (the API's --body-timeout)"},
        status_code=408,
        headers=CLOSE,
    )


class BodyLimitMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int = MAX_BODY_BYTES,
        timeout_s: float = BODY_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self._clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = declared_length(scope)
        if length is not None and length > self.max_bytes:
            await too_large(self.max_bytes)(scope, receive, send)
            return
        # Read it whole (a request without a body is one empty message), up to the limit and
        # before the deadline: one deadline for the whole body, so trickling a byte now and
        # then does not extend it.
        deadline = self._clock() + self.timeout_s
        messages: list[Message] = []
        size = 0
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - self._clock()))
            except TimeoutError:
                await too_slow(self.timeout_s)(scope, receive, send)
                return
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


# ---- failed authentication ------------------------------------------------------------------

MAX_TRACKED: Final = 10_000
"""Client addresses with a bucket at most: the table is bounded whatever the scan."""
OVERFLOW: Final = "(other clients)"
"""The bucket every new address shares while the table is full of active ones."""


def client_key(host: str | None) -> str:
    """The address a bucket belongs to: IPv4 as is, IPv6 by its /64 (one host usually holds a
    whole /64, so counting addresses in it would give it millions of buckets)."""
    if host is None:
        return "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host[:64]  # not an address (a test client, a Unix socket): its name
    if address.version == 6:
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


class FailureLimiter:
    """Per client address: may it fail authentication once more now? Event-loop only."""

    def __init__(
        self,
        burst: int = AUTH_FAILURE_BURST,
        rate: float = AUTH_FAILURE_RATE,
        clock: Callable[[], float] = time.monotonic,
        max_tracked: int = MAX_TRACKED,
    ) -> None:
        if burst < 1 or rate <= 0:
            raise ValueError(f"need burst >= 1 and rate > 0, got burst={burst} rate={rate}")
        self.burst = burst
        self.rate = rate
        self._clock = clock
        self._max_tracked = max_tracked
        self._buckets: dict[str, _Bucket] = {}

    def fail(self, key: str) -> float | None:
        """Record a failure of ``key``: None if it was within its allowance (answer 401),
        else the seconds until the next one is allowed (answer 429 with that Retry-After).
        A refused failure takes nothing, so a client that keeps trying is not punished for
        longer than its rate says."""
        now = self._clock()
        bucket = self._bucket(key, now)
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.updated) * self.rate)
        bucket.updated = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return None
        return (1.0 - bucket.tokens) / self.rate

    def tracked(self) -> int:
        return len(self._buckets)

    def _bucket(self, key: str, now: float) -> _Bucket:
        bucket = self._buckets.get(key)
        if bucket is not None:
            return bucket
        if len(self._buckets) >= self._max_tracked:
            self._forget_refilled(now)
        if len(self._buckets) >= self._max_tracked:
            key = OVERFLOW
            bucket = self._buckets.get(key)
            if bucket is not None:
                return bucket
        bucket = _Bucket(float(self.burst), now)
        self._buckets[key] = bucket
        return bucket

    def _forget_refilled(self, now: float) -> None:
        """Drop buckets that are full again: they are the same as no bucket at all."""
        full = [
            key
            for key, b in self._buckets.items()
            if b.tokens + (now - b.updated) * self.rate >= self.burst
        ]
        for key in full:
            del self._buckets[key]


def retry_after(seconds: float) -> str:
    """A ``Retry-After`` value: whole seconds, at least 1."""
    return str(max(1, math.ceil(seconds)))


# ---- slow request heads -----------------------------------------------------------------------


def head_deadline_protocol(timeout_s: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 protocol (h11), closing a connection whose request head is not
    complete within ``timeout_s`` of the connection or of the previous response. The body has
    its own deadline (``BodyLimitMiddleware``); an idle keep-alive connection, uvicorn's."""
    # Imported here: only the server needs uvicorn, not the app or its tests.
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadDeadlineProtocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None
        _cycle_seen: object = None
        """The request whose head was complete last (uvicorn makes a cycle per request)."""

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._note_head()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            # A pipelined request may have been parsed already (its head is complete then).
            if not self._note_head() and not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _note_head(self) -> bool:
            """Whether a new request's head arrived; the deadline ends with it."""
            if self.cycle is None or self.cycle is self._cycle_seen:
                return False
            self._cycle_seen = self.cycle
            self._disarm()
            return True

        def _arm(self) -> None:
            self._disarm()
            self._head_timer = self.loop.call_later(timeout_s, self._expire)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _expire(self) -> None:
            self._head_timer = None
            if not self.transport.is_closing():
                self.transport.close()

    return HeadDeadlineProtocol
