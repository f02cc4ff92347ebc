"""``/v1/jobs``: register, list and delete jobs, the run-time half of classification.

A scheduler registers a job (``POST``) naming a class of the active policy
and the endpoints its run landed on; the controllers follow the store's
channel and re-plan.  A job lives ``ttl`` seconds after its latest
registration, so a scheduler keeps it with a periodic re-``POST`` and a
forgotten one goes away by itself.  Expired jobs are invisible at once (the
store filters them); every request also purges them, which records an
``expired`` event, so the events stream says when each job ended.  Job
events carry the job's tenant (none for an unscoped token's job), which is
how ``GET /v1/events`` shows a tenant its own jobs only.

A registration must fit the active policy's quotas (``quotas``: jobs per
tenant, classification entries per switch from the rules and every live
job): 429 naming the quota otherwise, and nothing is stored.

The store's calls are blocking Redis round trips; they run in the thread pool.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool

from controller.api.audit import note
from controller.api.auth import PrincipalDep, needs
from controller.api.documents import SOURCE, parse_model
from controller.api.errors import ApiError, invalid_input
from controller.api.routes.fabric import scoped_snapshot
from controller.api.schemas import (
    ErrorOut,
    JobDetailOut,
    JobOut,
    JobsOut,
    QuotaErrorOut,
    ValidationErrorOut,
)
from controller.api.scopes import scope_for
from controller.api.services import Services, ServicesDep
from controller.auth.model import Principal, Role
from controller.auth.tenancy import Scope
from controller.policy.errors import PolicyError
from controller.policy.jobs import JobSpec, job_errors
from controller.policy.limits import rule_entries
from controller.policy.load import parse_policy
from controller.policy.parts import document_parts
from controller.policy.quotas import JobLoad, QuotaExceeded, Quotas, admission
from controller.policy.tenants import tenants_of
from controller.store.jobs import JobOwnedError, JobRecord
from controller.store.policies import PolicyVersion

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


def job_event(name: str, op: str, tenant: str | None, **data: Any) -> dict[str, Any]:
    """A job event's data; ``tenant`` only when the job has one, so a tenant's token
    (``Scope.sees_event``) reads the events of its own jobs and no others."""
    return {"name": name, "op": op, **({"tenant": tenant} if tenant is not None else {}), **data}


def job_load(record: JobRecord) -> JobLoad:
    """What a stored job costs against the quotas. A record from before quotas has no count:
    it is counted from its document (one the controller would skip costs nothing)."""
    entries = record.entries
    if entries is None:
        try:
            entries = JobSpec.from_document(record.name, record.document).entries
        except ValidationError:
            entries = 0
    return JobLoad(record.name, record.tenant, entries)


@dataclass(frozen=True, slots=True)
class Budget:
    """What the active policy lets jobs have: its quotas and what its rules already take."""

    quotas: Quotas
    rule_entries: int


_BUDGETS: dict[tuple[int, float], Budget] = {}
_BUDGETS_LOCK = threading.Lock()


def budget_of(active: PolicyVersion) -> Budget:
    """The active version's budget, parsed once per version (a policy of 4096 rules takes
    tens of milliseconds to parse, too long for every job request). Keyed by version and
    creation time, so another store's version of the same number is not taken for it."""
    key = (active.version, active.created_at)
    with _BUDGETS_LOCK:
        found = _BUDGETS.get(key)
    if found is None:
        try:
            policy = parse_policy(active.document, f"version {active.version}")
            found = Budget(policy.quotas, rule_entries(policy.rules))
        except PolicyError:
            # A stored version this code no longer validates: judge by what of it parses.
            parts = document_parts(active.document)
            rules = (rule.rule for rule in parts.rules.values() if rule.rule is not None)
            found = Budget(parts.quotas or Quotas(), rule_entries(rules))
        with _BUDGETS_LOCK:
            if len(_BUDGETS) >= 16:
                _BUDGETS.clear()
            _BUDGETS[key] = found
    return found


class QuotaExceededError(Exception):
    """Raised by the quota check inside the store's transaction, so nothing is written."""

    def __init__(self, refusal: QuotaExceeded) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


def _purge(services: Services) -> None:
    """Delete expired jobs, and say so on the events stream."""
    for record in services.jobs.purge_records():
        services.events.append("job", job_event(record.name, "expired", record.tenant))


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
    budget = budget_of(active)
    load = JobLoad(spec.name, scope.tenant, spec.entries)

    def admit(live: list[JobRecord]) -> None:
        loads = [job_load(record) for record in live]
        over = admission(budget.quotas, budget.rule_entries, loads, load)
        if over is not None:
            raise QuotaExceededError(over)

    _purge(services)
    document = spec.document()
    try:
        record = services.jobs.put(
            spec.name, document, spec.ttl, tenant=scope.tenant, entries=load.entries, admit=admit
        )
    except JobOwnedError as exc:
        raise ApiError(409, str(exc)) from None
    except QuotaExceededError as exc:
        over = exc.refusal
        raise ApiError(
            429, over.message, quota=over.quota, limit=over.limit, wanted=over.wanted
        ) from None
    services.events.append(
        "job",
        job_event(
            spec.name,
            "registered",
            scope.tenant,
            **{
                "class": spec.traffic_class,
                "endpoints": document["endpoints"],
                "weight": spec.weight,
            },
        ),
    )
    return record


def _list(services: Services, principal: Principal) -> JobsOut:
    _purge(services)
    scope = scope_for(services, principal)
    return JobsOut(
        jobs=[job_out(record) for record in services.jobs.all() if scope.owns(record.tenant)]
    )


def _get(services: Services, name: str, principal: Principal) -> JobDetailOut:
    _purge(services)
    record = services.jobs.get(name)
    scope = scope_for(services, principal)
    # Another tenant's job is answered as absent: its name says nothing to this caller.
    if record is None or not scope.owns(record.tenant):
        raise ApiError(404, f"no job {name!r}")
    snapshot = services.fabric.read()
    # The controller names each pinned flow's job (the classifier's verdict); the pins are
    # the tenant's view of the fabric, as ``/v1/topology`` shows them.
    pinned = (
        []
        if snapshot is None
        else [pin for pin in scoped_snapshot(snapshot, scope).pinned if pin.job == name]
    )
    return JobDetailOut.model_validate({**record.to_dict(), "pinned": pinned})


def _delete(services: Services, name: str, principal: Principal) -> None:
    _purge(services)
    deleted = services.jobs.remove(name, tenant=principal.tenant)
    if deleted is None:
        raise ApiError(404, f"no job {name!r}")
    services.events.append("job", job_event(name, "deleted", deleted.tenant))


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
        429: {
            "model": QuotaErrorOut,
            "description": "A quota of the active policy would be exceeded: `quota` names it",
        },
        409: {
            "model": ErrorOut,
            "description": "No policy yet (the class cannot be checked),"
            " or another tenant's job has the name",
        },
        **_INVALID,
        **_UNAVAILABLE,
    },
    openapi_extra={
        **inline_body(JobSpec, "A job: its name, class, endpoints, ttl and weight"),
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
    retry after a 503.  A job beyond the active policy's quotas (``quotas``:
    live jobs per tenant, classification entries per switch of the rules and
    every live job together) is refused with 429 naming the quota; renewing a
    live job is never refused for a quota it does not grow.
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


@router.get(
    "/{name}", response_model=JobDetailOut, responses={**_NOT_FOUND, **_INVALID, **_UNAVAILABLE}
)
async def get_job(name: JobName, services: ServicesDep, principal: PrincipalDep) -> JobDetailOut:
    """One live job (404 when there is none of that name, it expired, or it is another
    tenant's), with its elephants the fabric controller placed: each one's path and measured
    rate (``pinned``, from the controller's last fabric snapshot)."""
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
