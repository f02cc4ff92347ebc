"""The tenant scope of a request's caller, from the active policy's ``tenants`` section.

Blocking (a Redis read when the caller has a tenant): routes call it in the
thread pool, inside the work they already do there.
"""

from __future__ import annotations

from controller.api.services import Services
from controller.auth.model import Principal
from controller.auth.tenancy import UNSCOPED, Scope
from controller.policy.tenants import tenants_of


def scope_for(services: Services, principal: Principal) -> Scope:
    if principal.tenant is None:
        return UNSCOPED
    active = services.policies.active()
    return Scope.of(principal, tenants_of(active.document) if active is not None else {})
