"""Bearer tokens on every route: who the caller is, and whether their role may.

Each route states the role it needs in ``openapi_extra`` under
``x-flowlane-role`` (``public`` for the health probes), and the OpenAPI
document carries it, so tests generated from that document cover every
route. A route that states nothing needs ``viewer`` for a read and ``admin``
for anything else: a new route is never open by accident.

The check runs from the request's headers alone, before any byte of its
body is read (``AuthGateMiddleware``, in front of the body limit): a client
without a valid token costs the API a header parse and a hash lookup, never
a body buffer. A missing or unknown token is 401 with ``WWW-Authenticate:
Bearer``, a role too low is 403 naming the role needed, and a client address
that keeps failing gets 429 with ``Retry-After`` (``FailureLimiter``) while a
valid token from it still works. A request that matches no route needs a
valid token too, so that probing unknown paths is refused like the rest
(401) and only a caller with a token learns that a path does not exist.
Such a refusal closes the connection when the request announced a body:
the rest of it is never read. The caller is then in
``request.state.principal`` for the route and the audit log; the app-wide
dependency ``authorize`` checks the role again for the matched route.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final

import redis
from fastapi import Depends, Request
from fastapi.routing import APIRoute, iter_route_contexts
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Match, compile_path
from starlette.types import ASGIApp, Receive, Scope, Send

from controller.api.errors import RETRY_AFTER_S, ApiError, printable
from controller.api.limits import CLOSE, FailureLimiter, client_key, has_body, retry_after
from controller.auth.model import Principal, Role
from controller.store.errors import StoreUnavailableError

ROLE_KEY: Final = "x-flowlane-role"
PUBLIC: Final = "public"
READS: Final = frozenset({"GET", "HEAD"})
BEARER: Final = 'Bearer realm="flowlane"'


def needs(role: Role | None) -> dict[str, Any]:
    """``openapi_extra`` of a route that needs ``role`` (None: open to anyone)."""
    return {ROLE_KEY: role.name if role is not None else PUBLIC}


def needed_role(methods: Collection[str], extra: Mapping[str, Any] | None) -> Role | None:
    """The role a route needs; None for a public route."""
    declared = (extra or {}).get(ROLE_KEY)
    if declared == PUBLIC:
        return None
    if declared is not None:
        return Role.parse(str(declared))
    return Role.viewer if set(methods) <= READS else Role.admin


def bearer_secret(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, else None."""
    if header is None:
        return None
    scheme, _, secret = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        return None
    return secret.strip()


def route_role(route: object) -> Role | None:
    """The role the matched route needs (FastAPI puts the route, or a proxy of it, in the
    request's scope); a route it cannot read needs ``admin``."""
    methods = getattr(route, "methods", None)
    if not methods:
        return Role.admin
    return needed_role(methods, getattr(route, "openapi_extra", None))


@dataclass(frozen=True, slots=True)
class _Operation:
    pattern: re.Pattern[str]
    methods: frozenset[str]
    role: Role | None
    route: object
    """What the audit and the metrics read the route template from (``.path``)."""


class RouteTable:
    """The app's operations as (path pattern, methods, role), flattened once.

    The gate must know a request's role before the router runs (the router
    is where FastAPI reads the body), so it matches the method and path
    itself: each operation's full path template, compiled as Starlette
    compiles it, and the plain routes (docs pages, their assets) by their
    own ``matches``.
    """

    def __init__(self, routes: Sequence[BaseRoute]) -> None:
        self.operations: list[_Operation] = []
        self.plain: list[BaseRoute] = []
        for context in iter_route_contexts(routes):
            original = context.original_route
            if isinstance(original, APIRoute) and context.path is not None:
                methods = frozenset(context.methods or ())
                pattern, _, _ = compile_path(context.path)
                role = needed_role(methods, getattr(context, "openapi_extra", None))
                self.operations.append(_Operation(pattern, methods, role, context))
            else:
                self.plain.append(original)

    def role(self, scope: Scope) -> tuple[Role | None, object | None]:
        """The role a request needs, and its operation: the matched operation's role; None
        for the plain routes (the docs pages and their assets, public by design); ``viewer``
        when nothing matches (a 404, a 405 or a redirect, which only a caller with a token
        gets to see)."""
        path, method, root = scope["path"], scope["method"], scope.get("root_path", "")
        if root and path.startswith(root):  # routes are matched below the mount point
            path = path[len(root) :]
        for operation in self.operations:
            if method in operation.methods and operation.pattern.match(path):
                return operation.role, operation.route
        for route in self.plain:
            if route.matches(scope)[0] is Match.FULL:
                return None, None
        return Role.viewer, None


async def identify(
    tokens: Any, limiter: FailureLimiter, headers: Mapping[str, str], client: str | None
) -> Principal:
    """The caller of a request, from its ``Authorization`` header; ApiError 401 when it has
    no valid token, 429 when its address has failed too often lately. A valid token is
    looked up first, so it is never held back by others' failures from the same address."""
    secret = bearer_secret(headers.get("authorization"))
    record = None if secret is None else await run_in_threadpool(tokens.authenticate, secret)
    if record is not None:
        principal: Principal = record.principal()
        return principal
    key = client_key(client)
    wait = limiter.fail(key)
    if wait is not None:
        after = retry_after(wait)
        raise ApiError(
            429,
            f"too many failed authentications from {key}: {limiter.burst} at once, then"
            f" {limiter.rate:g} a second; retry in {after} s with a valid token",
            headers={"Retry-After": after},
        )
    if secret is None:
        raise ApiError(
            401,
            "no bearer token: send 'Authorization: Bearer <token>'"
            " (flowlane token create makes one; the first admin token is in the API's token file)",
            headers={"WWW-Authenticate": BEARER},
        )
    raise ApiError(
        401,
        "invalid token: unknown, revoked or expired",
        headers={"WWW-Authenticate": f'{BEARER}, error="invalid_token"'},
    )


def permit(principal: Principal, needed: Role) -> None:
    if not principal.may(needed):
        raise ApiError(
            403,
            f"token {principal.name!r} has role {principal.role.name}; this needs {needed.name}",
        )


class AuthGateMiddleware:
    """The token and its role, checked before anything reads the request's body."""

    def __init__(self, app: ASGIApp, limiter: FailureLimiter) -> None:
        self.app = app
        self.limiter = limiter
        self._table: RouteTable | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self._table is None:  # the routes are all in place by the first request
            self._table = RouteTable(scope["app"].routes)
        needed, operation = self._table.role(scope)
        if needed is None:
            await self.app(scope, receive, send)
            return
        if operation is not None:  # as the router will: a refusal's audit names its route
            scope["route"] = operation
        client = scope.get("client")
        services = scope["app"].state.services
        try:
            principal = await identify(
                services.tokens, self.limiter, Headers(scope=scope), client[0] if client else None
            )
            # Known before its role is checked: a 403's audit entry names the token.
            scope.setdefault("state", {})["principal"] = principal
            permit(principal, needed)
        except ApiError as refused:
            headers = dict(refused.headers or {}) | (CLOSE if has_body(scope) else {})
            response = JSONResponse(
                {"detail": printable(refused.detail)}, refused.status_code, headers=headers
            )
            await response(scope, receive, send)
            return
        except (StoreUnavailableError, redis.RedisError) as exc:
            # As errors.py answers it: the check needs Redis, so it is a 503 like any route's.
            detail = (
                str(exc) if isinstance(exc, StoreUnavailableError) else f"Redis unavailable: {exc}"
            )
            response = JSONResponse(
                {"detail": printable(detail)},
                503,
                headers={"Retry-After": str(RETRY_AFTER_S)} | (CLOSE if has_body(scope) else {}),
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def authorize(request: Request) -> None:
    """The matched route's role, for the caller the gate identified (or, in an app built
    without the gate, identified here)."""
    needed = route_role(request.scope.get("route"))
    if needed is None:
        return
    principal = getattr(request.state, "principal", None)
    if not isinstance(principal, Principal):
        client = request.client.host if request.client is not None else None
        principal = await identify(
            request.app.state.services.tokens,
            request.app.state.auth_limiter,
            request.headers,
            client,
        )
        request.state.principal = principal
    permit(principal, needed)


def principal_of(request: Request) -> Principal:
    principal = getattr(request.state, "principal", None)
    if not isinstance(principal, Principal):  # a public route asked for its caller
        raise ApiError(401, "no bearer token", headers={"WWW-Authenticate": BEARER})
    return principal


PrincipalDep = Annotated[Principal, Depends(principal_of)]


def mark_openapi(schema: dict[str, Any]) -> None:
    """Give every operation its effective role and the bearer scheme (none when public)."""
    components = schema.setdefault("components", {})
    components.setdefault("securitySchemes", {})["bearer"] = {
        "type": "http",
        "scheme": "bearer",
        "description": "A flowlane API token (`flowlane token create`)",
    }
    for operations in schema.get("paths", {}).values():
        for method, operation in operations.items():
            declared = operation.get(ROLE_KEY)
            role = needed_role({method.upper()}, {ROLE_KEY: declared} if declared else None)
            operation[ROLE_KEY] = role.name if role is not None else PUBLIC
            operation["security"] = [] if role is None else [{"bearer": []}]
            if role is not None:
                responses = operation.setdefault("responses", {})
                responses.setdefault("401", {"description": "No token, or an invalid one"})
                below = f"The token's role is below {role.name}"
                responses.setdefault("403", {"description": below})
