"""Quotas: how many jobs a tenant may hold, and how many classification entries a switch may.

The expansion limits (``controller.policy.limits``) bound one policy and one
job; nothing bounded how many jobs there are. One tenant's operator token
registered 1 000 jobs of 64 endpoints: 16.4 million entries on every
switch, and a jobs list and an events stream drowned by one team. The
``quotas`` section of the policy bounds both, and the API checks them on
every registration with the same counts the planner's limits use
(``rule_entries``, ``job_entries``), so what the plan shows as headroom is
what a registration is judged against.

- ``jobs_per_tenant``: live jobs the tokens of one tenant may hold. Tokens
  without a tenant count together, as one more tenant: an unscoped
  scheduler is bounded too.
- ``entries_per_switch``: classification entries the policy's rules and
  every live job together may expand to on a switch.

A registration is refused only when it grows a count past its quota: a job
renewed (registered again under its name) grows nothing, so lowering a
quota lets the jobs above it run out instead of cutting them off at their
next renewal. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from controller.policy.errors import FieldError
from controller.policy.limits import MAX_POLICY_ENTRIES

JOBS_PER_TENANT: Final = "quotas.jobs_per_tenant"
ENTRIES_PER_SWITCH: Final = "quotas.entries_per_switch"

DEFAULT_JOBS_PER_TENANT: Final = 100
MAX_JOBS_PER_TENANT: Final = 1000
"""``controller.pipeline.tables.MAX_JOBS``: past it jobs share one priority (a test checks)."""
DEFAULT_ENTRIES_PER_SWITCH: Final = MAX_POLICY_ENTRIES
"""65 536, the bound one policy's rules already had: rules and jobs now share it."""
MAX_ENTRIES_PER_SWITCH: Final = 1_048_576
"""What an OVS switch installs in seconds; a hardware table holds far less."""

NO_TENANT: Final = "tokens without a tenant"


class Quotas(BaseModel):
    """The ``quotas`` section; every field has a default, so a policy without it is bounded."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    jobs_per_tenant: int = Field(
        default=DEFAULT_JOBS_PER_TENANT,
        ge=0,
        le=MAX_JOBS_PER_TENANT,
        description="Live jobs the tokens of one tenant may hold (tokens without a tenant"
        f" count as one tenant); default {DEFAULT_JOBS_PER_TENANT}",
    )
    entries_per_switch: int = Field(
        default=DEFAULT_ENTRIES_PER_SWITCH,
        ge=1,
        le=MAX_ENTRIES_PER_SWITCH,
        description="Classification entries the rules and every live job together may expand"
        f" to on one switch; default {DEFAULT_ENTRIES_PER_SWITCH}",
    )


@dataclass(frozen=True, slots=True)
class JobLoad:
    """What a live job costs against the quotas: its tenant, and its entries per switch
    (``job_entries``, the planner's bound)."""

    name: str
    tenant: str | None
    entries: int


@dataclass(frozen=True, slots=True)
class QuotaUse:
    """One quota's use: for ``jobs_per_tenant`` one row per tenant (``tenant`` None: the
    tokens without one); for ``entries_per_switch`` one row, ``tenant`` None."""

    quota: str
    tenant: str | None
    limit: int
    used: int

    @property
    def headroom(self) -> int:
        """What is left; negative when a lowered quota is below what live jobs hold."""
        return self.limit - self.used


@dataclass(frozen=True, slots=True)
class QuotaExceeded:
    """Why a registration is refused: the quota (its policy path), its limit, and the
    count the registration would have made."""

    quota: str
    limit: int
    wanted: int
    message: str

    def __str__(self) -> str:
        return self.message


def tenant_label(tenant: str | None) -> str:
    return f"tenant {tenant!r}" if tenant is not None else NO_TENANT


def admission(
    quotas: Quotas, rule_entries: int, live: Iterable[JobLoad], job: JobLoad
) -> QuotaExceeded | None:
    """Whether ``job`` may be registered beside the ``live`` jobs (None: it may).

    A live job of the same name is the one ``job`` replaces: it is counted
    out. A count already over its quota (the quota was lowered) refuses only
    what would grow it further.
    """
    others = [other for other in live if other.name != job.name]
    replaced = next((other for other in live if other.name == job.name), None)

    held = sum(1 for other in others if other.tenant == job.tenant)
    before = held + (1 if replaced is not None and replaced.tenant == job.tenant else 0)
    if held + 1 > quotas.jobs_per_tenant and held + 1 > before:
        return QuotaExceeded(
            JOBS_PER_TENANT,
            quotas.jobs_per_tenant,
            held + 1,
            f"quota {JOBS_PER_TENANT} exceeded: {held} live job(s) of"
            f" {tenant_label(job.tenant)} already, at most {quotas.jobs_per_tenant}; delete one"
            " (DELETE /v1/jobs/NAME) or let one expire, or ask an admin to raise the quota",
        )

    jobs_entries = sum(other.entries for other in others)
    total = rule_entries + jobs_entries + job.entries
    current = rule_entries + jobs_entries + (replaced.entries if replaced is not None else 0)
    if total > quotas.entries_per_switch and total > current:
        return QuotaExceeded(
            ENTRIES_PER_SWITCH,
            quotas.entries_per_switch,
            total,
            f"quota {ENTRIES_PER_SWITCH} exceeded: job {job.name!r} expands to {job.entries}"
            f" classification entries per switch; with the policy's rules ({rule_entries}) and"
            f" the other live jobs ({jobs_entries}) that is {total}, more than the"
            f" {quotas.entries_per_switch} allowed; use fewer endpoints or port ranges, delete"
            " a job, or ask an admin to raise the quota",
        )
    return None


def quota_use(
    quotas: Quotas, rule_entries: int, live: Sequence[JobLoad], tenants: Iterable[str] = ()
) -> list[QuotaUse]:
    """Every quota's use: the entries per switch first, then the jobs of each declared tenant
    (in ``tenants`` order, with or without jobs), then of any other tenant holding jobs, by
    name, then of the tokens without a tenant when they hold any."""
    rows = [
        QuotaUse(
            ENTRIES_PER_SWITCH,
            None,
            quotas.entries_per_switch,
            rule_entries + sum(job.entries for job in live),
        )
    ]
    counts: dict[str | None, int] = dict.fromkeys(tenants, 0)
    holders = sorted({job.tenant for job in live}, key=lambda t: (t is None, t or ""))
    for tenant in holders:
        counts.setdefault(tenant, 0)
    for job in live:
        counts[job.tenant] += 1
    rows.extend(
        QuotaUse(JOBS_PER_TENANT, tenant, quotas.jobs_per_tenant, used)
        for tenant, used in counts.items()
    )
    return rows


def quota_errors(quotas: Quotas, rule_entries: int) -> list[FieldError]:
    """The policy's own rules must leave its entry quota room; past ``MAX_POLICY_ENTRIES``
    the size limit's error says it already."""
    if quotas.entries_per_switch < rule_entries <= MAX_POLICY_ENTRIES:
        return [
            FieldError(
                ENTRIES_PER_SWITCH,
                f"the rules expand to {rule_entries} classification entries per switch, more"
                f" than this quota of {quotas.entries_per_switch} (rules and jobs together):"
                " raise it, or use fewer rules",
            )
        ]
    return []
