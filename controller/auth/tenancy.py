"""What a caller's tenant lets it see and touch. Pure.

A token without a tenant is not scoped: it sees every job and flow its role
allows. A token of a tenant is scoped to that tenant's networks as the
active policy declares them; a tenant the policy does not declare has no
networks, so its token sees no flow and may register no job (the refusal
says so, rather than leaving the operator guessing).

Events are judged the same way (``sees_event``): a job event by the job's
tenant, a flow's by its ends, a host's by its addresses; an event of shared
infrastructure (a policy version, a link, a queue's drops) is everyone's,
and a kind this module does not know is no tenant's, so a new kind that
carries a tenant's data stays hidden until it is classified here.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

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

    def sees_host(self, *addresses: str | None) -> bool:
        """A host (or a host event) is the tenant's when it has an address and every address
        it names is in the tenant's networks: a host known by its MAC alone is no one's."""
        if not self.scoped:
            return True
        named = [address for address in addresses if address is not None]
        return bool(named) and all(_within(address, self.networks) for address in named)

    def sees_event(self, kind: str, data: Mapping[str, Any]) -> bool:
        """Whether an event of the stream is this caller's to read."""
        if not self.scoped or kind in SHARED_EVENTS:
            return True
        if kind == "job":
            # Events written before jobs carried their tenant have none: hidden from tenants.
            tenant = data.get("tenant")
            return isinstance(tenant, str) and self.owns(tenant)
        if kind in FLOW_EVENTS:
            ends = flow_ends(data.get("flow"))
            return ends is not None and self.sees_flow(*ends)
        if kind == "host":
            return self.sees_host(_text(data.get("ipv4")), _text(data.get("previous_ipv4")))
        return False

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

SHARED_EVENTS: Final = frozenset(
    {
        "policy",
        "link",
        "queue-drops",
        "switch-refused",
        "store-regression",
        "store-recovered",
        "mastership",
    }
)
"""Kinds about the shared fabric and its policy, which every viewer reads: no job, endpoint
or flow of a tenant is in them."""
FLOW_EVENTS: Final = frozenset({"reclassified", "placement", "reroute"})
"""Kinds about one flow, named in ``data["flow"]`` as ``tcp 10.0.0.1:40000 > 10.0.0.2:5201``."""


def flow_ends(text: object) -> tuple[str, str] | None:
    """The source and destination addresses of a flow as ``FlowId`` prints it (IPv6 in
    brackets); None when it is not one."""
    if not isinstance(text, str):
        return None
    _, _, addresses = text.partition(" ")
    source, separator, destination = addresses.partition(" > ")
    if not separator:
        return None
    ends = tuple(end.rpartition(":")[0].strip("[]") for end in (source, destination))
    return (ends[0], ends[1]) if all(ends) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _within(address: str, networks: Sequence[Network]) -> bool:
    try:
        host = ipaddress.ip_address(address)
    except ValueError:  # not an IP address (a flow of another family): not the tenant's
        return False
    return any(host in network for network in networks)
