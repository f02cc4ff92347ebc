"""What a caller's tenant lets it see and touch. Pure.

A token without a tenant is not scoped: it sees every job and flow its role
allows. A token of a tenant is scoped to that tenant's networks as the
active policy declares them; a tenant the policy does not declare has no
networks, so its token sees no flow and may register no job (the refusal
says so, rather than leaving the operator guessing).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from controller.auth.model import Network, Principal, inside
from controller.policy.jobs import JobSpec
from controller.policy.tenants import Tenant


@dataclass(frozen=True, slots=True)
class Scope:
    """The jobs and flows a caller may see: ``tenant`` None means all of them."""

    tenant: str | None = None
    networks: tuple[Network, ...] = ()
    declared: bool = True
    """Whether the active policy declares ``tenant`` (always true when unscoped)."""

    @staticmethod
    def of(principal: Principal, tenants: Mapping[str, Tenant]) -> Scope:
        if principal.tenant is None:
            return UNSCOPED
        tenant = tenants.get(principal.tenant)
        if tenant is None:
            return Scope(principal.tenant, (), declared=False)
        return Scope(principal.tenant, tuple(tenant.networks))

    @property
    def scoped(self) -> bool:
        return self.tenant is not None

    def owns(self, job_tenant: str | None) -> bool:
        """Whether a job registered by ``job_tenant`` (None: by an unscoped token) is visible."""
        return not self.scoped or job_tenant == self.tenant

    def sees_flow(self, src: str, dst: str) -> bool:
        """A flow is the tenant's when either end is one of its hosts."""
        return not self.scoped or _within(src, self.networks) or _within(dst, self.networks)

    def job_refusal(self, spec: JobSpec) -> str | None:
        """Why this caller may not register ``spec`` (None: it may). Names every endpoint
        outside the tenant's networks, so one answer fixes the request."""
        if not self.scoped:
            return None
        if not self.declared:
            return (
                f"tenant {self.tenant!r} is not declared in the active policy"
                " (tenants: {NAME: {networks: [...]}}): its tokens may register no job"
            )
        outside = [
            f"endpoints[{index}].ipv4 {endpoint.ipv4}"
            for index, endpoint in enumerate(spec.endpoints)
            if not inside(str(endpoint.ipv4), self.networks)
        ]
        if not outside:
            return None
        networks = ", ".join(str(network) for network in self.networks)
        return f"{'; '.join(outside)}: outside tenant {self.tenant!r}'s networks ({networks})"


UNSCOPED = Scope()


def _within(address: str, networks: Sequence[Network]) -> bool:
    try:
        host = ipaddress.ip_address(address)
    except ValueError:  # not an IP address (a flow of another family): not the tenant's
        return False
    return any(host in network for network in networks)
