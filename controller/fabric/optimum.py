"""What a topology allows a set of flows, for scenario reports to measure placement against.

A measured aggregate means little alone: 80 Mbit/s is poor on a fabric that
could carry 160 and perfect on one that carries 80.  The optimum here is the
multi-commodity flow bound over shortest paths: each flow may split across
all of its shortest paths, every directed link and every destination edge
port carries at most its capacity, and a fixed-rate flow carries at most its
rate.  Unsplit placement can only reach it, never beat it, so
``measured / max_throughput`` is the fraction of the fabric a run used.

The hops of one ring all-reduce are one commodity each but not independent:
a ring moves at its slowest hop, so they carry one rate, and a run reports
the ring's rate (one hop's), not the sum over its hops.  Commodities with the
same ``ring`` are held to one rate and counted once, so the optimum is in the
measured figure's units.

Solved as linear programs with HiGHS (``scipy.optimize.linprog``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from controller.fabric.model import Path, PortRef, Topology
from controller.fabric.paths import FabricGraph, path_links

_SLACK = 1e-7
"""Relative slack for LP rounding: a floor a solver just reached must stay feasible."""


@dataclass(frozen=True, slots=True)
class Commodity:
    """One flow between two host-facing switch ports."""

    src: PortRef  # edge port where the source host attaches
    dst: PortRef  # edge port where the destination host attaches
    limit_bps: float | None = None  # a fixed-rate (UDP) flow's rate; None: elastic
    ring: str | None = None
    """The all-reduce ring this is a hop of: a ring's hops carry one rate, counted once."""


def max_throughput(topology: Topology, commodities: Sequence[Commodity]) -> float:
    """The largest total rate (bit/s) the commodities can carry together over shortest paths,
    a ring counted once at its rate (every one of its hops carrying it)."""
    program = _Program.build(topology, commodities)
    if not program.paths:
        return 0.0
    hops: dict[str, list[int]] = {}
    for index, commodity in enumerate(commodities):
        if commodity.ring is not None:
            hops.setdefault(commodity.ring, []).append(index)
    owners = np.array(program.paths)
    gain = np.ones(len(program.paths))
    rows: list[NDArray[np.float64]] = []
    for members in hops.values():
        gain[np.isin(owners, members)] = 1.0 / len(members)
        for index in members[1:]:  # each hop's rate equal to the first's: two inequalities
            difference = program.rate_row(index) - program.rate_row(members[0])
            rows += [difference, -difference]
    rates = program.solve(gain, rows, [0.0] * len(rows))
    return float(gain @ rates)


def max_min_fair(topology: Topology, commodities: Sequence[Commodity]) -> list[float]:
    """Each commodity's max-min fair rate (bit/s), in order, each splitting over shortest paths.

    Progressive filling: raise every commodity not yet frozen together as far
    as the fabric allows, then freeze those that cannot go further without
    taking from a commodity that has no more (each tested by its own LP),
    and repeat.  A commodity with no path gets 0; a fixed-rate one stops at
    its rate.  That is where TCP flows sharing the best split would settle,
    the reference for a run's fairness.  Every commodity is filled on its own:
    ``ring`` is not read here (a ring's hops are not flows competing for a share).
    """
    program = _Program.build(topology, commodities)
    frozen = {index: 0.0 for index in range(len(commodities)) if index not in program.routed}
    while len(frozen) < len(commodities):
        growing = [index for index in range(len(commodities)) if index not in frozen]
        level = program.fill_level(frozen, growing)
        stuck = [index for index in growing if not program.can_grow(frozen, growing, index, level)]
        for index in stuck or growing:  # nothing stuck: only rounding stopped the level
            frozen[index] = level
    return [frozen[index] for index in range(len(commodities))]


@dataclass(frozen=True)
class _Program:
    """One LP variable per (commodity, shortest path); one row per loaded resource.

    Resources are the directed fabric links and the destination edge ports
    (the last hop to the host is as much a bottleneck as any uplink).  A
    commodity between two ports of one switch has one, empty, path.
    """

    commodities: tuple[Commodity, ...]
    paths: tuple[int, ...]  # the commodity each variable belongs to
    load: NDArray[np.float64]  # resources x variables, 1 where a variable crosses a resource
    capacity: NDArray[np.float64]

    @classmethod
    def build(cls, topology: Topology, commodities: Sequence[Commodity]) -> _Program:
        owners: list[int] = []
        crossing: dict[object, set[int]] = {}
        capacity: dict[object, float] = {}
        graph = FabricGraph.of(topology)
        for index, commodity in enumerate(commodities):
            for path in _paths(graph, commodity):
                variable = len(owners)
                owners.append(index)
                for link in path_links(topology, path):
                    crossing.setdefault(link, set()).add(variable)
                    capacity[link] = float(topology.capacity(link.src))
                egress = ("egress", commodity.dst)
                crossing.setdefault(egress, set()).add(variable)
                capacity[egress] = float(topology.capacity(commodity.dst))
        keys = list(crossing)
        load = np.zeros((len(keys), len(owners)))
        for row, key in enumerate(keys):
            load[row, sorted(crossing[key])] = 1.0
        return cls(
            commodities=tuple(commodities),
            paths=tuple(owners),
            load=load,
            capacity=np.array([capacity[key] for key in keys], dtype=np.float64),
        )

    @property
    def routed(self) -> frozenset[int]:
        return frozenset(self.paths)

    def rate_row(self, index: int) -> NDArray[np.float64]:
        """Coefficients summing commodity ``index``'s paths into its rate."""
        return np.array([1.0 if owner == index else 0.0 for owner in self.paths])

    def solve(
        self,
        gain: NDArray[np.float64],
        rows: Sequence[NDArray[np.float64]] = (),
        limits: Sequence[float] = (),
    ) -> NDArray[np.float64]:
        """Variables maximising ``gain``, within capacities, fixed rates and the extra rows.

        Extra rows (and ``gain``) may have one more column than there are
        path variables: the common level of progressive filling.
        """
        width = len(gain)
        a_ub = [np.pad(self.load, ((0, 0), (0, width - len(self.paths))))]
        b_ub = [self.capacity]
        for index, commodity in enumerate(self.commodities):
            if commodity.limit_bps is not None and index in self.routed:
                a_ub.append(_widen(self.rate_row(index), width)[np.newaxis, :])
                b_ub.append(np.array([max(0.0, commodity.limit_bps)]))
        for row, limit in zip(rows, limits, strict=True):
            a_ub.append(_widen(row, width)[np.newaxis, :])
            b_ub.append(np.array([limit]))
        # Imported here: scipy costs half a second of start-up to every process (the API, a
        # test worker) that imports the fabric model and never solves a program.
        from scipy.optimize import linprog  # type: ignore[import-untyped]

        result = linprog(
            -gain, A_ub=np.vstack(a_ub), b_ub=np.concatenate(b_ub), bounds=(0, None), method="highs"
        )
        if result.status != 0:
            raise ValueError(f"the rate program has no solution: {result.message}")
        solution: NDArray[np.float64] = result.x
        return solution

    def floors(
        self, frozen: dict[int, float], at_least: Sequence[int], level: float | None
    ) -> tuple[list[NDArray[np.float64]], list[float]]:
        """Rows keeping frozen commodities at their rate and ``at_least`` ones at ``level``.

        With ``level`` None the ``at_least`` commodities are tied to the
        level variable (the last column) instead.
        """
        width = len(self.paths) + 1
        rows: list[NDArray[np.float64]] = []
        limits: list[float] = []
        for index, rate in sorted(frozen.items()):
            if index in self.routed:
                rows.append(-_widen(self.rate_row(index), width))
                limits.append(-rate * (1.0 - _SLACK))
        for index in at_least:
            row = -_widen(self.rate_row(index), width)
            if level is None:
                row[-1] = 1.0  # level - rate <= 0
                limits.append(0.0)
            else:
                limits.append(-level * (1.0 - _SLACK))
            rows.append(row)
        return rows, limits

    def fill_level(self, frozen: dict[int, float], growing: Sequence[int]) -> float:
        """The highest rate every growing commodity can have at once, frozen ones kept."""
        rows, limits = self.floors(frozen, growing, None)
        gain = np.zeros(len(self.paths) + 1)
        gain[-1] = 1.0
        return float(self.solve(gain, rows, limits)[-1])

    def can_grow(
        self, frozen: dict[int, float], growing: Sequence[int], index: int, level: float
    ) -> bool:
        """Whether ``index`` can exceed ``level`` with the others growing kept at ``level``."""
        rows, limits = self.floors(frozen, growing, level)
        gain = np.append(self.rate_row(index), 0.0)
        best = float(gain @ self.solve(gain, rows, limits))
        return best > level * (1.0 + 1e-6) + 1e-3


def _paths(graph: FabricGraph, commodity: Commodity) -> tuple[Path, ...]:
    """Every shortest path; between two ports of one switch, the one empty path."""
    if commodity.src.dpid == commodity.dst.dpid:
        return ((),)
    return graph.shortest_paths(commodity.src.dpid, commodity.dst.dpid)


def _widen(row: NDArray[np.float64], width: int) -> NDArray[np.float64]:
    return np.pad(row, (0, width - len(row)))
