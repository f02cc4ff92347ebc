"""Tenants: which teams share the fabric, and the networks each one's hosts live in.

A policy may declare ``tenants: {NAME: {networks: [CIDR…]}}``. A token of a
tenant registers jobs only for endpoints inside its networks, sees and
deletes only its own jobs, and sees only flows with an end in its networks
(``controller.auth.tenancy``). The networks of two tenants must not overlap:
a host inside both would let either team put the other's traffic in a class.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from controller.policy.errors import FieldError
from controller.policy.match import Ipv4Field

MAX_TENANTS = 256
MAX_NETWORKS = 256


class Tenant(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    networks: list[Ipv4Field] = Field(
        min_length=1,
        max_length=MAX_NETWORKS,
        description="The tenant's hosts: IPv4 networks in CIDR notation",
    )


def tenant_errors(tenants: Mapping[str, Tenant]) -> Iterator[FieldError]:
    """Two tenants claiming one address, each overlap reported once, at the later tenant."""
    claimed: list[tuple[str, int, Any]] = []
    for name, tenant in tenants.items():
        for index, network in enumerate(tenant.networks):
            for owner, owner_index, other in claimed:
                if owner != name and network.overlaps(other):
                    yield FieldError(
                        f"tenants.{name}.networks[{index}]",
                        f"{network} overlaps {other} of tenant {owner!r}"
                        f" (tenants.{owner}.networks[{owner_index}]): a host may belong"
                        " to one tenant only",
                    )
            claimed.append((name, index, network))


def tenants_of(document: Mapping[str, Any]) -> dict[str, Tenant]:
    """The tenants of a stored (so already validated) policy document, without reading
    the rest of it: a policy of thousands of rules is not parsed for each job request."""
    section = document.get("tenants") or {}
    try:
        return {str(name): Tenant.model_validate(spec) for name, spec in section.items()}
    except (AttributeError, ValidationError) as exc:  # not what validation let through
        raise ValueError(f"the stored policy's tenants section is invalid: {exc}") from exc
