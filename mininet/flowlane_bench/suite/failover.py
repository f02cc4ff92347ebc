"""Link events during a phase: the optimum after each one, and how fast training got back to it.

The optimum is the fabric's maximum multi-commodity throughput for the
training flows (``controller.fabric.optimum``) with every link that is down
at that moment removed.  Probe and inference streams keep their share of the
links (they are served first: they are the latency classes), so the
optimum for training is what the whole load can move minus what they need.

Recovery is read from the aggregate training throughput timeline: the time
from the event to the first interval from which throughput averages at
least ``RECOVERED`` of the new optimum over ``HOLD_S`` (or until the next
event).  One interval is the resolution.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from controller.fabric.model import Topology
from controller.fabric.optimum import Commodity, max_throughput
from flowlane_bench.suite.fabric import without_links
from flowlane_bench.suite.probe import ProbeRun
from flowlane_bench.suite.probe import windows as probe_windows
from flowlane_bench.suite.report import EventResult
from flowlane_bench.suite.spec import LinkEvent, LinkState
from flowlane_bench.suite.topology import TopologyPlan

RECOVERED = 0.9
HOLD_S = 1.0


@dataclass(frozen=True, slots=True)
class LinkStates:
    """The links down right after an event, in the order they failed."""

    at: float
    down: tuple[tuple[str, str], ...]


def link_states(events: Sequence[LinkEvent]) -> list[LinkStates]:
    """After each event, which links are down (events validated: they alternate per link)."""
    down: list[tuple[str, str]] = []
    states = []
    for event in events:
        key = frozenset(event.link)
        down = [link for link in down if frozenset(link) != key]
        if event.state is LinkState.DOWN:
            down.append(event.link)
        states.append(LinkStates(event.at, tuple(down)))
    return states


def training_optimum(
    topology: Topology, training: Sequence[Commodity], others: Sequence[Commodity] = ()
) -> float:
    """What the training flows can move at best when the other (limited) streams are carried.

    ``max_throughput`` counts every bit alike, so with the small latency
    streams served in full the rest of the optimum is training's.
    """
    if not training:
        return 0.0
    if not others:
        return max_throughput(topology, training)
    served = sum(c.limit_bps or 0.0 for c in others)
    return max(0.0, max_throughput(topology, [*training, *others]) - served)


def after_events(
    topology: Topology,
    plan: TopologyPlan,
    events: Sequence[LinkEvent],
    training: Sequence[Commodity],
    others: Sequence[Commodity] = (),
) -> list[float]:
    """The training optimum right after each event."""
    return [
        training_optimum(without_links(topology, plan, state.down), training, others)
        for state in link_states(events)
    ]


def recovery_time(
    series: Sequence[tuple[float, float]],
    interval_s: float,
    at: float,
    until: float,
    threshold_bps: float,
    hold_s: float = HOLD_S,
) -> float | None:
    """Seconds from ``at`` to the first interval that starts ``hold_s`` at ``threshold_bps``.

    ``series`` is (interval middle, bit/s) on the phase's clock.  Throughput
    is averaged over ``hold_s`` from each candidate interval on: iperf3
    counts whole socket writes, so a 0.2 s interval of a 20 Mbit/s flow reads
    a multiple of about 5 Mbit/s, and single intervals swing above and below
    any threshold.  Intervals that start before ``at`` mix the states before
    and after and are not read; averages end at ``until`` (the next event or
    the phase's end).  None: not recovered in time.
    """
    if interval_s <= 0:
        raise ValueError("interval must be positive")
    after = [
        (middle - interval_s / 2, value)
        for middle, value in series
        if middle - interval_s / 2 >= at - 1e-9 and middle + interval_s / 2 <= until + 1e-9
    ]
    needed = min(len(after), max(1, math.ceil(hold_s / interval_s - 1e-9)))
    for index in range(len(after) - needed + 1):
        window = after[index : index + needed]
        if sum(value for _, value in window) / needed >= threshold_bps:
            return round(window[0][0] - at, 3)
    return None


def crosses(path: Sequence[str], plan: TopologyPlan, link: tuple[str, str]) -> bool:
    """Whether a traced path (switch port names) leaves through either end of ``link``."""
    a, b = link
    return plan.port_to(a, b) in path or plan.port_to(b, a) in path


def event_results(
    events: Sequence[LinkEvent],
    *,
    origin: float,
    executed: Sequence[float],
    phase_s: float,
    optimums: Sequence[float],
    series: Sequence[tuple[float, float]],
    interval_s: float,
    probe: ProbeRun | None = None,
    probe_path: Sequence[str] = (),
    plan: TopologyPlan | None = None,
) -> list[EventResult]:
    """Each event with the probe's losses and training's recovery until the next event.

    ``origin`` is the unix time the phase's clock starts at (the series'
    times count from it); ``executed`` is when each event was carried out on
    that clock (a little after its ``at``): windows and recovery start there.
    """
    ends = [*executed[1:], phase_s]
    windows = probe_windows(probe, [origin + at for at in executed]) if probe else []
    results = []
    for index, (event, done, end, optimum) in enumerate(
        zip(events, executed, ends, optimums, strict=True)
    ):
        window = windows[index] if windows else None
        results.append(
            EventResult(
                at_s=event.at,
                executed_s=round(done, 3),
                link=event.link,
                state=str(event.state),
                probe_crossed=(
                    None if probe is None or plan is None else crosses(probe_path, plan, event.link)
                ),
                probe_lost=window.lost if window else None,
                probe_loss_ms=window.loss_ms if window else None,
                probe_longest_gap_ms=window.longest_gap_ms if window else None,
                optimum_bps=round(optimum, 1),
                recovery_s=recovery_time(series, interval_s, done, end, RECOVERED * optimum),
            )
        )
    return results
