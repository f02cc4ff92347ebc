"""``GET /v1/topology`` and ``GET /v1/paths``: the fabric as its controller last published it.

The API holds no topology of its own: it reads the controller's snapshot
and, for path questions, rebuilds the ``Topology`` from it and runs the same
``shortest_paths`` the controller forwards with.  So what ``/v1/paths`` says
is what the select groups do, not a second opinion.

A tenant's token sees the shared fabric (switches, links and their load)
with its own hosts and the pinned elephants with an end in its networks
(``Scope``), and asks paths between the hosts it sees there: a host that is
not its own is answered as unknown, word for word, so a path question tells
it nothing the topology hides (where another team's host is, its MAC).
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from controller.api.auth import PrincipalDep
from controller.api.errors import ApiError, invalid_input
from controller.api.schemas import ErrorOut, ValidationErrorOut
from controller.api.scopes import scope_for
from controller.api.services import Services, ServicesDep
from controller.auth.model import Principal
from controller.auth.tenancy import UNSCOPED, Scope
from controller.fabric.model import Host, Path, PortRef, Topology
from controller.fabric.paths import shortest_paths
from controller.fabric.snapshot import (
    FabricSnapshot,
    HostView,
    PinnedView,
    PortView,
    host_view,
    ipv4_text,
    mac_text,
    parse_mac,
    path_view,
    port_names_of,
    topology_of,
)
from controller.policy.errors import FieldError

MAX_PATHS = 64
"""ECMP paths listed at most: a 16-leaf x 8-spine fabric has 8 per leaf pair."""

NO_SNAPSHOT = (
    "no fabric snapshot: no controller has published one (with forwarding `normal` the"
    " switches forward on their own and the controller tracks no topology)"
)

router = APIRouter(prefix="/v1", tags=["fabric"])

_TOPOLOGY_RESPONSES: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "No controller has published a fabric snapshot"},
    503: {"model": ErrorOut, "description": "Redis unavailable"},
}
_PATHS_RESPONSES: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "No snapshot, or a host the controller does not know"},
    422: {"model": ValidationErrorOut, "description": "Invalid query: every error with its path"},
    503: {"model": ErrorOut, "description": "Redis unavailable"},
}


class PathsOut(BaseModel):
    """How traffic between two hosts crosses the fabric."""

    src: HostView
    dst: HostView
    ecmp: list[list[PortView]] = Field(
        description="Every shortest path (at most 64), each the output port at every switch"
        " from the source host's switch to the destination host's port; ECMP hashes each"
        " flow onto one of them. Empty: the switches are not connected"
    )
    pinned: list[PinnedView] = Field(
        description="Elephants between the two hosts (either direction) placed on one path"
    )


def _snapshot(services: Services) -> FabricSnapshot:
    snapshot = services.fabric.read()
    if snapshot is None:
        raise ApiError(404, NO_SNAPSHOT)
    return snapshot


def scoped_snapshot(snapshot: FabricSnapshot, scope: Scope) -> FabricSnapshot:
    """The snapshot as ``scope`` may see it: every switch and link, its own hosts, and the
    pinned elephants with an end in its networks."""
    if not scope.scoped:
        return snapshot
    return snapshot.model_copy(
        update={
            "hosts": [host for host in snapshot.hosts if scope.sees_host(host.ipv4)],
            "pinned": [pin for pin in snapshot.pinned if scope.sees_flow(pin.src, pin.dst)],
        }
    )


def _topology(services: Services, principal: Principal) -> FabricSnapshot:
    return scoped_snapshot(_snapshot(services), scope_for(services, principal))


@router.get("/topology", response_model=FabricSnapshot, responses=_TOPOLOGY_RESPONSES)
async def topology(services: ServicesDep, principal: PrincipalDep) -> FabricSnapshot:
    """The fabric as its controller last published it: switches, links with their load,
    hosts, and the elephants pinned on a path.

    The last snapshot is kept after its controller stops: `updated` says how
    old it is.  A tenant's token sees its own hosts and the pinned elephants
    with an end in its networks only.
    """
    return await run_in_threadpool(_topology, services, principal)


# --------------------------------------------------------------------------------------------
# paths
# --------------------------------------------------------------------------------------------

Address = tuple[str, int]
"""("ipv4" or "mac", value): how a query names a host."""


def parse_host_address(text: str) -> Address:
    """An IPv4 address (``10.0.0.1``) or a MAC (``00:00:00:00:00:01``, ``-`` also accepted)."""
    value = text.strip()
    if ":" in value or "-" in value:
        return "mac", parse_mac(value)
    try:
        return "ipv4", int(ipaddress.IPv4Address(value))
    except ValueError:
        raise ValueError(
            f"expected an IPv4 address (10.0.0.1) or a MAC (00:00:00:00:00:01), got {text!r}"
        ) from None


def find_host(topology: Topology, address: Address) -> Host | None:
    kind, value = address
    return topology.host(value) if kind == "mac" else topology.host_by_ip(value)


def host_paths(topology: Topology, src: Host, dst: Host, limit: int = MAX_PATHS) -> list[Path]:
    """Every shortest path from ``src``'s switch to ``dst`` itself: the fabric hops, then the
    port ``dst`` is attached at (on one switch, that port alone)."""
    if src.at.dpid == dst.at.dpid:
        fabric: tuple[Path, ...] = ((),)
    else:
        fabric = shortest_paths(topology, src.at.dpid, dst.at.dpid, limit)
    last = (dst.at.dpid, dst.at.port)
    return [(*path, last) for path in fabric]


def pinned_between(snapshot: FabricSnapshot, a: HostView, b: HostView) -> list[PinnedView]:
    if a.ipv4 is None or b.ipv4 is None:
        return []
    ends = {(a.ipv4, b.ipv4), (b.ipv4, a.ipv4)}
    return [pinned for pinned in snapshot.pinned if (pinned.src, pinned.dst) in ends]


def paths_between(
    snapshot: FabricSnapshot, src: Address, dst: Address, scope: Scope = UNSCOPED
) -> PathsOut:
    """The answer of ``/v1/paths``; ``LookupError`` naming the unknown host(s), and for a
    tenant's ``scope`` the hosts that are not its own."""
    topology = topology_of(snapshot)
    names: dict[PortRef, str] = port_names_of(snapshot)
    found = {
        field: _visible(find_host(topology, address), scope)
        for field, address in (("src", src), ("dst", dst))
    }
    missing = [field for field, host in found.items() if host is None]
    if missing:
        raise LookupError(
            "; ".join(
                f"{field}: no host {query_text(address)} is known to controller"
                f" {snapshot.controller}"
                for field, address in (("src", src), ("dst", dst))
                if field in missing
            )
        )
    src_host, dst_host = found["src"], found["dst"]
    assert src_host is not None and dst_host is not None
    src_view, dst_view = host_view(src_host, names), host_view(dst_host, names)
    return PathsOut(
        src=src_view,
        dst=dst_view,
        ecmp=[path_view(path, names) for path in host_paths(topology, src_host, dst_host)],
        pinned=pinned_between(snapshot, src_view, dst_view),
    )


def _visible(host: Host | None, scope: Scope) -> Host | None:
    """``host`` if ``scope`` may see it: a tenant sees hosts in its networks only."""
    if host is None or not scope.sees_host(None if host.ipv4 is None else ipv4_text(host.ipv4)):
        return None
    return host


def query_text(address: Address) -> str:
    kind, value = address
    return f"with MAC {mac_text(value)}" if kind == "mac" else f"with IPv4 {ipv4_text(value)}"


def _paths(services: Services, principal: Principal, src: Address, dst: Address) -> PathsOut:
    snapshot = _snapshot(services)
    try:
        return paths_between(snapshot, src, dst, scope_for(services, principal))
    except LookupError as exc:
        raise ApiError(404, str(exc)) from None


_OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_HEX = "[0-9A-Fa-f]{2}"
ADDRESS_PATTERN = rf"^(({_OCTET}\.){{3}}{_OCTET}|({_HEX}:){{5}}{_HEX}|({_HEX}-){{5}}{_HEX})$"
"""What ``parse_host_address`` accepts, for the schema only: the route checks it itself, so a
mismatch gets a message that says what an address looks like, not a regular expression."""
_ADDRESS_HELP = "A host's IPv4 address (`10.0.0.1`) or MAC (`00:00:00:00:00:01`)"
_ADDRESS_SCHEMA: dict[str, Any] = {
    "pattern": ADDRESS_PATTERN,
    "examples": ["10.0.0.1", "00:00:00:00:00:01"],
}


@router.get("/paths", response_model=PathsOut, responses=_PATHS_RESPONSES)
async def paths(
    services: ServicesDep,
    principal: PrincipalDep,
    src: Annotated[
        str,
        Query(
            min_length=1,
            max_length=64,
            description=_ADDRESS_HELP,
            json_schema_extra=_ADDRESS_SCHEMA,
        ),
    ],
    dst: Annotated[
        str,
        Query(
            min_length=1,
            max_length=64,
            description=_ADDRESS_HELP,
            json_schema_extra=_ADDRESS_SCHEMA,
        ),
    ],
) -> PathsOut:
    """Where two hosts attach, every shortest path between them (what ECMP spreads flows
    over), and the elephants between them pinned on one path.  A tenant's token asks
    about its own hosts (another's is 404, as an unknown host is)."""
    errors: list[FieldError] = []
    addresses: dict[str, Address] = {}
    for field, text in (("src", src), ("dst", dst)):
        try:
            addresses[field] = parse_host_address(text)
        except ValueError as exc:
            errors.append(FieldError(f"query.{field}", str(exc)))
    if errors:
        raise invalid_input(errors)
    return await run_in_threadpool(_paths, services, principal, addresses["src"], addresses["dst"])
