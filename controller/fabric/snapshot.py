"""The fabric as the controller shows it to the API: one JSON document, and its changes as events.

The controller owns the topology; the API and the CLI only read what it
publishes.  ``FabricSnapshot`` is that contract: switches, directed links with
their measured load, hosts and where they attach, and the elephants pinned
on a path.  It carries enough to rebuild the ``Topology`` (``topology_of``),
so the API answers path questions with the same pure functions the
controller forwards with, instead of a second idea of the fabric.

Events are what an operator wants to read in ``flowlane events``: a physical
link coming up or going down (once, not once per direction), a host learned,
moved or gone, an elephant pinned, released or moved to another path.  Their
data is flat (text and numbers), so any client can show it as ``key=value``.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, computed_field

from controller.fabric.model import Host, Link, Path, PortRef, Topology
from controller.flowid import ETH_TYPE_IPV4, ETH_TYPE_IPV6, FlowId

LINK = "link"
HOST = "host"
REROUTE = "reroute"
PLACEMENT = "placement"
FABRIC_EVENT_KINDS = (LINK, HOST, REROUTE, PLACEMENT)

_MAC = re.compile(r"^[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(\1[0-9A-Fa-f]{2}){4}$")
_PROTOCOLS = {6: "tcp", 17: "udp"}


# --------------------------------------------------------------------------------------------
# addresses
# --------------------------------------------------------------------------------------------


def mac_text(mac: int) -> str:
    """``00:00:00:00:00:01``: how ``ip link`` and Mininet print a MAC."""
    raw = f"{mac:012x}"
    return ":".join(raw[i : i + 2] for i in range(0, 12, 2))


def parse_mac(text: str) -> int:
    """A MAC written with ``:`` or ``-`` between its six bytes, in either case."""
    if not _MAC.fullmatch(text):
        raise ValueError(f"expected a MAC such as 00:00:00:00:00:01, got {text!r}")
    return int(text.replace(":", "").replace("-", ""), 16)


def ipv4_text(address: int) -> str:
    return str(ipaddress.IPv4Address(address))


# --------------------------------------------------------------------------------------------
# the snapshot
# --------------------------------------------------------------------------------------------


class PortView(BaseModel):
    """One switch port, with its OVS name when the controller knows it."""

    model_config = ConfigDict(frozen=True)

    dpid: int = Field(ge=0, description="Datapath id (an integer; see `dpid_hex`)")
    port: int = Field(ge=0, description="OpenFlow port number")
    name: str | None = Field(default=None, description="OVS port name, e.g. `s1-eth3`")

    @computed_field(description="The datapath id as 16 hex digits")  # type: ignore[prop-decorator]
    @property
    def dpid_hex(self) -> str:
        return f"{self.dpid:016x}"

    @property
    def ref(self) -> PortRef:
        return PortRef(self.dpid, self.port)

    def label(self) -> str:
        """The port name where known (what operators recognise), else ``<dpid hex>:<port>``."""
        return self.name if self.name else str(self.ref)


class LinkView(BaseModel):
    """One direction of a switch-to-switch link and the load leaving ``src`` onto it."""

    model_config = ConfigDict(frozen=True)

    src: PortView
    dst: PortView
    capacity_bps: int = Field(ge=0, description="Egress rate of `src` (bit/s)")
    tx_bps: float = Field(ge=0, description="Measured rate leaving `src` (bit/s)")
    utilization: float = Field(ge=0, description="`tx_bps / capacity_bps` (1.0: full)")
    usable: bool = Field(
        default=True,
        description="Both directions are known: a link seen one way only carries nothing",
    )


class HostView(BaseModel):
    model_config = ConfigDict(frozen=True)

    mac: str = Field(description="`00:00:00:00:00:01`")
    ipv4: str | None = Field(description="Its IPv4 address, once seen (ARP or IP)")
    at: PortView = Field(description="The edge port it was learned at")


class PinnedView(BaseModel):
    """An elephant the controller placed on one path instead of leaving it to ECMP hashing."""

    model_config = ConfigDict(frozen=True)

    flow: str = Field(description="`tcp 10.0.0.1:40000 > 10.0.0.2:5201`")
    protocol: str = Field(description="`tcp`, `udp`, or the IP protocol number")
    src: str
    dst: str
    src_port: int
    dst_port: int
    traffic_class: str
    rate_bps: float = Field(ge=0, description="Measured rate (bit/s)")
    demand_bps: float = Field(ge=0, description="Estimated natural demand (bit/s)")
    since: float = Field(description="Unix time it was pinned")
    path: list[PortView] = Field(description="The output port at every switch, in order")
    job: str | None = Field(
        default=None,
        description="The registered job the flow belongs to (its flows are placed together);"
        " null: none",
    )


class FabricSnapshot(BaseModel):
    """Everything the controller knows about the fabric, as of ``updated``.

    The last one published is kept even when its controller stops: compare
    ``updated`` with the clock to tell how stale it is.
    """

    model_config = ConfigDict(frozen=True)

    controller: str = Field(description="Id of the controller that published it")
    updated: float = Field(description="Unix time of publication")
    switches: list[int] = Field(description="Datapath ids, ascending")
    links: list[LinkView] = Field(description="Directed links, each direction on its own")
    hosts: list[HostView]
    pinned: list[PinnedView]


def _finite(value: float) -> float:
    """A measured rate JSON can carry: a counter reset or an empty window is no load."""
    return value if math.isfinite(value) and value > 0 else 0.0


def port_view(ref: PortRef, port_names: Mapping[PortRef, str]) -> PortView:
    return PortView(dpid=ref.dpid, port=ref.port, name=port_names.get(ref))


def path_view(path: Path, port_names: Mapping[PortRef, str]) -> list[PortView]:
    return [port_view(PortRef(dpid, port), port_names) for dpid, port in path]


def host_view(host: Host, port_names: Mapping[PortRef, str]) -> HostView:
    return HostView(
        mac=mac_text(host.mac),
        ipv4=None if host.ipv4 is None else ipv4_text(host.ipv4),
        at=port_view(host.at, port_names),
    )


def _address(eth_type: int, value: int) -> str:
    if eth_type == ETH_TYPE_IPV6:
        return str(ipaddress.IPv6Address(value))
    return ipv4_text(value)


def pinned_view(
    flow: FlowId,
    *,
    traffic_class: str,
    rate_bps: float,
    demand_bps: float,
    since: float,
    path: Path,
    port_names: Mapping[PortRef, str],
    job: str | None = None,
) -> PinnedView:
    """The view of one placed elephant, from the placement's own values."""
    return PinnedView(
        flow=str(flow),
        protocol=_PROTOCOLS.get(flow.ip_proto, str(flow.ip_proto)),
        src=_address(flow.eth_type, flow.src),
        dst=_address(flow.eth_type, flow.dst),
        src_port=flow.src_port,
        dst_port=flow.dst_port,
        traffic_class=traffic_class,
        rate_bps=_finite(rate_bps),
        demand_bps=_finite(demand_bps),
        since=since,
        path=path_view(path, port_names),
        job=job,
    )


def build_snapshot(
    controller: str,
    now: float,
    topology: Topology,
    port_names: Mapping[PortRef, str],
    link_tx_bps: Mapping[Link, float],
    pinned: Sequence[PinnedView],
) -> FabricSnapshot:
    """The snapshot of ``topology``: every directed link it knows, usable or not.

    Half-known links are listed (``usable: false``) because "why does this
    link carry nothing" is the first question an operator asks of them.
    """
    usable = topology.usable_links
    links = []
    for link in sorted(topology.links):
        capacity = topology.capacity(link.src)
        tx = _finite(link_tx_bps.get(link, 0.0))
        links.append(
            LinkView(
                src=port_view(link.src, port_names),
                dst=port_view(link.dst, port_names),
                capacity_bps=capacity,
                tx_bps=tx,
                utilization=tx / capacity if capacity > 0 else 0.0,
                usable=link in usable,
            )
        )
    return FabricSnapshot(
        controller=controller,
        updated=now,
        switches=sorted(topology.switches),
        links=links,
        hosts=[host_view(host, port_names) for host in topology.hosts],
        pinned=list(pinned),
    )


def topology_of(snapshot: FabricSnapshot) -> Topology:
    """The ``Topology`` a snapshot was built from: switches, links, hosts, link capacities.

    Every published direction comes back, so ``usable_links`` is the
    controller's: a direction the controller had not confirmed stays unusable.
    """
    return Topology(
        switches=frozenset(snapshot.switches),
        links=frozenset(Link(view.src.ref, view.dst.ref) for view in snapshot.links),
        hosts=tuple(
            Host(
                mac=parse_mac(host.mac),
                at=host.at.ref,
                ipv4=None if host.ipv4 is None else int(ipaddress.IPv4Address(host.ipv4)),
            )
            for host in snapshot.hosts
        ),
        capacity_bps={view.src.ref: view.capacity_bps for view in snapshot.links},
    )


def pinned_flow(pinned: PinnedView) -> FlowId:
    """The flow a pinned view describes (the inverse of ``pinned_view``)."""
    protocols = {name: number for number, name in _PROTOCOLS.items()}
    ip_proto = protocols.get(pinned.protocol)
    if ip_proto is None:
        ip_proto = int(pinned.protocol)
    src, dst = ipaddress.ip_address(pinned.src), ipaddress.ip_address(pinned.dst)
    eth_type = ETH_TYPE_IPV6 if src.version == 6 else ETH_TYPE_IPV4
    return FlowId(eth_type, ip_proto, int(src), int(dst), pinned.src_port, pinned.dst_port)


def pins_of(snapshot: FabricSnapshot) -> dict[FlowId, Path]:
    """The placed flows of a snapshot and their paths, as the controller holds them."""
    return {
        pinned_flow(pinned): tuple((hop.dpid, hop.port) for hop in pinned.path)
        for pinned in snapshot.pinned
    }


def port_names_of(snapshot: FabricSnapshot) -> dict[PortRef, str]:
    """Every port name the snapshot mentions (links, hosts, pinned paths)."""
    views: list[PortView] = [view for link in snapshot.links for view in (link.src, link.dst)]
    views.extend(host.at for host in snapshot.hosts)
    views.extend(hop for pinned in snapshot.pinned for hop in pinned.path)
    return {view.ref: view.name for view in views if view.name}


# --------------------------------------------------------------------------------------------
# events
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FabricEvent:
    """One change worth an entry in the events stream; ``kind`` is one of FABRIC_EVENT_KINDS."""

    kind: str
    data: dict[str, Any]


PhysicalLink = tuple[PortRef, PortRef]
"""A link regardless of direction: its two ends, lower first."""


def physical_links(links: Iterable[Link]) -> frozenset[PhysicalLink]:
    return frozenset((min(link.src, link.dst), max(link.src, link.dst)) for link in links)


def _link_event(op: str, ends: PhysicalLink) -> FabricEvent:
    a, b = ends
    return FabricEvent(LINK, {"op": op, "a": str(a), "b": str(b)})


def _host_event(op: str, host: Host, previous: Host | None = None) -> FabricEvent:
    data: dict[str, Any] = {
        "op": op,
        "mac": mac_text(host.mac),
        "ipv4": None if host.ipv4 is None else ipv4_text(host.ipv4),
        "at": str(host.at),
    }
    if previous is not None and previous.at != host.at:
        data["from"] = str(previous.at)
    if previous is not None and previous.ipv4 != host.ipv4 and previous.ipv4 is not None:
        data["previous_ipv4"] = ipv4_text(previous.ipv4)
    return FabricEvent(HOST, data)


def topology_events(before: Topology, after: Topology) -> list[FabricEvent]:
    """What changed between two topologies, as events: links first, then hosts.

    A physical link is up when it is usable (both directions, both switches
    known): one ``up``/``down`` per link, however many LLDP frames and
    directions it took.  Hosts are ``learned``, ``moved`` (another port),
    ``addressed`` (same port, a new IPv4 address) or ``gone``.
    """
    was_up = physical_links(before.usable_links)
    is_up = physical_links(after.usable_links)
    events = [_link_event("down", ends) for ends in sorted(was_up - is_up)]
    events.extend(_link_event("up", ends) for ends in sorted(is_up - was_up))
    old = {host.mac: host for host in before.hosts}
    new = {host.mac: host for host in after.hosts}
    events.extend(_host_event("gone", old[mac]) for mac in sorted(old.keys() - new.keys()))
    for mac in sorted(new):
        host, previous = new[mac], old.get(mac)
        if previous is None:
            events.append(_host_event("learned", host))
        elif previous.at != host.at:
            events.append(_host_event("moved", host, previous))
        elif previous.ipv4 != host.ipv4 and host.ipv4 is not None:
            events.append(_host_event("addressed", host, previous))
    return events


def path_text(path: Sequence[PortView]) -> str:
    """``s1-eth3 > s3-eth2``: the output ports in order (``-`` for a path within one switch)."""
    return " > ".join(hop.label() for hop in path) or "-"


def _pinned_data(pinned: PinnedView) -> dict[str, Any]:
    return {
        "flow": pinned.flow,
        "class": pinned.traffic_class,
        "rate_bps": pinned.rate_bps,
        "demand_bps": pinned.demand_bps,
        "path": path_text(pinned.path),
    }


def placement_event(op: str, pinned: PinnedView, reason: str) -> FabricEvent:
    """An elephant ``pinned`` on a path, or ``released`` back to ECMP, and why."""
    return FabricEvent(PLACEMENT, {"op": op, **_pinned_data(pinned), "reason": reason})


def reroute_event(pinned: PinnedView, previous: Sequence[PortView], reason: str) -> FabricEvent:
    """A pinned elephant moved from ``previous`` to its new path (a link failed, load moved)."""
    return FabricEvent(
        REROUTE,
        {**_pinned_data(pinned), "from_path": path_text(previous), "reason": reason},
    )


def _rate(value: object) -> str:
    if not isinstance(value, int | float) or not math.isfinite(value):
        return "?"
    for unit in ("bit/s", "Kbit/s", "Mbit/s"):
        if abs(value) < 1000:
            return f"{value:.3g}{unit}"
        value /= 1000
    return f"{value:.3g}Gbit/s"


def _flow_tag(data: Mapping[str, Any]) -> str:
    """`` [training, 9.5Mbit/s]``: the parts an event carries, empty ones left out rather than
    shown as blanks (older controllers released flows with no class and a zero rate)."""
    parts = [str(data["class"])] if data.get("class") else []
    rate = data.get("rate_bps")
    if isinstance(rate, int | float) and math.isfinite(rate) and rate > 0:
        parts.append(_rate(rate))
    return f" [{', '.join(parts)}]" if parts else ""


def describe_event(kind: str, data: Mapping[str, Any]) -> str | None:
    """One line about a fabric event for ``flowlane events``; None for other kinds."""
    reason = f" ({data['reason']})" if data.get("reason") else ""
    if kind == LINK:
        return f"link {data.get('a')} <-> {data.get('b')} {data.get('op')}"
    if kind == HOST:
        name = data.get("mac") if not data.get("ipv4") else f"{data['mac']} ({data['ipv4']})"
        where = {"moved": "to", "gone": "from"}.get(str(data.get("op")), "at")
        line = f"host {name} {data.get('op')} {where} {data.get('at')}"
        if data.get("from"):
            line += f", was at {data['from']}"
        if data.get("previous_ipv4"):
            line += f", was {data['previous_ipv4']}"
        return line
    if kind == PLACEMENT:
        return f"{data.get('flow')}{_flow_tag(data)} {data.get('op')}: {data.get('path')}{reason}"
    if kind == REROUTE:
        return (
            f"{data.get('flow')}{_flow_tag(data)}"
            f" moved: {data.get('from_path')} -> {data.get('path')}{reason}"
        )
    return None
