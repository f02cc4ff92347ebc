"""What a topology allows a set of flows, for scenario reports to measure placement against.

A measured aggregate means little alone: 80 Mbit/s is poor on a fabric that
could carry 160 and perfect on one that carries 80.  The optimum here is the
multi-commodity flow bound over shortest paths: each flow may split across
all of its shortest paths, every directed link and every destination edge
port carries at most its capacity, and a fixed-rate flow carries at most its
rate.  Unsplit placement can only reach it, never beat it, so
``measured / max_throughput`` is the fraction of the fabric a run used.

Solved as linear programs with HiGHS (``scipy.optimize.linprog``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scipy.optimize import linprog  # type: ignore[import-untyped]

from controller.fabric.model import PortRef, Topology
from controller.fabric.paths import path_links, shortest_paths

_TOLERANCE = 1e-6
"""Relative slack when deciding that a flow cannot grow any more (LP rounding)."""


@dataclass(frozen=True, slots=True)
class Commodity:
    """One flow between two host-facing switch ports."""

    src: PortRef  # edge port where the source host attaches
    dst: PortRef  # edge port where the destination host attaches
    limit_bps: float | None = None  # a fixed-rate (UDP) flow's rate; None: elastic


@dataclass(frozen=True)
class _Program:
    """The constraint rows shared by every LP here: one variable per (commodity, path)."""

    owner: tuple[int, ...]  # commodity of each variable
    rows: tuple[tuple[int, ...], ...]  # variables crossing each resource
    capacity: tuple[float, ...]  # capacity of each resource

    def matrix(self) -> list[list[float]]:
        width = len(self.owner)
        return [[1.0 if v in set(row) else 0.0 for v in range(width)] for row in self.rows]


def max_throughput(topology: Topology, commodities: Sequence[Commodity]) -> float:
    """The largest total rate (bit/s) the commodities can carry together over shortest paths."""
    program = _program(topology, commodities)
    if not program.owner:
        return 0.0
    bounds = _bounds(program, commodities, floors={})
    solution = _solve(program, commodities, [-1.0] * len(program.owner), bounds, floors={})
    return float(-solution.fun)


def max_min_fair(topology: Topology, commodities: Sequence[Commodity]) -> list[float]:
    """Each commodity's max-min fair rate (bit/s), in order, with splitting over shortest paths.

    Progressive filling: raise every unfrozen commodity together as far as
    the fabric allows, then freeze those that cannot go further without
    taking from another (each tested by its own LP), and repeat.  A
    commodity with no path gets 0; a fixed-rate one never exceeds its rate.
    That is what TCP flows sharing the best split would converge to, the
    reference for a run's fairness.
    """
    program = _program(topology, commodities)
    rates = [0.0] * len(commodities)
    routed = set(program.owner)
    frozen: dict[int, float] = {index: 0.0 for index in range(len(commodities)) if index not in routed}
    while len(frozen) < len(commodities):
        level = _fill_level(program, commodities, frozen)
        for index in range(len(commodities)):
            if index in frozen:
                continue
            limit = commodities[index].limit_bps
            if (limit is not None and level >= limit - _slack(limit)) or not _can_grow(
                program, commodities, frozen, index, level
            ):
                frozen[index] = level if limit is None else min(level, limit)
    for index, rate in frozen.items():
        rates[index] = rate
    return rates


# ---- building the program ---------------------------------------------------------------------


def _program(topology: Topology, commodities: Sequence[Commodity]) -> _Program:
    """Variables for every shortest path of every commodity; a row per loaded resource.

    Resources are the directed fabric links and the destination edge ports
    (the last hop to the host is as much a bottleneck as any uplink).  A
    commodity between two ports of one switch has a single, empty path.
    """
    owner: list[int] = []
    crossing: dict[object, list[int]] = {}
    capacity: dict[object, float] = {}
    for index, commodity in enumerate(commodities):
        if commodity.src.dpid == commodity.dst.dpid:
            paths: tuple[tuple[tuple[int, int], ...], ...] = ((),)
        else:
            paths = shortest_paths(topology, commodity.src.dpid, commodity.dst.dpid)
        for path in paths:
            variable = len(owner)
            owner.append(index)
            resources: list[object] = [*path_links(topology, path), ("egress", commodity.dst)]
            for resource in resources:
                crossing.setdefault(resource, []).append(variable)
            for link in path_links(topology, path):
                capacity[link] = float(topology.capacity(link.src))
            capacity[("egress", commodity.dst)] = float(topology.capacity(commodity.dst))
    keys = list(crossing)
    return _Program(
        owner=tuple(owner),
        rows=tuple(tuple(crossing[key]) for key in keys),
        capacity=tuple(capacity[key] for key in keys),
    )


def _bounds(
    program: _Program, commodities: Sequence[Commodity], floors: dict[int, float]
) -> list[tuple[float, float | None]]:
    del commodities, floors  # per-commodity limits are rows, not variable bounds
    return [(0.0, None)] * len(program.owner)


def _commodity_rows(
    program: _Program, commodities: Sequence[Commodity]
) -> tuple[list[list[float]], list[float]]:
    """One row per fixed-rate commodity: the sum of its paths stays within its rate."""
    rows: list[list[float]] = []
    limits: list[float] = []
    for index, commodity in enumerate(commodities):
        if commodity.limit_bps is None or index not in program.owner:
            continue
        rows.append([1.0 if owner == index else 0.0 for owner in program.owner])
        limits.append(max(0.0, commodity.limit_bps))
    return rows, limits


def _solve(
    program: _Program,
    commodities: Sequence[Commodity],
    cost: list[float],
    bounds: list[tuple[float, float | None]],
    floors: dict[int, float],
) -> object:
    """Minimise ``cost`` with every resource, limit and commodity floor respected."""
    a_ub = program.matrix()
    b_ub = list(program.capacity)
    limit_rows, limits = _commodity_rows(program, commodities)
    a_ub += limit_rows
    b_ub += limits
    for index, floor in sorted(floors.items()):  # sum of the paths >= floor, as -sum <= -floor
        a_ub.append([-1.0 if owner == index else 0.0 for owner in program.owner])
        b_ub.append(-floor)
    result = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if result.status != 0:
        raise ValueError(f"the rate program has no solution: {result.message}")
    return result
