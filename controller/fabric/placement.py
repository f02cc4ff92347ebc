"""Where each elephant runs: Global First Fit over its shortest paths, with bounded churn.

ECMP hashes flows onto paths without looking at their size, so two
elephants often share one link while another stays idle (eight iperf3
streams over two buckets split 11 % / 89 % in this lab).  Hedera's answer
is to pin each elephant on a path that has room for its natural demand
(see ``demand``), biggest first.  This module decides the pins; the
forwarding plan turns them into exact-match entries.

Placement runs on every statistics poll, so it must not flap: a pinned
flow stays where it is unless its path is gone, or it has held its path
for a while, cannot get its demand there, and another path is clearly
better.  Every other flow is then judged against all the pins that stay,
so noise in one link's measured load never looks like an empty path.

Flows that did not move keep their pin as it was; the result depends on
nothing but the arguments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from controller.classify.flows import FlowId
from controller.fabric.model import Link, Path, PortRef, Topology
from controller.fabric.paths import path_links, shortest_paths

PLACED = "placed"
REBALANCED = "rebalanced"
LINK_DOWN = "link down"

_SAME_DEMAND = 0.05
"""Demands within 5 % of each other are estimates of the same share (NIC / n)."""


@dataclass(frozen=True, slots=True)
class Elephant:
    """A flow the detector called an elephant, where it enters and leaves the fabric."""

    flow: FlowId
    src_dpid: int
    dst_dpid: int
    demand_bps: float  # natural demand (``demand.estimate_demands``)
    rate_bps: float  # measured


@dataclass(frozen=True, slots=True)
class Pin:
    """An elephant's path and when it was (re)placed there (for the hold time)."""

    path: Path
    since: float


@dataclass(frozen=True, slots=True)
class Move:
    """One change of path; ``old`` is None for a flow placed for the first time."""

    flow: FlowId
    old: Path | None
    new: Path
    reason: str  # "placed", "rebalanced", "link down"


@dataclass(frozen=True, slots=True)
class PlacementSettings:
    hold_s: float = 5.0  # a flow moved is not moved again for a rebalance sooner than this
    min_gain: float = 0.10  # fraction of link capacity a move must gain to be worth it


@dataclass(frozen=True)
class Placement:
    """The pins to install, the moves that changed them and the pins to remove."""

    pins: Mapping[FlowId, Pin] = field(default_factory=dict)
    moves: tuple[Move, ...] = ()
    released: tuple[FlowId, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "pins", MappingProxyType(dict(sorted(self.pins.items()))))


def place(
    topology: Topology,
    elephants: Sequence[Elephant],
    pins: Mapping[FlowId, Pin],
    link_load_bps: Mapping[Link, float],
    now: float,
    settings: PlacementSettings = PlacementSettings(),
) -> Placement:
    """Pin every elephant that has a choice of paths; keep pins unless moving clearly pays.

    Order of work:

    1. Elephants with fewer than two shortest paths are not pinned (ECMP
       already does the only thing possible); pins of flows no longer
       elephants, or without a choice, are released.
    2. Every pin whose path is still a shortest path reserves its demand
       there.  Then, biggest demand first, each one is taken off its path
       and moved only if its hold time has passed, its path cannot fit its
       demand, and the best other path has more than ``min_gain`` of the
       link capacity more headroom ("rebalanced").
    3. New elephants ("placed") and those whose path is gone ("link down",
       at once, whatever their hold) go, biggest demand first, to the path
       with the most headroom (ties: fewest reserved flows, then path
       order).  Among demands that are the same share, the flow that loses
       most if it does not get its best path goes first (the regret rule):
       with demands above link capacity this lays colliding flows out like
       an edge colouring, one per link wherever the fabric allows it,
       where a fixed order can paint itself into a corner.

    Headroom of a path is its tightest link's capacity minus background
    load minus the demands reserved there.  Background is the measured load
    without the elephants' own traffic (see ``_background``).
    """
    wanted = {elephant.flow: elephant for elephant in elephants}
    routes = _Routes(topology)
    choices = {flow: routes.candidates(e.src_dpid, e.dst_dpid) for flow, e in wanted.items()}
    placeable = {flow: e for flow, e in wanted.items() if len(choices[flow]) >= 2}
    released = tuple(sorted(flow for flow in pins if flow not in placeable))

    ledger = _Ledger(topology, _background(topology, routes, placeable, choices, pins, link_load_bps))
    keep = sorted(
        (e for flow, e in placeable.items() if flow in pins and pins[flow].path in choices[flow]),
        key=_biggest_first,
    )
    for elephant in keep:
        ledger.reserve(routes.links(pins[elephant.flow].path), elephant.demand_bps)

    result: dict[FlowId, Pin] = {}
    moves: list[Move] = []
    for elephant in keep:
        pin = pins[elephant.flow]
        current = routes.links(pin.path)
        ledger.release(current, elephant.demand_bps)
        better = _rebalance(elephant, pin, choices[elephant.flow], routes, ledger, now, settings)
        if better is None:
            result[elephant.flow] = pin
            ledger.reserve(current, elephant.demand_bps)
        else:
            result[elephant.flow] = Pin(better, now)
            moves.append(Move(elephant.flow, pin.path, better, REBALANCED))
            ledger.reserve(routes.links(better), elephant.demand_bps)

    kept = {elephant.flow for elephant in keep}
    for elephant in _regret_order(
        [e for flow, e in placeable.items() if flow not in kept], choices, routes, ledger
    ):
        path = _best(choices[elephant.flow], routes, ledger)[0]
        old = pins.get(elephant.flow)
        result[elephant.flow] = Pin(path, now)
        moves.append(
            Move(elephant.flow, old.path if old else None, path, LINK_DOWN if old else PLACED)
        )
        ledger.reserve(routes.links(path), elephant.demand_bps)

    return Placement(result, tuple(moves), released)


# ---- paths and their links --------------------------------------------------------------------


class _Routes:
    """Shortest paths and path links of one topology, each computed once per ``place`` call."""

    def __init__(self, topology: Topology) -> None:
        self._topology = topology
        self._paths: dict[tuple[int, int], tuple[Path, ...]] = {}
        self._links: dict[Path, tuple[Link, ...]] = {}
        self._by_port: dict[PortRef, Link] = {}
        for link in sorted(topology.usable_links, reverse=True):
            self._by_port[link.src] = link  # the lowest link of a port wins, as in path_links

    def candidates(self, src_dpid: int, dst_dpid: int) -> tuple[Path, ...]:
        key = (src_dpid, dst_dpid)
        if key not in self._paths:
            self._paths[key] = shortest_paths(self._topology, src_dpid, dst_dpid)
        return self._paths[key]

    def links(self, path: Path) -> tuple[Link, ...]:
        """The links of a shortest path (one of ``candidates``)."""
        if path not in self._links:
            self._links[path] = path_links(self._topology, path)
        return self._links[path]

    def surviving_links(self, path: Path) -> tuple[Link, ...]:
        """The usable links a pinned path still crosses, whatever became of the rest of it."""
        return tuple(
            self._by_port[PortRef(dpid, port)]
            for dpid, port in path
            if PortRef(dpid, port) in self._by_port
        )


def _background(
    topology: Topology,
    routes: _Routes,
    elephants: Mapping[FlowId, Elephant],
    choices: Mapping[FlowId, tuple[Path, ...]],
    pins: Mapping[FlowId, Pin],
    link_load_bps: Mapping[Link, float],
) -> dict[Link, float]:
    """Measured load per usable link without the elephants being placed (never below 0).

    Their demands are reserved on the paths they end on, so counting their
    measured traffic as well would charge them twice.  A pinned flow runs on
    its pin's path.  A flow not (or no longer validly) pinned runs wherever
    the switch's select group hashed it, on one of its shortest paths, and
    which one is unknown: its rate comes off every link of every candidate.
    That errs towards an empty-looking link, never towards a flow shunning
    the links it loads itself: counting its own traffic made every unpinned
    flow on a collided link flee to the same other link.
    """
    load = {link: max(0.0, link_load_bps.get(link, 0.0)) for link in topology.usable_links}
    for flow, elephant in elephants.items():
        crossed: set[Link] = set()
        pin = pins.get(flow)
        if pin is not None:
            crossed.update(routes.surviving_links(pin.path))
        if pin is None or pin.path not in choices[flow]:
            for path in choices[flow]:
                crossed.update(routes.links(path))
        for link in crossed:
            if link in load:
                load[link] = max(0.0, load[link] - max(0.0, elephant.rate_bps))
    return load


# ---- headroom ---------------------------------------------------------------------------------


class _Ledger:
    """Capacity, background and the demands reserved so far, per link."""

    def __init__(self, topology: Topology, background: Mapping[Link, float]) -> None:
        self._topology = topology
        self._background = background
        self._reserved: dict[Link, float] = {}
        self._flows: dict[Link, int] = {}

    def reserve(self, links: Iterable[Link], demand_bps: float) -> None:
        for link in links:
            self._reserved[link] = self._reserved.get(link, 0.0) + demand_bps
            self._flows[link] = self._flows.get(link, 0) + 1

    def release(self, links: Iterable[Link], demand_bps: float) -> None:
        for link in links:
            self._reserved[link] -= demand_bps
            self._flows[link] -= 1

    def capacity(self, links: Sequence[Link]) -> float:
        return float(min(self._topology.capacity(link.src) for link in links))

    def headroom(self, links: Sequence[Link]) -> float:
        """What the tightest link has left: negative when reservations exceed it."""
        return min(
            self._topology.capacity(link.src)
            - self._background.get(link, 0.0)
            - self._reserved.get(link, 0.0)
            for link in links
        )

    def crowding(self, links: Sequence[Link]) -> int:
        """Flows reserved on the most crowded link."""
        return max(self._flows.get(link, 0) for link in links)


def _ranked(
    paths: Sequence[Path], routes: _Routes, ledger: _Ledger
) -> list[tuple[float, int, int, Path]]:
    """Paths best first: most headroom, then fewest reserved flows, then path order."""
    ranked = [
        (ledger.headroom(routes.links(path)), ledger.crowding(routes.links(path)), index, path)
        for index, path in enumerate(paths)
    ]
    ranked.sort(key=lambda entry: (-entry[0], entry[1], entry[2]))
    return ranked


def _best(paths: Sequence[Path], routes: _Routes, ledger: _Ledger) -> tuple[Path, float]:
    headroom, _, _, path = _ranked(paths, routes, ledger)[0]
    return path, headroom


def _rebalance(
    elephant: Elephant,
    pin: Pin,
    paths: Sequence[Path],
    routes: _Routes,
    ledger: _Ledger,
    now: float,
    settings: PlacementSettings,
) -> Path | None:
    """A clearly better path for a pinned flow taken off its own, or None to stay.

    All three conditions guard against churn: the hold time stops a flow
    from chasing load it just caused, the fit test leaves alone a flow that
    gets what it wants, and the gain threshold ignores measurement noise.
    """
    if now - pin.since < settings.hold_s:
        return None
    current = routes.links(pin.path)
    here = ledger.headroom(current)
    if here >= elephant.demand_bps:
        return None
    others = [path for path in paths if path != pin.path]
    path, there = _best(others, routes, ledger)
    if there - here <= settings.min_gain * ledger.capacity(current):
        return None
    return path


# ---- order ------------------------------------------------------------------------------------


def _biggest_first(elephant: Elephant) -> tuple[float, FlowId]:
    return (-elephant.demand_bps, elephant.flow)


def _regret_order(
    elephants: Sequence[Elephant],
    choices: Mapping[FlowId, tuple[Path, ...]],
    routes: _Routes,
    ledger: _Ledger,
) -> Iterable[Elephant]:
    """Biggest demand first; within one share, the flow with most to lose next.

    A flow's regret is its best path's headroom minus its second best's. It
    is recomputed after every placement (the caller reserves before asking
    for the next flow), so a flow whose neighbour just took one of its paths
    goes before flows nothing constrains yet.
    """
    pending = sorted(elephants, key=_biggest_first)
    while pending:
        top = pending[0].demand_bps
        same = [e for e in pending if e.demand_bps >= top * (1.0 - _SAME_DEMAND)]
        chosen = max(same, key=lambda e: (_regret(choices[e.flow], routes, ledger), _neg(e.flow)))
        pending.remove(chosen)
        yield chosen


def _regret(paths: Sequence[Path], routes: _Routes, ledger: _Ledger) -> float:
    ranked = _ranked(paths, routes, ledger)
    return ranked[0][0] - ranked[1][0]


def _neg(flow: FlowId) -> tuple[int, ...]:
    """A key that makes ``max`` prefer the lowest flow among equal regrets."""
    return tuple(-part for part in flow)
