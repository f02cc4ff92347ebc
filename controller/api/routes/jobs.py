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
from controller.api.auth import needs
from controller.api.documents import SOURCE, parse_model
from controller.api.errors import ApiError, invalid_input
from controller.api.schemas import ErrorOut, JobOut, JobsOut, ValidationErrorOut
from controller.api.services import Services, ServicesDep
from controller.auth.model import Role
from controller.policy.jobs import JobSpec, job_errors
from controller.store.jobs import JobRecord

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


def _register(services: Services, spec: JobSpec) -> JobRecord:
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
    _purge(services)
    document = spec.document()
    record = services.jobs.put(spec.name, document, spec.ttl)
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


def _list(services: Services) -> JobsOut:
    _purge(services)
    return JobsOut(jobs=[job_out(record) for record in services.jobs.all()])


def _get(services: Services, name: str) -> JobOut:
    _purge(services)
    record = services.jobs.get(name)
    if record is None:
        raise ApiError(404, f"no job {name!r}")
    return job_out(record)


def _delete(services: Services, name: str) -> None:
    _purge(services)
    if not services.jobs.delete(name):
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
        409: {"model": ErrorOut, "description": "No policy yet: the class cannot be checked"},
        **_INVALID,
        **_UNAVAILABLE,
    },
    openapi_extra={
        **inline_body(JobSpec, "A job: its name, class, endpoints and ttl"),
        **needs(Role.operator),
    },
)
async def register_job(request: Request, response: Response, services: ServicesDep) -> JobOut:
    """Register a job, or replace the one of that name and restart its TTL (201).

    The class must be one of the active policy's (422 at path ``class``
    otherwise, 409 while there is no policy).  Nothing is stored when the
    body is invalid.  Re-sending the same job is harmless, so a client may
    retry after a 503.
    """
    spec = parse_model(await request.body(), JobSpec)
    note(request, job=spec.name)
    record = await run_in_threadpool(_register, services, spec)
    response.headers["Location"] = f"/v1/jobs/{spec.name}"
    return job_out(record)


@router.get("", response_model=JobsOut, responses=_UNAVAILABLE)
async def list_jobs(services: ServicesDep) -> JobsOut:
    """Live jobs, by name; expired ones are purged (and an ``expired`` event recorded)."""
    return await run_in_threadpool(_list, services)


@router.get("/{name}", response_model=JobOut, responses={**_NOT_FOUND, **_INVALID, **_UNAVAILABLE})
async def get_job(name: JobName, services: ServicesDep) -> JobOut:
    """One live job (404 when there is none of that name, or it expired)."""
    return await run_in_threadpool(_get, services, name)


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
async def delete_job(name: JobName, request: Request, services: ServicesDep) -> Response:
    """Delete a live job (204); its flows fall back to the rules and the default class."""
    note(request, job=name)
    await run_in_threadpool(_delete, services, name)
    return Response(status_code=204)
