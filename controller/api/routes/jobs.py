"""``/v1/jobs``: register, list and delete jobs, the run-time half of classification.

A scheduler registers a job (``POST``) naming a class of the active policy
and the endpoints its run landed on; the controllers follow the store's
channel and re-plan.  A job lives ``ttl`` seconds after its latest
registration, so a scheduler keeps it with a periodic re-``POST`` and a
forgotten one goes away by itself.  Expired jobs are invisible at once (the
store filters them); every request also purges them, which records an
``expired`` event, so the events stream says when each job ended.

The store's calls are blocking Redis round trips; they run in the thread pool.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from controller.api.audit import note
from controller.api.auth import PrincipalDep, needs
from controller.api.documents import SOURCE, parse_model
from controller.api.errors import ApiError, invalid_input
from controller.api.schemas import ErrorOut, JobOut, JobsOut, ValidationErrorOut
from controller.api.scopes import scope_for
from controller.api.services import Services, ServicesDep
from controller.auth.model import Principal, Role
from controller.auth.tenancy import Scope
from controller.policy.jobs import JobSpec, job_errors
from controller.policy.tenants import tenants_of
from controller.store.jobs import JobOwnedError, JobRecord

NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_.-]{0,62}$"
"""The policy's name pattern (``controller.policy.model.Name``): a job is named like a rule."""

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

Responses = dict[int | str, dict[str, Any]]
_UNAVAILABLE: Responses = {503: {"model": ErrorOut, "description": "Redis unavailable"}}
_INVALID: Responses = {
    422: {"model": ValidationErrorOut, "description": "Invalid input: every error with its path"}
}
_NOT_FOUND: Responses = {404: {"model": ErrorOut, "description": "No live job of that name"}}

JobName = Annotated[str, Path(pattern=NAME_PATTERN, description="The job's name")]


def inline_body(model: type[BaseModel], description: str) -> dict[str, Any]:
    """``openapi_extra`` for a body the route reads itself, with the model's schema inlined.

    ``install_openapi`` does not add such models to ``components`` (its
    ``body_models`` argument is unused), so a ``$ref`` would dangle and
    schemathesis would send no body at all; inlining the nested models keeps
    the documentation true whatever becomes of that.
    """
    schema = model.model_json_schema(by_alias=True)
    definitions: dict[str, Any] = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            reference = node.get("$ref")
            if isinstance(reference, str) and reference.startswith("#/$defs/"):
                return resolve(copy.deepcopy(definitions[reference.removeprefix("#/$defs/")]))
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    return {
        "requestBody": {
            "required": True,
            "description": description,
            "content": {"application/json": {"schema": resolve(schema)}},
        }
    }


def job_out(record: JobRecord) -> JobOut:
    return JobOut.model_validate(record.to_dict())


def class_names(document: dict[str, Any]) -> list[str]:
    """The classes of a stored policy document, in order (stored documents were validated)."""
    classes = document.get("classes")
    return [str(name) for name in classes] if isinstance(classes, dict) else []


def _purge(services: Services) -> None:
    """Delete expired jobs, and say so on the events stream."""
    for name in services.jobs.purge():
        services.events.append("job", {"name": name, "op": "expired"})


def _register(services: Services, spec: JobSpec, principal: Principal) -> JobRecord:
    active = services.policies.active()
    if active is None:
        raise ApiError(
            409,
            "no policy stored yet: a job names a class of the active policy;"
            " PUT /v1/policy (flowlane policy apply) first",
        )
    errors = job_errors(spec, class_names(active.document))
    if errors:
        raise invalid_input(errors, SOURCE)
    scope = Scope.of(principal, tenants_of(active.document))
    refusal = scope.job_refusal(spec)
    if refusal is not None:
        raise ApiError(403, refusal)
    _purge(services)
    document = spec.document()
    try:
        record = services.jobs.put(spec.name, document, spec.ttl, tenant=scope.tenant)
    except JobOwnedError as exc:
        raise ApiError(409, str(exc)) from None
    services.events.append(
        "job",
        {
            "name": spec.name,
            "op": "registered",
            "class": spec.traffic_class,
            "endpoints": document["endpoints"],
        },
    )
    return record


def _list(services: Services, principal: Principal) -> JobsOut:
    _purge(services)
    scope = scope_for(services, principal)
    return JobsOut(
        jobs=[job_out(record) for record in services.jobs.all() if scope.owns(record.tenant)]
    )


def _get(services: Services, name: str, principal: Principal) -> JobOut:
    _purge(services)
    record = services.jobs.get(name)
    # Another tenant's job is answered as absent: its name says nothing to this caller.
    if record is None or not scope_for(services, principal).owns(record.tenant):
        raise ApiError(404, f"no job {name!r}")
    return job_out(record)


def _delete(services: Services, name: str, principal: Principal) -> None:
    _purge(services)
    if not services.jobs.delete(name, tenant=principal.tenant):
        raise ApiError(404, f"no job {name!r}")
    services.events.append("job", {"name": name, "op": "deleted"})


@router.post(
    "",
    status_code=201,
    response_model=JobOut,
    responses={
        201: {
            "description": "Stored (or replaced, its TTL restarted)",
            "headers": {"Location": {"schema": {"type": "string"}, "description": "The job"}},
        },
        403: {"model": ErrorOut, "description": "An endpoint is outside the token's tenant"},
        409: {
            "model": ErrorOut,
            "description": "No policy yet (the class cannot be checked),"
            " or another tenant's job has the name",
        },
        **_INVALID,
        **_UNAVAILABLE,
    },
    openapi_extra={
        **inline_body(JobSpec, "A job: its name, class, endpoints and ttl"),
        **needs(Role.operator),
    },
)
async def register_job(
    request: Request, response: Response, services: ServicesDep, principal: PrincipalDep
) -> JobOut:
    """Register a job, or replace the one of that name and restart its TTL (201).

    The class must be one of the active policy's (422 at path ``class``
    otherwise, 409 while there is no policy).  Nothing is stored when the
    body is invalid.  A tenant's token registers endpoints inside its
    networks only (403 naming the others) and cannot replace another
    tenant's job (409).  Re-sending the same job is harmless, so a client may
    retry after a 503.
    """
    spec = await run_in_threadpool(parse_model, await request.body(), JobSpec)
    note(request, job=spec.name)
    record = await run_in_threadpool(_register, services, spec, principal)
    response.headers["Location"] = f"/v1/jobs/{spec.name}"
    return job_out(record)


@router.get("", response_model=JobsOut, responses=_UNAVAILABLE)
async def list_jobs(services: ServicesDep, principal: PrincipalDep) -> JobsOut:
    """Live jobs, by name; expired ones are purged (and an ``expired`` event recorded).
    A tenant's token sees its tenant's jobs only."""
    return await run_in_threadpool(_list, services, principal)


@router.get("/{name}", response_model=JobOut, responses={**_NOT_FOUND, **_INVALID, **_UNAVAILABLE})
async def get_job(name: JobName, services: ServicesDep, principal: PrincipalDep) -> JobOut:
    """One live job (404 when there is none of that name, it expired, or it is another
    tenant's)."""
    return await run_in_threadpool(_get, services, name, principal)


@router.delete(
    "/{name}",
    status_code=204,
    response_class=Response,
    responses={
        204: {"description": "Deleted"},
        **_NOT_FOUND,
        **_INVALID,
        **_UNAVAILABLE,
    },
    openapi_extra=needs(Role.operator),
)
async def delete_job(
    name: JobName, request: Request, services: ServicesDep, principal: PrincipalDep
) -> Response:
    """Delete a live job (204); its flows fall back to the rules and the default class.
    A tenant's token deletes its tenant's jobs only (404 for others)."""
    note(request, job=name)
    await run_in_threadpool(_delete, services, name, principal)
    return Response(status_code=204)
