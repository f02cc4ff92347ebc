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
better.  Each pinned flow is judged against all the other pins, so noise
in one link's measured load never makes a path look empty.

A pin ends with its flow: at once when the flow is no longer an elephant
(its override was released, its counting entry left the table), and once
it has stayed below ``min_rate`` for ``release_after`` while still listed
(an entry that lingers, a connection left open with a trickle).  One poll
without growth is not an end: OVS refreshes counters in steps.

Flows that did not move keep their pin's path and time; the result depends
on nothing but the arguments.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from controller.fabric.job_placement import job_score, place_jobs
from controller.fabric.model import Link, Path, PortRef, Topology
from controller.fabric.paths import FabricGraph
from controller.flowid import FlowId

PLACED = "placed"
REBALANCED = "rebalanced"
LINK_DOWN = "link down"
REGROUPED = "job placed together"
"""A job's flow moved when its job's flows were placed again together (a job registered or
ended, a link failed)."""

GONE = "gone"
"""Released: the flow is no longer an elephant (override released, counting entry gone)."""
ENDED = "ended"
"""Released: the flow stayed below ``min_rate`` for ``release_after`` (it finished)."""
ONE_PATH = "one path left"
"""Released: still an elephant, but with no second path to choose from."""

_EPSILON = 1e-9
"""Float slack on time comparisons, so 0.5 s rounds add up to exactly ``release_after``."""

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
    job: str | None = None
    """The registered job the classifier put the flow in (``why`` = ``job:<name>``): a job's
    flows are placed together (``job_placement``), the others one by one."""


@dataclass(frozen=True, slots=True)
class Pin:
    """An elephant's path and when it was (re)placed there (for the hold time)."""

    path: Path
    since: float
    quiet_since: float | None = None
    """Since when the flow has been below ``min_rate`` (None: it is not), for its release."""


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
    min_rate_bps: float = 0.0  # below this a flow is not placed, and a pinned one is quiet
    release_after_s: float = math.inf  # a pin quiet this long has ended (detection's)


@dataclass(frozen=True)
class Placement:
    """The pins to install, the moves that changed them and the pins to remove (and why)."""

    pins: Mapping[FlowId, Pin] = field(default_factory=dict)
    moves: tuple[Move, ...] = ()
    released: tuple[FlowId, ...] = ()
    reasons: Mapping[FlowId, str] = field(default_factory=dict)
    """Why each released flow was released: ``GONE``, ``ENDED`` or ``ONE_PATH``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "pins", MappingProxyType(dict(sorted(self.pins.items()))))
        object.__setattr__(self, "reasons", MappingProxyType(dict(sorted(self.reasons.items()))))


def place(
    topology: Topology,
    elephants: Sequence[Elephant],
    pins: Mapping[FlowId, Pin],
    link_load_bps: Mapping[Link, float],
    now: float,
    settings: PlacementSettings = PlacementSettings(),
    *,
    regroup: bool = False,
) -> Placement:
    """Pin every elephant that has a choice of paths; keep pins unless moving clearly pays.

    Order of work:

    1. Elephants with fewer than two shortest paths are not pinned (ECMP
       already does the only thing possible); pins of flows no longer
       elephants, or without a choice, are released.  A flow below
       ``min_rate`` is not pinned; a pinned one keeps its pin through a quiet
       spell (a poll that read no growth) and loses it ("ended") once the
       spell has lasted ``release_after``.
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

    Flows of a job (``Elephant.job``) are placed together instead, before
    the flows of no job (``job_placement.place_jobs``: each job's most
    loaded link as low as it can be).  A job's pinned flow keeps its pin
    without the one-by-one rebalance (moving it alone for its own headroom
    is what splits a job); with ``regroup`` (a job registered or ended, a
    link failed) every job's flows are placed again together, and those
    that land elsewhere move ("job placed together").  The same happens
    without being asked once every job flow has held its pin for ``hold``
    and placing them all again together would lower the jobs' worst links,
    counted in demands, by more than ``min_gain`` (a link back up): a job's
    pins are not rebalanced one by one, so nothing else would move them
    (``_better_together``).

    Headroom of a path is its tightest link's capacity minus background
    load minus the demands reserved there.  Background is the measured load
    without the elephants' own traffic (see ``_Ledger.background``).  A
    demand counts at most the widest candidate path's capacity (an
    estimate may be unbounded when a NIC is unknown); beyond that no path
    could give it more.
    """
    fabric = _Fabric(topology)
    wanted = {elephant.flow: elephant for elephant in elephants}
    quiet = {flow: _quiet_since(e, pins.get(flow), now, settings) for flow, e in wanted.items()}
    ended = {
        flow
        for flow, since in quiet.items()
        if flow in pins and since is not None and now - since >= settings.release_after_s - _EPSILON
    }
    choices = {flow: fabric.candidates(e.src_dpid, e.dst_dpid) for flow, e in wanted.items()}
    placeable = {
        flow: e
        for flow, e in wanted.items()
        if len(choices[flow]) >= 2 and flow not in ended and (flow in pins or quiet[flow] is None)
    }
    released = tuple(sorted(flow for flow in pins if flow not in placeable))
    reasons = {
        flow: ENDED if flow in ended else ONE_PATH if flow in wanted else GONE for flow in released
    }
    demand = {flow: fabric.demand(e.demand_bps, choices[flow]) for flow, e in placeable.items()}

    ledger = _Ledger(fabric)
    ledger.background(link_load_bps, placeable.values(), choices, pins)
    job_of = {flow: e.job for flow, e in placeable.items() if e.job is not None}
    if not regroup and job_of:
        regroup = _better_together(fabric, placeable, choices, pins, demand, now, settings)
    keep = sorted(
        (
            e
            for flow, e in placeable.items()
            if flow in pins
            and pins[flow].path in choices[flow]
            and not (regroup and flow in job_of)
        ),
        key=lambda e: (-demand[e.flow], e.flow),
    )
    for elephant in keep:
        ledger.reserve(pins[elephant.flow].path, demand[elephant.flow])

    result: dict[FlowId, Pin] = {}
    moves: list[Move] = []
    for elephant in keep:
        flow, pin = elephant.flow, pins[elephant.flow]
        ledger.release(pin.path, demand[flow])
        better = (
            None
            if flow in job_of
            else _rebalance(demand[flow], pin, choices[flow], ledger, now, settings)
        )
        if better is None:
            same = pin.quiet_since == quiet[flow]
            result[flow] = pin if same else Pin(pin.path, pin.since, quiet[flow])
            ledger.reserve(pin.path, demand[flow])
        else:
            result[flow] = Pin(better, now, quiet[flow])
            moves.append(Move(flow, pin.path, better, REBALANCED))
            ledger.reserve(better, demand[flow])

    crossed: dict[str, set[int]] = {}
    for flow, job in job_of.items():
        if flow in result:
            crossed.setdefault(job, set()).update(fabric.links(result[flow].path))
    waiting = {flow: job for flow, job in job_of.items() if flow not in result}
    for flow, path in place_jobs(ledger, waiting, demand, choices, crossed).items():
        old = pins.get(flow)
        if old is not None and old.path == path:  # placed together where it already was
            same = old.quiet_since == quiet[flow]
            result[flow] = old if same else Pin(old.path, old.since, quiet[flow])
            continue
        result[flow] = Pin(path, now, quiet[flow])
        reason = (
            PLACED if old is None else LINK_DOWN if old.path not in choices[flow] else REGROUPED
        )
        moves.append(Move(flow, old.path if old else None, path, reason))

    queue = _Queue([e.flow for e in placeable.values() if e.flow not in result], demand, choices)
    while queue:
        flow = queue.pop(ledger)
        path = ledger.ranked(choices[flow])[0]
        old = pins.get(flow)
        result[flow] = Pin(path, now, quiet[flow])
        moves.append(Move(flow, old.path if old else None, path, LINK_DOWN if old else PLACED))
        ledger.reserve(path, demand[flow])
        queue.touched(fabric.links(path))

    return Placement(result, tuple(moves), released, reasons)


def _quiet_since(
    elephant: Elephant, pin: Pin | None, now: float, settings: PlacementSettings
) -> float | None:
    """When the flow's quiet spell began (None: it is at or above ``min_rate``).

    A zero (or unknown) rate is quiet whatever ``min_rate`` is: a flow that
    sends nothing has ended, or will have by ``release_after``."""
    rate = elephant.rate_bps
    if rate > 0 and rate >= settings.min_rate_bps:
        return None
    return pin.quiet_since if pin is not None and pin.quiet_since is not None else now


def _better_together(
    fabric: _Fabric,
    placeable: Mapping[FlowId, Elephant],
    choices: Mapping[FlowId, tuple[Path, ...]],
    pins: Mapping[FlowId, Pin],
    demand: Mapping[FlowId, float],
    now: float,
    settings: PlacementSettings,
) -> bool:
    """Whether placing every job's flows again together clearly lowers the jobs' worst links.

    A job's pinned flow is never rebalanced on its own (moving it alone for its own
    headroom is what splits a job), so without this a job placed around a failed link
    stays there once the link is back, its flows sharing what the link's return freed:
    the owner re-places jobs when a link fails, not when one comes back.  The guards are
    the one-by-one rebalance's: every pin of a job has held its path for ``hold``, some
    job's demands do not fit where they are (its worst link over capacity: only then is
    the trial placement, the costly part, computed), and the worst job's most loaded link
    (then the next job's, ...) must drop by more than ``min_gain`` of a link.  All is
    judged on the elephants' demands alone, without the measured background: port
    counters and flow counters are read at different moments, and what was left of the
    rings' bursty flows on their links once their rates came off (in the jobs-fabric
    scenario) made an equal layout look better by more than ``min_gain``: flows swapped
    spines every ``hold``.  The regroup itself then places with the background, as every
    placement does.
    """
    job_of = {flow: e.job for flow, e in placeable.items() if e.job is not None}
    pinned = {
        flow: pins[flow].path
        for flow in job_of
        if flow in pins and pins[flow].path in choices[flow]
    }
    if len(pinned) < len(job_of):
        return False  # new or displaced flows: placed around the others this round
    if any(now - pins[flow].since < settings.hold_s - _EPSILON for flow in pinned):
        return False
    ledger = _Ledger(fabric)  # no background: demands only (see above)
    for flow in placeable:
        if flow not in job_of and flow in pins and pins[flow].path in choices[flow]:
            ledger.reserve(pins[flow].path, demand[flow])
    for flow, path in pinned.items():
        ledger.reserve(path, demand[flow])
    held = job_score(ledger, job_of, pinned)
    if held[0] <= 1.0:
        return False  # every job flow gets its demand where it is (the rebalance's fit test)
    for flow, path in pinned.items():
        ledger.release(path, demand[flow])
    together = job_score(ledger, job_of, place_jobs(ledger, job_of, demand, choices))
    for was, would in zip(held, together, strict=True):
        if was != would:
            return was - would > settings.min_gain
    return False


# ---- the fabric, indexed once per call -----------------------------------------------------------


class _Fabric:
    """Shortest paths of one topology, with every usable link numbered.

    Placement weighs thousands of (flow, path) pairs per poll; numbering
    links once and caching each path's links keeps that to list lookups.
    A path's links follow ``paths.path_links``'s rule (at each hop's port,
    the lowest link leading to the next hop's switch; at the last hop, the
    port's lowest link), from an index built once instead of on every call.
    """

    def __init__(self, topology: Topology) -> None:
        self.graph = FabricGraph.of(topology)
        usable = sorted(topology.usable_links)
        self.ids = {link: index for index, link in enumerate(usable)}
        self.capacity = [float(topology.capacity(link.src)) for link in usable]
        self._at_port: dict[PortRef, list[Link]] = {}
        for link in usable:
            self._at_port.setdefault(link.src, []).append(link)
        self._paths: dict[tuple[int, int], tuple[Path, ...]] = {}
        self._links: dict[Path, tuple[int, ...]] = {}

    def candidates(self, src_dpid: int, dst_dpid: int) -> tuple[Path, ...]:
        key = (src_dpid, dst_dpid)
        if key not in self._paths:
            self._paths[key] = self.graph.shortest_paths(src_dpid, dst_dpid)
        return self._paths[key]

    def links(self, path: Path) -> tuple[int, ...]:
        """The numbered usable links a path crosses; a pin's old path keeps those still up."""
        if path not in self._links:
            ids: list[int] = []
            for index, (dpid, port) in enumerate(path):
                ahead = path[index + 1][0] if index + 1 < len(path) else None
                leaving = self._at_port.get(PortRef(dpid, port), [])
                onward = [link for link in leaving if ahead is None or link.dst.dpid == ahead]
                if onward:
                    ids.append(self.ids[onward[0]])
            self._links[path] = tuple(ids)
        return self._links[path]

    def bottleneck(self, path: Path) -> float:
        return min(self.capacity[index] for index in self.links(path))

    def demand(self, demand_bps: float, paths: Sequence[Path]) -> float:
        """A demand no larger than the widest path could carry (never negative, never NaN)."""
        widest = max(self.bottleneck(path) for path in paths)
        if math.isnan(demand_bps):
            return widest
        return min(max(0.0, demand_bps), widest)


# ---- headroom ---------------------------------------------------------------------------------


class _Ledger:
    """Background load and the demands reserved so far, per numbered link."""

    def __init__(self, fabric: _Fabric) -> None:
        self.fabric = fabric
        size = len(fabric.capacity)
        self._background = [0.0] * size
        self._reserved = [0.0] * size
        self._flows = [0] * size

    def background(
        self,
        link_load_bps: Mapping[Link, float],
        elephants: Iterable[Elephant],
        choices: Mapping[FlowId, tuple[Path, ...]],
        pins: Mapping[FlowId, Pin],
    ) -> None:
        """Measured load without the elephants being placed (never below 0).

        Their demands are reserved on the paths they end on, so counting their
        measured traffic as well would charge them twice.  A pinned flow runs
        on its pin's path.  A flow not (or no longer validly) pinned runs
        wherever the switch's select group hashed it, on one of its shortest
        paths, and which one is unknown: its rate comes off every link of
        every candidate.  That errs towards an empty-looking link, never
        towards a flow shunning the links it loads itself: counting its own
        traffic made every unpinned flow on a collided link flee to the same
        other link.
        """
        load = self._background
        for link, bps in link_load_bps.items():
            index = self.fabric.ids.get(link)
            if index is not None and math.isfinite(bps):
                load[index] = max(0.0, bps)
        for elephant in elephants:
            crossed: set[int] = set()
            pin = pins.get(elephant.flow)
            if pin is not None:
                crossed.update(self.fabric.links(pin.path))
            if pin is None or pin.path not in choices[elephant.flow]:
                for path in choices[elephant.flow]:
                    crossed.update(self.fabric.links(path))
            rate = max(0.0, elephant.rate_bps) if math.isfinite(elephant.rate_bps) else 0.0
            for index in crossed:
                load[index] = max(0.0, load[index] - rate)

    def reserve(self, path: Path, demand_bps: float) -> None:
        for index in self.fabric.links(path):
            self._reserved[index] += demand_bps
            self._flows[index] += 1

    def path_links(self, path: Path) -> tuple[int, ...]:
        return self.fabric.links(path)

    def utilisation(self, index: int, extra_bps: float = 0.0) -> float:
        """Load over capacity of one link with ``extra_bps`` more (a dead link: infinite)."""
        load = self._background[index] + self._reserved[index] + extra_bps
        capacity = self.fabric.capacity[index]
        return load / capacity if capacity > 0 else math.inf

    def crowd(self, path: Path) -> int:
        return max((self._flows[i] for i in self.fabric.links(path)), default=0)

    def release(self, path: Path, demand_bps: float) -> None:
        for index in self.fabric.links(path):
            self._reserved[index] -= demand_bps
            self._flows[index] -= 1

    def headroom(self, path: Path) -> float:
        """What the path's tightest link has left: negative when reservations exceed it."""
        return min(
            self.fabric.capacity[i] - self._background[i] - self._reserved[i]
            for i in self.fabric.links(path)
        )

    def ranked(self, paths: Sequence[Path]) -> list[Path]:
        """Paths best first: most headroom, then fewest flows on the most crowded link, then
        path order."""
        keyed = [
            (-self.headroom(path), max(self._flows[i] for i in self.fabric.links(path)), n, path)
            for n, path in enumerate(paths)
        ]
        return [path for *_, path in sorted(keyed, key=lambda entry: entry[:3])]

    def regret(self, paths: Sequence[Path]) -> float:
        """How much headroom a flow loses if it gets its second best path instead of its best."""
        first, second = self.ranked(paths)[:2]
        return self.headroom(first) - self.headroom(second)


def _rebalance(
    demand_bps: float,
    pin: Pin,
    paths: Sequence[Path],
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
    here = ledger.headroom(pin.path)
    if here >= demand_bps:
        return None
    best = ledger.ranked([path for path in paths if path != pin.path])[0]
    if ledger.headroom(best) - here <= settings.min_gain * ledger.fabric.bottleneck(pin.path):
        return None
    return best


# ---- order ------------------------------------------------------------------------------------


class _Queue:
    """Flows waiting for a path: the biggest demand's share first, within it most regret first.

    A flow's regret is its best path's headroom minus its second best's,
    judged against what is reserved now, so a flow whose neighbour just took
    one of its paths goes before flows nothing constrains yet.  Regrets are
    kept until a reservation touches one of the flow's links.
    """

    def __init__(
        self,
        flows: Iterable[FlowId],
        demand: Mapping[FlowId, float],
        choices: Mapping[FlowId, tuple[Path, ...]],
    ) -> None:
        self._demand = demand
        self._choices = choices
        self._pending = sorted(flows, key=lambda flow: (-demand[flow], flow))
        self._regret: dict[FlowId, float] = {}
        self._users: dict[int, set[FlowId]] = {}

    def __bool__(self) -> bool:
        return bool(self._pending)

    def pop(self, ledger: _Ledger) -> FlowId:
        floor = self._demand[self._pending[0]] * (1.0 - _SAME_DEMAND)
        best: tuple[float, FlowId] | None = None
        for flow in self._pending:
            if self._demand[flow] < floor:
                break
            if flow not in self._regret:
                self._regret[flow] = ledger.regret(self._choices[flow])
                for path in self._choices[flow]:
                    for index in ledger.fabric.links(path):
                        self._users.setdefault(index, set()).add(flow)
            if best is None or self._regret[flow] > best[0]:  # ties: the earlier, lower flow
                best = (self._regret[flow], flow)
        assert best is not None
        self._pending.remove(best[1])
        return best[1]

    def touched(self, links: Iterable[int]) -> None:
        """A reservation changed these links: regrets of flows crossing them are stale."""
        for index in links:
            for flow in self._users.pop(index, set()):
                self._regret.pop(flow, None)
