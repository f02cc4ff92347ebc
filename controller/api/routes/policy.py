"""``/v1/policy``: read, write, plan, list and roll back the versioned policy.

Writes are compare-and-set through ``If-Match`` (the ETag is the version), so
two operators editing the same version cannot silently overwrite each other.
A write whose document is the active one's stores nothing and answers that
version with ``unchanged: true``.  The store's script also records each new
version on the events stream, so a version never exists without its event.
``?wait=applied`` holds the answer until every live switch confirms the new
version.  The store's calls are blocking Redis round trips; they run in the
thread pool so a slow Redis never stalls the event loop.

No ``from __future__ import annotations`` here: FastAPI reads the parameter
annotations of the routes built inside ``build_router`` at run time, and
those name values local to it (the settings' limits, the options dependency).
"""

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import redis
from fastapi import APIRouter, Depends, Header, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from controller.api.audit import note
from controller.api.auth import PrincipalDep
from controller.api.documents import (
    control_character_error,
    model_body,
    parse_model,
    validate_body,
)
from controller.api.errors import ApiError, invalid_input
from controller.api.openapi import POLICY_BODY
from controller.api.planning import LiveState, plan_switches
from controller.api.schemas import (
    ConflictOut,
    ErrorOut,
    HistoryEntryOut,
    HistoryOut,
    PlanOut,
    PolicyOut,
    PolicyWriteOut,
    RollbackIn,
    ValidationErrorOut,
    WaitTimeoutOut,
)
from controller.api.services import Services, ServicesDep
from controller.api.settings import ApiSettings
from controller.api.waiting import require_live_switch, wait_applied
from controller.policy.detection import DetectionSpec
from controller.policy.errors import FieldError, PolicyError
from controller.policy.jobs import stored_jobs
from controller.policy.load import parse_policy
from controller.policy.model import Policy
from controller.store.errors import StoreUnavailableError, UnknownVersionError
from controller.store.policies import ANY_VERSION, PolicyVersion, PolicyWrite
from controller.store.switches import SwitchReport

HISTORY_DEFAULT = 50
HISTORY_MAX = 500
IF_MATCH_PATTERN = r'^(\*|[1-9][0-9]{0,15}|"[1-9][0-9]{0,15}")$'

Responses = dict[int | str, dict[str, Any]]

_ETAG = {
    "ETag": {
        "description": 'The version, quoted: `"3"`. Send it back in If-Match to write safely.',
        "schema": {"type": "string"},
    }
}
_UNAVAILABLE: Responses = {503: {"model": ErrorOut, "description": "Redis unavailable"}}
_INVALID: Responses = {
    422: {"model": ValidationErrorOut, "description": "Invalid input: every error with its path"}
}
_WRITE: Responses = {
    201: {"description": "Stored and active (and applied, with wait=applied)", "headers": _ETAG},
    200: {
        "model": PolicyWriteOut,
        "description": "Unchanged: the document is the active version's already; nothing was"
        " stored or announced, and this is the active version (`unchanged: true`)",
        "headers": _ETAG,
    },
    409: {
        "model": ErrorOut,
        "description": "wait=applied and no live switch: nothing stored (or, if every switch"
        " left during the wait, stored and active but applied nowhere, with its ETag)",
    },
    412: {"model": ConflictOut, "description": "If-Match / If-None-Match names another version"},
    **_INVALID,
    **_UNAVAILABLE,
    504: {
        "model": WaitTimeoutOut,
        "description": "wait=applied: stored and active, not confirmed by every switch in time",
        "headers": _ETAG,
    },
}


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """What a write request says besides its document: who, why, whether to wait, on what."""

    author: str
    comment: str
    wait: bool
    timeout_s: float
    if_match: str | None
    if_none_match: str | None

    def expected_version(self, services: Services) -> int | None:
        """The store's ``expected_version`` for the request's precondition headers.

        ``If-Match: "3"`` (or ``3``) writes only over version 3; ``If-Match: *``
        only over some version; ``If-None-Match: *`` only when there is none yet.
        No header writes unconditionally.
        """
        if self.if_none_match is not None:
            return None
        if self.if_match is None:
            return ANY_VERSION
        if self.if_match == "*":
            if services.policies.active_version() is None:
                raise ApiError(
                    412,
                    "precondition failed: If-Match: * needs an active policy, there is none yet",
                    expected_version=None,
                    active_version=None,
                )
            return ANY_VERSION
        return int(self.if_match.strip('"'))


async def read_policy(request: Request) -> tuple[dict[str, Any], Policy]:
    """The body as a document and a validated policy; a 422 listing every error otherwise."""
    body = await request.body()
    return await run_in_threadpool(validate_body, body)


def _active(services: Services) -> tuple[PolicyVersion, dict[str, int]]:
    active = services.policies.active()
    if active is None:
        raise ApiError(
            404, "no policy stored yet: PUT /v1/policy (flowlane policy apply) creates version 1"
        )
    return active, services.live_applied()


def _history(services: Services, limit: int) -> HistoryOut:
    active = services.policies.active_version()
    return HistoryOut(
        active_version=active,
        versions=[
            HistoryEntryOut(
                version=v.version,
                author=v.author,
                created_at=v.created_at,
                comment=v.comment,
                rollback_of=v.rollback_of,
                active=v.version == active,
            )
            for v in services.policies.history(limit)
        ],
    )


def _rollback(services: Services, version: int, options: WriteOptions) -> PolicyWrite:
    old = services.policies.get(version)
    if old is None:
        raise UnknownVersionError(version)
    # Stored documents were valid when written; the model may have grown stricter since,
    # and the controller must never be handed a document it would refuse.
    parse_policy(old.document, source=f"version {version}")
    if options.wait:
        require_live_switch(services)
    return services.policies.rollback(
        version,
        author=options.author,
        comment=options.comment,
        expected_version=options.expected_version(services),
    )


async def _written(
    services: Services, write: PolicyWrite, options: WriteOptions, response: Response
) -> PolicyWriteOut:
    """The answer to a write that is stored (or was active already): after the wait if
    asked, with the versions the switches run.

    Redis failing from here on must not hide that the version exists: the 503
    then names it (and carries its ETag), so a client does not write it twice.
    """
    stored = write.policy
    etag = f'"{stored.version}"'
    try:
        if options.wait:
            await wait_applied(services, stored.version, options.timeout_s)
        applied = await run_in_threadpool(services.live_applied)
    except (StoreUnavailableError, redis.RedisError) as exc:
        raise ApiError(
            503,
            f"version {stored.version} is stored and active, but Redis failed afterwards: {exc}",
            headers={"ETag": etag},
            version=stored.version,
        ) from None
    response.headers["ETag"] = etag
    response.status_code = 200 if write.unchanged else 201
    return PolicyWriteOut.of_write(write, applied)


def _live_state(
    services: Services, reports: Sequence[SwitchReport]
) -> tuple[int | None, LiveState]:
    """The active version and what the dry run plans with besides the policy and each switch's
    inputs, read from Redis: the jobs, and the detection section of every version a switch
    planned from (its overrides survive only an unchanged one)."""
    versions = {
        report.inputs.policy_version
        for report in reports
        if report.inputs is not None and report.inputs.policy_version is not None
    }
    detections: dict[int, DetectionSpec | None] = {}
    for version in sorted(versions):
        stored = services.policies.get(version)
        if stored is not None:
            with contextlib.suppress(PolicyError):  # a stored version that no longer validates
                detections[version] = parse_policy(stored.document, f"version {version}").detection
    records = services.jobs.all()
    jobs, _ = stored_jobs((record.name, record.document) for record in records)
    tenants = {record.name: record.tenant for record in records}
    return services.policies.active_version(), LiveState(jobs, detections, tenants)


def build_router(settings: ApiSettings) -> APIRouter:
    """The routes; the wait limits come from ``settings``, so the OpenAPI schema states them."""
    router = APIRouter(prefix="/v1/policy", tags=["policy"])

    def write_options(
        request: Request,
        principal: PrincipalDep,
        comment: Annotated[
            str, Query(max_length=2000, description="Why; shown in the history")
        ] = "",
        wait: Annotated[
            Literal["applied"] | None,
            Query(description="`applied`: answer once every live switch confirms the version"),
        ] = None,
        timeout: Annotated[
            float | None,
            Query(
                gt=0,
                le=settings.max_wait_timeout_s,
                description=(
                    f"Seconds to wait with wait=applied (default"
                    f" {settings.default_wait_timeout_s:g}, at most"
                    f" {settings.max_wait_timeout_s:g})"
                ),
            ),
        ] = None,
        if_match: Annotated[
            str | None,
            Header(
                pattern=IF_MATCH_PATTERN,
                description='Write only over this version: `"3"`, `3`, or `*` (any version)',
            ),
        ] = None,
        if_none_match: Annotated[
            str | None,
            Header(pattern=r"^\*$", description="`*`: write only if no policy exists yet"),
        ] = None,
    ) -> WriteOptions:
        if if_match is not None and if_none_match is not None:
            raise invalid_input(
                [FieldError("header.if-none-match", "send If-Match or If-None-Match, not both")]
            )
        if "author" in request.query_params:
            raise invalid_input(
                [FieldError("query.author", "the author is the name of the request's token")]
            )
        if (problem := control_character_error(comment)) is not None:
            raise invalid_input([FieldError("query.comment", problem)])
        return WriteOptions(
            author=principal.name,  # the token's name: a request cannot claim another author
            comment=comment,
            wait=wait == "applied",
            timeout_s=timeout if timeout is not None else settings.default_wait_timeout_s,
            if_match=if_match,
            if_none_match=if_none_match,
        )

    options_dep = Depends(write_options)

    @router.get(
        "",
        response_model=PolicyOut,
        responses={
            200: {"headers": _ETAG},
            404: {"model": ErrorOut, "description": "No policy yet"},
            **_UNAVAILABLE,
        },
    )
    async def get_policy(response: Response, services: ServicesDep) -> PolicyOut:
        """The active version, its document, and the version each live switch runs."""
        active, applied = await run_in_threadpool(_active, services)
        response.headers["ETag"] = f'"{active.version}"'
        return PolicyOut.of(active, applied)

    @router.put(
        "",
        status_code=201,
        response_model=PolicyWriteOut,
        responses=_WRITE,
        openapi_extra=POLICY_BODY,
    )
    async def put_policy(
        request: Request,
        response: Response,
        services: ServicesDep,
        options: Annotated[WriteOptions, options_dep],
    ) -> PolicyWriteOut:
        """Validate the document, store it as the next version and make it active (201).

        Nothing is stored when the document is invalid (422, every error with
        its path), the precondition fails (412), or the document is the active
        version's already (200 with that version and `unchanged: true`).
        """
        document, _ = await read_policy(request)

        def store() -> PolicyWrite:
            # One hand-off to a worker thread for every Redis step before the write: each
            # hand-off waits its turn on a busy interpreter, and a policy change is timed
            # from the request to the last switch's confirmation.
            note(request, before=services.policies.active_version())
            expected = options.expected_version(services)
            if options.wait:
                require_live_switch(services)
            return services.policies.write(
                document,
                author=options.author,
                comment=options.comment,
                expected_version=expected,
            )

        written = await run_in_threadpool(store)
        note(request, after=written.policy.version, unchanged=written.unchanged)
        return await _written(services, written, options, response)

    @router.post(
        "/plan",
        response_model=PlanOut,
        responses={**_INVALID, **_UNAVAILABLE},
        openapi_extra=POLICY_BODY,
    )
    async def plan_policy(request: Request, services: ServicesDep) -> PlanOut:
        """What the document would change on every live switch: flows, groups, meters and port
        queues, planned from the inputs each switch last published.

        Nothing is stored or applied.
        """
        _, policy = await read_policy(request)
        reports = await run_in_threadpool(services.live_reports)
        applied = await run_in_threadpool(services.switches.applied)
        live = await run_in_threadpool(_live_state, services, reports)
        return await run_in_threadpool(plan_switches, policy, reports, applied, *live)

    @router.get("/history", response_model=HistoryOut, responses={**_INVALID, **_UNAVAILABLE})
    async def policy_history(
        services: ServicesDep,
        limit: Annotated[
            int, Query(ge=1, le=HISTORY_MAX, description="How many versions, newest first")
        ] = HISTORY_DEFAULT,
    ) -> HistoryOut:
        """Stored versions, newest first (documents left out: GET /v1/policy shows the active)."""
        return await run_in_threadpool(_history, services, limit)

    @router.post(
        "/rollback",
        status_code=201,
        response_model=PolicyWriteOut,
        responses={
            **_WRITE,
            404: {"model": ErrorOut, "description": "No such version (or trimmed from history)"},
        },
        openapi_extra=model_body(RollbackIn),
    )
    async def rollback_policy(
        request: Request,
        response: Response,
        services: ServicesDep,
        options: Annotated[WriteOptions, options_dep],
    ) -> PolicyWriteOut:
        """Store an old version's document as the next version (history moves forward).

        Body: ``{"version": N}``.  Rolling back to the active document stores
        nothing (200, `unchanged: true`); a version trimmed from the history is 404.
        """
        body = await run_in_threadpool(parse_model, await request.body(), RollbackIn)
        note(
            request,
            before=await run_in_threadpool(services.policies.active_version),
            rollback_to=body.version,
        )
        written = await run_in_threadpool(_rollback, services, body.version, options)
        note(request, after=written.policy.version, unchanged=written.unchanged)
        return await _written(services, written, options, response)

    return router
