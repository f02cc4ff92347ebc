"""Shortest paths, ECMP next hops and the flood tree of a topology.

Everything here is a pure function of a ``Topology`` and works on
``usable_links`` only: a link seen in one direction could be a cable
still coming up or one going down, and forwarding over it would black-hole
traffic (or, for flooding, loop it).  Links are kept per port, so two cables
between the same pair of switches are two next hops, as they are to the
datapath's select group.

Nothing is cached: a ``Topology`` is replaced on every change, and a
16-leaf x 8-spine fabric plans in milliseconds from scratch, so a cache
would only add a way to serve a stale answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeAlias

import networkx as nx

from controller.fabric.model import Link, Path, PortRef, Topology

if TYPE_CHECKING:
    _LinkGraph: TypeAlias = nx.MultiDiGraph[int]
    """Nodes are dpids; one edge per usable directed link, keyed by the ``Link`` itself."""


def _graph(topology: Topology) -> _LinkGraph:
    """Every known switch, and one edge per usable directed link (the ``Link`` is the key)."""
    graph: _LinkGraph = nx.MultiDiGraph()
    graph.add_nodes_from(topology.switches)
    for link in sorted(topology.usable_links):
        graph.add_edge(link.src.dpid, link.dst.dpid, key=link)
    return graph


def _out_links(graph: _LinkGraph, dpid: int) -> list[Link]:
    """The usable links leaving ``dpid``, lowest port first."""
    return sorted(key for _, _, key in graph.out_edges(dpid, keys=True))


def _distances_to(graph: _LinkGraph, dst_dpid: int) -> dict[int, int]:
    """Hop count from every switch that can reach ``dst_dpid`` (one BFS on the reversed graph)."""
    if dst_dpid not in graph:
        return {}
    reverse = graph.reverse(copy=False)
    return dict(nx.single_source_shortest_path_length(reverse, dst_dpid))


def _next_hops_in(graph: _LinkGraph, dst_dpid: int) -> dict[int, tuple[int, ...]]:
    distance = _distances_to(graph, dst_dpid)
    hops: dict[int, tuple[int, ...]] = {}
    for dpid, own in distance.items():
        if dpid == dst_dpid:
            continue
        ports = {
            link.src.port
            for link in _out_links(graph, dpid)
            if distance.get(link.dst.dpid) == own - 1
        }
        hops[dpid] = tuple(sorted(ports))
    return hops


def next_hops(topology: Topology, dst_dpid: int) -> dict[int, tuple[int, ...]]:
    """Every switch that can reach dst_dpid -> its output ports on shortest paths (sorted).

    dst_dpid itself is absent; unreachable switches are absent.  Every port
    listed is one ECMP bucket toward ``dst_dpid``: all of them lead one hop
    closer, so any mix of choices along the way is a shortest path.
    """
    return _next_hops_in(_graph(topology), dst_dpid)


def next_hops_to(
    topology: Topology, dst_dpids: Iterable[int]
) -> dict[int, dict[int, tuple[int, ...]]]:
    """``next_hops`` for several destinations, building the graph once (a whole-fabric plan)."""
    graph = _graph(topology)
    return {dst: _next_hops_in(graph, dst) for dst in sorted(set(dst_dpids))}


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
    if src_dpid == dst_dpid or limit <= 0:
        return ()
    graph = _graph(topology)
    distance = _distances_to(graph, dst_dpid)
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
        for link in _out_links(graph, dpid):
            if distance.get(link.dst.dpid) == distance[dpid] - 1:
                walk(link.dst.dpid, (*prefix, (dpid, link.src.port)))

    walk(src_dpid, ())
    return tuple(sorted(found))


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
    graph = _graph(topology)
    ports: dict[int, set[int]] = {dpid: set() for dpid in topology.switches}
    reached: set[int] = set()
    for root in sorted(topology.switches):
        if root in reached:
            continue
        reached.add(root)
        frontier = [root]
        while frontier:  # breadth first, one level at a time, lowest ports first
            following: list[int] = []
            for dpid in frontier:
                for link in _out_links(graph, dpid):
                    if link.dst.dpid in reached:
                        continue
                    reached.add(link.dst.dpid)
                    following.append(link.dst.dpid)
                    ports[dpid].add(link.src.port)
                    ports[link.dst.dpid].add(link.dst.port)
            frontier = following
    return {dpid: frozenset(found) for dpid, found in ports.items()}
