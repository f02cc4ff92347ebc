"""The fabric's topology as one immutable value.

Discovery (LLDP, port status, host learning) is shell; it builds a new
``Topology`` whenever something changes, and every decision the controller
makes about forwarding (ECMP next hops, the flood tree, placement of
elephants) is a pure function of that value.  Links are directed: LLDP sees
each direction on its own, and a link is usable only once both directions
are known, so a half-discovered or half-failed link carries nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True, slots=True, order=True)
class PortRef:
    """One switch port: datapath id and OpenFlow port number."""

    dpid: int
    port: int

    def __str__(self) -> str:
        return f"{self.dpid:016x}:{self.port}"


@dataclass(frozen=True, slots=True, order=True)
class Link:
    """A directed switch-to-switch link: frames leave ``src`` and arrive at ``dst``."""

    src: PortRef
    dst: PortRef

    def reversed(self) -> Link:
        return Link(self.dst, self.src)


@dataclass(frozen=True, slots=True, order=True)
class Host:
    """A host learned at an edge port (from its ARP or first packets)."""

    mac: int
    at: PortRef
    ipv4: int | None = None


Hop = tuple[int, int]
"""(dpid, output port): one step of a path."""

Path = tuple[Hop, ...]
"""The output port at every switch from the source switch to the destination switch."""


def _frozen(mapping: Mapping[PortRef, int]) -> Mapping[PortRef, int]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class Topology:
    """Switches, the links between them, the hosts at their edges and port capacities.

    ``capacity_bps`` gives the egress rate of a port (the HTB ceiling the
    policy sets, or the link speed); a link's capacity is its ``src`` port's.
    A port without an entry counts as ``default_capacity_bps``.
    """

    switches: frozenset[int] = frozenset()
    links: frozenset[Link] = frozenset()
    hosts: tuple[Host, ...] = ()
    capacity_bps: Mapping[PortRef, int] = field(default_factory=dict)
    default_capacity_bps: int = 10_000_000_000

    def __post_init__(self) -> None:
        object.__setattr__(self, "hosts", tuple(sorted(self.hosts)))
        object.__setattr__(self, "capacity_bps", _frozen(self.capacity_bps))

    # ---- links ---------------------------------------------------------------

    @property
    def usable_links(self) -> frozenset[Link]:
        """Links known in both directions between two known switches."""
        return frozenset(
            link
            for link in self.links
            if link.reversed() in self.links
            and link.src.dpid in self.switches
            and link.dst.dpid in self.switches
        )

    def fabric_ports(self, dpid: int) -> frozenset[int]:
        """Ports of ``dpid`` that face another switch (in either direction, usable or not).

        A port that ever showed a link is not an edge port: learning hosts or
        flooding there would turn a half-known link into a loop.
        """
        return frozenset(
            ref.port for link in self.links for ref in (link.src, link.dst) if ref.dpid == dpid
        )

    def capacity(self, port: PortRef) -> int:
        return self.capacity_bps.get(port, self.default_capacity_bps)

    # ---- hosts ---------------------------------------------------------------

    def host(self, mac: int) -> Host | None:
        for host in self.hosts:
            if host.mac == mac:
                return host
        return None

    def host_by_ip(self, ipv4: int) -> Host | None:
        for host in self.hosts:
            if host.ipv4 == ipv4:
                return host
        return None

    def hosts_at(self, dpid: int) -> tuple[Host, ...]:
        return tuple(host for host in self.hosts if host.at.dpid == dpid)

    # ---- changes (each returns a new value) -------------------------------------

    def with_switch(self, dpid: int) -> Topology:
        return self._replace(switches=self.switches | {dpid})

    def without_switch(self, dpid: int) -> Topology:
        """A switch gone: its links (both directions) and its hosts go with it."""
        return self._replace(
            switches=self.switches - {dpid},
            links=frozenset(
                link for link in self.links if dpid not in (link.src.dpid, link.dst.dpid)
            ),
            hosts=tuple(host for host in self.hosts if host.at.dpid != dpid),
        )

    def with_link(self, link: Link) -> Topology:
        """A link seen (LLDP). Hosts once learned on either end were links all along."""
        if link in self.links:
            return self
        ends = {link.src, link.dst}
        return self._replace(
            links=self.links | {link},
            hosts=tuple(host for host in self.hosts if host.at not in ends),
        )

    def without_links(self, links: Iterable[Link]) -> Topology:
        gone = frozenset(links)
        if not gone & self.links:
            return self
        return self._replace(links=self.links - gone)

    def without_port(self, port: PortRef) -> Topology:
        """A port down or deleted: links in either direction and hosts behind it go."""
        return self._replace(
            links=frozenset(link for link in self.links if port not in (link.src, link.dst)),
            hosts=tuple(host for host in self.hosts if host.at != port),
        )

    def with_host(self, host: Host) -> Topology:
        """A host learned or moved; one MAC is at one place, one IPv4 address has one MAC."""
        kept = tuple(
            known
            for known in self.hosts
            if known.mac != host.mac and (host.ipv4 is None or known.ipv4 != host.ipv4)
        )
        return self._replace(hosts=(*kept, host))

    def without_host(self, mac: int) -> Topology:
        return self._replace(hosts=tuple(host for host in self.hosts if host.mac != mac))

    def with_capacities(self, capacity_bps: Mapping[PortRef, int]) -> Topology:
        return self._replace(capacity_bps=capacity_bps)

    def _replace(self, **changes: object) -> Topology:
        values: dict[str, object] = {
            "switches": self.switches,
            "links": self.links,
            "hosts": self.hosts,
            "capacity_bps": self.capacity_bps,
            "default_capacity_bps": self.default_capacity_bps,
        }
        values.update(changes)
        return Topology(**values)  # type: ignore[arg-type]
