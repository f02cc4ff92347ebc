"""Bearer tokens on every route: who the caller is, and whether their role may.

Each route states the role it needs in ``openapi_extra`` under
``x-flowlane-role`` (``public`` for the health probes), and the OpenAPI
document carries it, so tests generated from that document cover every
route. A route that states nothing needs ``viewer`` for a read and ``admin``
for anything else: a new route is never open by accident.

The check is one app-wide dependency, run before the route's own: a
missing or unknown token is 401 with ``WWW-Authenticate: Bearer``, a role
too low is 403 naming the role needed. The caller is then in
``request.state.principal`` for the route and the audit log.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Annotated, Any, Final

from fastapi import Depends, Request
from starlette.concurrency import run_in_threadpool

from controller.api.errors import ApiError
from controller.auth.model import Principal, Role

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


async def authorize(request: Request) -> None:
    needed = route_role(request.scope.get("route"))
    if needed is None:
        return
    secret = bearer_secret(request.headers.get("authorization"))
    if secret is None:
        raise ApiError(
            401,
            "no bearer token: send 'Authorization: Bearer <token>'"
            " (flowlane token create makes one; the first admin token is in the API's token file)",
            headers={"WWW-Authenticate": BEARER},
        )
    services = request.app.state.services
    record = await run_in_threadpool(services.tokens.authenticate, secret)
    if record is None:
        raise ApiError(
            401,
            "invalid token: unknown, revoked or expired",
            headers={"WWW-Authenticate": f'{BEARER}, error="invalid_token"'},
        )
    principal = record.principal()
    request.state.principal = principal
    if not principal.may(needed):
        raise ApiError(
            403,
            f"token {principal.name!r} has role {principal.role.name}; this needs {needed.name}",
        )


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
