"""Every failure becomes a JSON body with a ``detail``, and the right status.

- invalid input (ours or FastAPI's)  → 422 ``{"detail", "errors": [{"path", "message"}]}``
- a stale If-Match / If-None-Match   → 412 ``{"detail", "expected_version", "active_version"}``
- an unknown version                 → 404 ``{"detail"}``
- Redis unreachable or failing       → 503 ``{"detail": "Redis unavailable: ..."}``
- a write not on enough replicas     → 503 ``{"detail", "replicas", "required_replicas"}``
  (the store URL's ``min_replicas``: the write may exist on the primary only)
- no live switch to wait for         → 409 ``{"detail"}`` (``ApiError``, see ``waiting.py``)
- switches slow to confirm           → 504 ``{"detail", "version", "pending"}`` (``ApiError``)

Every 503 carries ``Retry-After``: Redis coming back, or a controller
beating again, is what a client waits for, and nothing it sends changes that.

Mapping exceptions here keeps the routes free of ``try`` blocks, and means a
Redis outage turns into a 503 on every route without each one knowing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import redis
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError

from controller.policy.errors import FieldError, PolicyError, field_errors, format_path
from controller.store.errors import (
    NotReplicatedError,
    StoreUnavailableError,
    UnknownVersionError,
    VersionConflictError,
)

_PREFIXES = ("Value error, ", "Assertion failed, ")

RETRY_AFTER_S = 2
"""Seconds a client is asked to wait after a 503: two controller heartbeats, and about
what a Redis restart takes; the API recovers on its own, so the retry is all it needs."""


class ApiError(Exception):
    """A response decided by a route: a status, a ``detail`` and any extra body fields."""

    def __init__(
        self,
        status_code: int,
        detail: str,
        *,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail)
        self.status_code = status_code
        self.detail = detail
        self.headers = headers
        self.extra = extra


def invalid_input(errors: Sequence[FieldError], what: str = "request") -> ApiError:
    """A 422 with every error, for problems found outside pydantic (headers, say)."""
    return ApiError(
        422,
        f"invalid {what}: {len(errors)} error(s)",
        errors=[{"path": e.path, "message": e.message} for e in errors],
    )


def printable(text: str) -> str:
    """A string JSON can encode as UTF-8: lone surrogates (``"\\ud800"`` in JSON) escaped."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _message(raw: str) -> str:
    for prefix in _PREFIXES:
        if raw.startswith(prefix):
            return raw[len(prefix) :]
    return raw


def validation_errors(
    exc: ValidationError, model: type[BaseModel] | None = None
) -> list[FieldError]:
    """A pydantic error of a body ``model``, in our path syntax (``version``, ``(document)``);
    an unknown key says which of the model's fields was probably meant."""
    return [
        FieldError(printable(error.path), printable(error.message))
        for error in field_errors(exc, model)
    ]


def request_error_paths(errors: Iterable[Any]) -> list[FieldError]:
    """FastAPI's locations in our path syntax.

    A body field reads like a policy path (``version``, ``rules[0].name``);
    query and header parameters keep their location: ``query.timeout``,
    ``header.if-match``.
    """
    converted: list[FieldError] = []
    for error in errors:
        location = tuple(error.get("loc", ()))
        kind = error.get("type", "")
        message = _message(str(error.get("msg", "invalid")))
        if kind == "json_invalid":
            detail = (error.get("ctx") or {}).get("error", "")
            converted.append(FieldError("(document)", f"invalid JSON: {detail}".rstrip(": ")))
            continue
        if location and location[0] == "body":
            path = format_path(location[1:])
        elif location:
            rest = format_path(location[1:])
            path = f"{location[0]}.{rest}" if location[1:] else str(location[0])
        else:
            path = "(request)"
        converted.append(FieldError(printable(path), printable(message)))
    return converted


def _errors_response(detail: str, errors: Sequence[FieldError]) -> JSONResponse:
    return JSONResponse(
        status_code=422,
        content={
            "detail": detail,
            "errors": [
                {"path": printable(e.path), "message": printable(e.message)} for e in errors
            ],
        },
    )


def _with_retry_after(status_code: int, headers: dict[str, str] | None) -> dict[str, str] | None:
    if status_code != 503 or any(name.lower() == "retry-after" for name in headers or {}):
        return headers
    return {**(headers or {}), "Retry-After": str(RETRY_AFTER_S)}


async def _api_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return JSONResponse(
        status_code=exc.status_code,
        content={"detail": printable(exc.detail), **exc.extra},
        headers=_with_retry_after(exc.status_code, exc.headers),
    )


async def _policy_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, PolicyError)
    return _errors_response(f"invalid policy: {len(exc.errors)} error(s)", exc.errors)


async def _request_validation(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = request_error_paths(exc.errors())
    return _errors_response(f"invalid request: {len(errors)} error(s)", errors)


async def _conflict(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, VersionConflictError)
    active = "none" if exc.active is None else str(exc.active)
    expected = "no policy" if exc.expected is None else f"version {exc.expected}"
    return JSONResponse(
        status_code=412,
        content={
            "detail": f"precondition failed: expected {expected}, the active version is {active}",
            "expected_version": exc.expected,
            "active_version": exc.active,
        },
    )


async def _unknown_version(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, UnknownVersionError)
    return JSONResponse(status_code=404, content={"detail": f"no policy version {exc.version}"})


async def _unavailable(_: Request, exc: Exception) -> JSONResponse:
    # StoreUnavailableError already reads "Redis unavailable: ..."; a bare
    # redis-py error (a PING, a server-side error) gets the same prefix.
    detail = str(exc) if isinstance(exc, StoreUnavailableError) else f"Redis unavailable: {exc}"
    return JSONResponse(
        status_code=503,
        content={"detail": printable(detail)},
        headers=_with_retry_after(503, None),
    )


async def _not_replicated(_: Request, exc: Exception) -> JSONResponse:
    # Never a 2xx: the primary took the write but too few replicas confirmed it, so a
    # failover now could lose it. The client reads back before it writes again.
    assert isinstance(exc, NotReplicatedError)
    return JSONResponse(
        status_code=503,
        content={
            "detail": str(exc),
            "replicas": exc.replicas,
            "required_replicas": exc.required,
        },
        headers=_with_retry_after(503, None),
    )


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(PolicyError, _policy_error)
    app.add_exception_handler(RequestValidationError, _request_validation)
    app.add_exception_handler(VersionConflictError, _conflict)
    app.add_exception_handler(UnknownVersionError, _unknown_version)
    app.add_exception_handler(NotReplicatedError, _not_replicated)
    app.add_exception_handler(StoreUnavailableError, _unavailable)
    app.add_exception_handler(redis.RedisError, _unavailable)
