"""Shortest paths, ECMP next hops and the flood tree of a topology.

Everything here is a pure function of a ``Topology`` and works on
``usable_links`` only: a link seen in one direction could be a cable
still coming up or one going down, and forwarding over it would black-hole
traffic (or, for flooding, loop it).  Links are kept per port, so two cables
between the same pair of switches are two next hops, as they are to the
datapath's select group.

Nothing is cached across calls: a ``Topology`` is replaced on every change,
and a 16-leaf x 8-spine fabric plans in milliseconds from scratch, so a
cache would only add a way to serve a stale answer.  ``FabricGraph`` lets
one plan build the index once and ask it many questions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, TypeAlias

import networkx as nx

from controller.fabric.model import Link, Path, PortRef, Topology
from controller.flowid import IP_PROTO_TCP, FlowId

if TYPE_CHECKING:
    _Reachability: TypeAlias = nx.DiGraph[int]


@dataclass(frozen=True, eq=False)
class FabricGraph:
    """The usable part of a topology, indexed once for many questions.

    A switch's plan asks for next hops toward every leaf with hosts and for
    the flood tree; building this once per plan instead of once per question
    is what keeps a 16 x 8 fabric in milliseconds.  It is never changed after
    ``of`` builds it, and holds nothing the topology does not determine.
    """

    switches: frozenset[int]
    out: Mapping[int, tuple[Link, ...]]
    """Per switch, the usable links leaving it, lowest port first."""

    towards: _Reachability
    """An edge v -> u for every usable link u -> v: a BFS from a destination on it gives
    every switch's distance *to* that destination."""

    @classmethod
    def of(cls, topology: Topology) -> FabricGraph:
        out: dict[int, list[Link]] = {dpid: [] for dpid in topology.switches}
        towards: _Reachability = nx.DiGraph()
        towards.add_nodes_from(topology.switches)
        for link in sorted(topology.usable_links):
            out[link.src.dpid].append(link)
            towards.add_edge(link.dst.dpid, link.src.dpid)
        frozen = {dpid: tuple(links) for dpid, links in out.items()}
        return cls(topology.switches, MappingProxyType(frozen), towards)

    def distances_to(self, dst_dpid: int) -> dict[int, int]:
        """Hop count from every switch that can reach ``dst_dpid`` (one BFS)."""
        if dst_dpid not in self.towards:
            return {}
        return dict(nx.single_source_shortest_path_length(self.towards, dst_dpid))

    def _closer(self, dpid: int, distance: Mapping[int, int]) -> tuple[int, ...]:
        own = distance[dpid]
        return tuple(
            sorted(
                {link.src.port for link in self.out[dpid] if distance.get(link.dst.dpid) == own - 1}
            )
        )

    def next_hops(self, dst_dpid: int) -> dict[int, tuple[int, ...]]:
        """See ``next_hops``."""
        distance = self.distances_to(dst_dpid)
        return {dpid: self._closer(dpid, distance) for dpid in distance if dpid != dst_dpid}

    def next_hops_at(self, dpid: int, dst_dpid: int) -> tuple[int, ...]:
        """The ECMP ports of ``dpid`` alone toward ``dst_dpid``; () when none or the same."""
        distance = self.distances_to(dst_dpid)
        if dpid == dst_dpid or dpid not in distance:
            return ()
        return self._closer(dpid, distance)

    def shortest_paths(self, src_dpid: int, dst_dpid: int, limit: int = 64) -> tuple[Path, ...]:
        """See ``shortest_paths``."""
        if src_dpid == dst_dpid or limit <= 0:
            return ()
        distance = self.distances_to(dst_dpid)
        if src_dpid not in distance:
            return ()
        found: list[Path] = []
        seen: set[Path] = set()

        def walk(dpid: int, prefix: Path) -> None:
            if len(found) >= limit:
                return
            if dpid == dst_dpid:
                if prefix not in seen:  # one port reaching two closer switches repeats a path
                    seen.add(prefix)
                    found.append(prefix)
                return
            for link in self.out[dpid]:
                if distance.get(link.dst.dpid) == distance[dpid] - 1:
                    walk(link.dst.dpid, (*prefix, (dpid, link.src.port)))

        walk(src_dpid, ())
        return tuple(sorted(found))

    def flood_tree(self) -> dict[int, frozenset[int]]:
        """See ``flood_tree``."""
        ports: dict[int, set[int]] = {dpid: set() for dpid in self.switches}
        reached: set[int] = set()
        for root in sorted(self.switches):
            if root in reached:
                continue
            reached.add(root)
            frontier = [root]
            while frontier:  # breadth first, one level at a time, lowest ports first
                following: list[int] = []
                for dpid in frontier:
                    for link in self.out[dpid]:
                        if link.dst.dpid in reached:
                            continue
                        reached.add(link.dst.dpid)
                        following.append(link.dst.dpid)
                        ports[dpid].add(link.src.port)
                        ports[link.dst.dpid].add(link.dst.port)
                frontier = following
        return {dpid: frozenset(found) for dpid, found in ports.items()}


def next_hops(topology: Topology, dst_dpid: int) -> dict[int, tuple[int, ...]]:
    """Every switch that can reach dst_dpid -> its output ports on shortest paths (sorted).

    dst_dpid itself is absent; unreachable switches are absent.  Every port
    listed is one ECMP bucket toward ``dst_dpid``: all of them lead one hop
    closer, so any mix of choices along the way is a shortest path.
    """
    return FabricGraph.of(topology).next_hops(dst_dpid)


def next_hops_to(
    topology: Topology, dst_dpids: Iterable[int]
) -> dict[int, dict[int, tuple[int, ...]]]:
    """``next_hops`` for several destinations, building the graph once (a whole-fabric plan)."""
    graph = FabricGraph.of(topology)
    return {dst: graph.next_hops(dst) for dst in sorted(set(dst_dpids))}


def shortest_paths(
    topology: Topology, src_dpid: int, dst_dpid: int, limit: int = 64
) -> tuple[Path, ...]:
    """Every shortest path as hops (dpid, out_port) from src_dpid up to but excluding dst_dpid
    (the last hop's port leads into dst_dpid); parallel links give distinct paths; sorted,
    deterministic, at most `limit`; () when src == dst or unreachable.

    Paths are walked in port order along the next-hop sets, so they come out
    sorted and the first ``limit`` are always the same ones: a placement that
    picks among them picks the same path for the same topology.
    """
    return FabricGraph.of(topology).shortest_paths(src_dpid, dst_dpid, limit)


def path_links(topology: Topology, path: Path) -> tuple[Link, ...]:
    """The directed links a path crosses, in order (KeyError/ValueError if a hop is not a
    usable link).

    KeyError: a hop's port has no usable link.  ValueError: the link leaves
    toward a switch other than the next hop's (the path is not connected).
    Placement charges load to these links, so a path it cannot account for
    must fail loudly, not be charged to the wrong links.
    """
    usable = topology.usable_links
    by_port: dict[PortRef, list[Link]] = {}
    for link in sorted(usable):
        by_port.setdefault(link.src, []).append(link)
    links: list[Link] = []
    for index, (dpid, port) in enumerate(path):
        candidates = by_port.get(PortRef(dpid, port))
        if not candidates:
            raise KeyError(f"no usable link leaves {PortRef(dpid, port)}")
        if index + 1 < len(path):
            following = path[index + 1][0]
            onward = [link for link in candidates if link.dst.dpid == following]
            if not onward:
                raise ValueError(f"{PortRef(dpid, port)} does not lead to switch {following:016x}")
            links.append(onward[0])
        else:
            links.append(candidates[0])
    return tuple(links)


def flood_tree(topology: Topology) -> dict[int, frozenset[int]]:
    """For every known switch: its fabric ports on one loop-free spanning tree over usable links
    (both ends of every tree link included; switches with no tree link map to frozenset()).
    Deterministic (e.g. BFS from the lowest dpid, lowest ports first) so re-planning is stable.

    Broadcast and multicast follow this tree and nothing else, so a frame
    reaches every switch once whatever loops the fabric has.  A disconnected
    fabric gets one tree per part, each grown from its lowest dpid.  Keeping
    the tree stable across re-plans matters: a tree that changed shape on
    every host learned would rewrite every flood entry of every switch.
    """
    return FabricGraph.of(topology).flood_tree()


def reverse_path(topology: Topology, path: Path) -> Path | None:
    """The same links crossed the other way, from the destination switch back to the source.

    A placed TCP flow's ACKs take it: hashed, they could land behind a full
    link of someone else's (a fixed-rate UDP flow, which does not yield), and
    a TCP sender runs no faster than its ACKs come back.  None when a link of
    the path is gone.
    """
    try:
        links = path_links(topology, path)
    except (KeyError, ValueError):
        return None
    return tuple((link.dst.dpid, link.dst.port) for link in reversed(links))


def pinned_paths(topology: Topology, pins: Mapping[FlowId, Path]) -> dict[FlowId, Path]:
    """Every pinned flow's path and, for TCP, its ACKs on the same links backwards.

    Both the controller and the API's dry-run plan build the pinned entries
    from this, so they agree on what a placement installs.
    """
    paths = dict(pins)
    for flow, path in pins.items():
        back = flow.reversed()
        if flow.ip_proto != IP_PROTO_TCP or back in paths:
            continue
        reverse = reverse_path(topology, path)
        if reverse:
            paths[back] = reverse
    return paths
