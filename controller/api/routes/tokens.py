"""``/v1/tokens`` and ``/v1/audit``: who may use the API, and what they did (admin only).

A token's secret is in the answer to its creation and nowhere else: the
store keeps its hash. Revoking deletes it at once; the next request
carrying it is 401.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from starlette.concurrency import run_in_threadpool

from controller.api.audit import note
from controller.api.auth import needs
from controller.api.documents import parse_model
from controller.api.errors import ApiError, invalid_input
from controller.api.routes.events import (
    MAX_LIMIT,
    STREAM_ID_PATTERN,
    check_stream_id,
    collect,
    event_out,
)
from controller.api.routes.jobs import NAME_PATTERN, inline_body
from controller.api.schemas import ErrorOut, EventsOut, ValidationErrorOut
from controller.api.services import Services, ServicesDep
from controller.auth.model import Role
from controller.policy.errors import FieldError
from controller.policy.units import parse_duration
from controller.store.events import Event
from controller.store.tokens import TokenExistsError, TokenRecord

router = APIRouter(prefix="/v1", tags=["access"])
ADMIN = needs(Role.admin)

_RESPONSES: dict[int | str, dict[str, Any]] = {
    422: {"model": ValidationErrorOut, "description": "Invalid input: every error with its path"},
    503: {"model": ErrorOut, "description": "Redis unavailable"},
}

TokenName = Annotated[str, Path(pattern=NAME_PATTERN, description="The token's name")]


class TokenIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN, description="Shown as the author of its writes")
    role: str = Field(description="`viewer`, `operator` or `admin`")
    tenant: str | None = Field(
        default=None, pattern=NAME_PATTERN, description="Limit it to one tenant of the policy"
    )
    ttl: str | None = Field(default=None, description="`30d`, `12h`... (absent: no expiry)")

    @field_validator("role")
    @classmethod
    def _role(cls, value: str) -> str:
        return Role.parse(value).name

    @model_validator(mode="after")
    def _tenant(self) -> TokenIn:
        if self.tenant is not None and self.role == Role.admin.name:
            raise ValueError(
                "an admin token cannot have a tenant: an admin writes the policy that"
                " declares the tenants; give the tenant a viewer or operator token"
            )
        return self

    @field_validator("ttl")
    @classmethod
    def _ttl(cls, value: str | None) -> str | None:
        if value is not None and parse_duration(value) <= 0:
            raise ValueError("ttl must be positive")
        return value


class TokenOut(BaseModel):
    name: str
    role: str
    tenant: str | None
    created_at: float = Field(description="Unix time")
    expires_at: float | None = Field(description="Unix time; null: never")
    last_used: float | None = Field(description="Unix time, to the minute; null: never used")

    @staticmethod
    def of(record: TokenRecord) -> TokenOut:
        return TokenOut.model_validate(record.to_dict())


class NewTokenOut(TokenOut):
    token: str = Field(description="The secret: shown this once, only its hash is kept")


class TokensOut(BaseModel):
    tokens: list[TokenOut]


def _create(services: Services, spec: TokenIn) -> NewTokenOut:
    ttl_s = parse_duration(spec.ttl) if spec.ttl is not None else None
    try:
        record, secret = services.tokens.create(
            spec.name, Role.parse(spec.role), tenant=spec.tenant, ttl_s=ttl_s
        )
    except TokenExistsError as exc:
        raise ApiError(409, str(exc)) from None
    return NewTokenOut(**TokenOut.of(record).model_dump(), token=secret)


@router.post(
    "/tokens",
    status_code=201,
    response_model=NewTokenOut,
    responses={409: {"model": ErrorOut, "description": "The name is taken"}, **_RESPONSES},
    openapi_extra={**inline_body(TokenIn, "The new token's name, role, tenant and ttl"), **ADMIN},
)
async def create_token(request: Request, services: ServicesDep) -> NewTokenOut:
    """Create a token (201); its secret is in this answer only."""
    spec = await run_in_threadpool(parse_model, await request.body(), TokenIn)
    note(request, token_name=spec.name, token_role=spec.role, token_tenant=spec.tenant)
    return await run_in_threadpool(_create, services, spec)


@router.get("/tokens", response_model=TokensOut, responses=_RESPONSES, openapi_extra=ADMIN)
async def list_tokens(services: ServicesDep) -> TokensOut:
    """Every token: name, role, tenant, creation, expiry and last use (never the secret)."""
    records = await run_in_threadpool(services.tokens.all)
    return TokensOut(tokens=[TokenOut.of(record) for record in records])


@router.delete(
    "/tokens/{name}",
    status_code=204,
    response_class=Response,
    responses={404: {"model": ErrorOut, "description": "No token of that name"}, **_RESPONSES},
    openapi_extra=ADMIN,
)
async def revoke_token(name: TokenName, request: Request, services: ServicesDep) -> Response:
    """Revoke a token (204): the next request carrying it is 401."""
    note(request, token_name=name)
    if not await run_in_threadpool(services.tokens.revoke, name):
        raise ApiError(404, f"no token {name!r}")
    return Response(status_code=204)


def _audit(services: Services, since: str | None, limit: int) -> EventsOut:
    def read(start: str | None, count: int) -> list[Event]:
        return services.audit.read(since=start, limit=count)

    entries, last_id = collect(read, since, limit)
    return EventsOut(events=[event_out(entry) for entry in entries], last_id=last_id)


@router.get("/audit", response_model=EventsOut, responses=_RESPONSES, openapi_extra=ADMIN)
async def audit(
    services: ServicesDep,
    since: Annotated[
        str | None,
        Query(pattern=STREAM_ID_PATTERN, description="Only entries after this id (a `last_id`)"),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="At most this many")] = 100,
) -> EventsOut:
    """Writes and refused attempts, oldest first: who, from where, what, and the outcome.

    Each entry's ``kind`` is its outcome (`ok`, `refused`, `failed`).
    """
    if since is not None:
        try:
            since = check_stream_id(since)
        except ValueError as exc:
            raise invalid_input([FieldError("query.since", str(exc))]) from None
    return await run_in_threadpool(_audit, services, since, limit)
