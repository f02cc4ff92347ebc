"""Where a job's elephants run: together, so that the job's slowest flow is as fast as it can be.

A training job finishes an all-reduce step when its last flow does, so what
matters to it is the most loaded link any of its flows crosses, not each
flow's own link (Meta's RoCE fabric, SIGCOMM'24: ECMP collisions between a
job's flows slow the whole collective).  Placing flows one by one, each on
the path with the most headroom for itself, spreads a job over links it
did not need while another job with no slack is left the hot ones.

This is the greedy by job: jobs in order of demand (the biggest first, then
by name), each job's flows biggest demand first (then by flow id), each
flow on the path that leaves the jobs best off, judged in this order:

1. the jobs' worst links: for every job crossing a link of any candidate
   (and the flow's own job), the utilisation of its most loaded link once
   the flow is on the path; the lists sorted worst first are compared, so
   the flow neither raises its own job's worst link nor another job's where
   a path exists that does not (min-max across jobs);
2. fewest links the job does not cross yet: while its worst link is not
   raised, a job stays on the links it already loads, leaving the others to
   other jobs (this is what keeps a job with a hot link somewhere from
   spreading over the cool links another job needs);
3. the path's own most loaded link after the flow, then fewest flows on its
   most crowded link, then the candidates' order (deterministic).

Utilisations are rounded (``_DIGITS``) so measurement noise never breaks a
tie that is one.  Nothing here reads a clock or keeps state: the caller's ledger
holds the loads and takes the reservations as flows are placed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from controller.fabric.model import Path
from controller.flowid import FlowId

_DIGITS = 3
"""Utilisations are compared to a tenth of a percent of a link: finer differences are
measurement noise (port counters, a trickle of ACKs), and must not decide between paths."""


class LinkLedger(Protocol):
    """What placement's ledger offers: numbered links, their loads, and reservations."""

    def path_links(self, path: Path) -> tuple[int, ...]: ...

    def utilisation(self, index: int, extra_bps: float = 0.0) -> float:
        """(background + reserved + ``extra_bps``) / capacity of one numbered link."""
        ...

    def crowd(self, path: Path) -> int:
        """Flows reserved on the path's most crowded link."""
        ...

    def reserve(self, path: Path, demand_bps: float) -> None: ...


def place_jobs(
    ledger: LinkLedger,
    jobs: Mapping[FlowId, str],
    demand: Mapping[FlowId, float],
    choices: Mapping[FlowId, Sequence[Path]],
    crossed: Mapping[str, Iterable[int]] | None = None,
) -> dict[FlowId, Path]:
    """A path for every flow of ``jobs`` (flow -> job name), reserved on ``ledger`` as placed.

    ``crossed``: the links each job's flows already hold (pins kept), which
    count towards its worst link.  Every flow needs at least one candidate.
    """
    crossing: dict[str, set[int]] = {job: set(links) for job, links in (crossed or {}).items()}
    users: dict[int, set[str]] = {}
    for job, links in crossing.items():
        for index in links:
            users.setdefault(index, set()).add(job)
    members: dict[str, list[FlowId]] = {}
    for flow, job in jobs.items():
        members.setdefault(job, []).append(flow)
    order = sorted(members, key=lambda job: (-sum(demand[f] for f in members[job]), job))

    placed: dict[FlowId, Path] = {}
    for job in order:
        floor = max(_least_worst(ledger, demand[f], choices[f]) for f in members[job])
        for flow in sorted(members[job], key=lambda f: (-demand[f], f)):
            path = _best(ledger, job, floor, demand[flow], choices[flow], crossing, users)
            ledger.reserve(path, demand[flow])
            for index in ledger.path_links(path):
                crossing.setdefault(job, set()).add(index)
                users.setdefault(index, set()).add(job)
            placed[flow] = path
    return placed


def _least_worst(ledger: LinkLedger, demand_bps: float, paths: Sequence[Path]) -> float:
    """The lowest most-loaded link the flow can have, on its best candidate."""
    return min(_worst_after(ledger, demand_bps, path) for path in paths)


def _worst_after(ledger: LinkLedger, demand_bps: float, path: Path) -> float:
    """The path's most loaded link once the flow is on it (rounded, see ``_DIGITS``)."""
    return max(
        (round(ledger.utilisation(i, demand_bps), _DIGITS) for i in ledger.path_links(path)),
        default=0.0,
    )


def _best(
    ledger: LinkLedger,
    job: str,
    floor: float,
    demand_bps: float,
    paths: Sequence[Path],
    crossing: Mapping[str, set[int]],
    users: Mapping[int, set[str]],
) -> Path:
    """The candidate that leaves the jobs best off (the module's order of criteria).

    ``floor``: the job's worst link cannot be lower than its most constrained flow's best
    path (computed before its first flow is placed), so a flow placed before that one
    counts as no worse for the job on links loaded up to there: the job stays compact
    instead of spreading over links other jobs need.
    """
    affected = {job} | {
        other
        for path in paths
        for index in ledger.path_links(path)
        for other in users.get(index, ())
    }
    own = crossing.get(job, set())
    ranked: list[tuple[list[float], int, float, int, int]] = []
    for number, path in enumerate(paths):
        links = set(ledger.path_links(path))
        worst: list[float] = []
        for other in sorted(affected):
            on = own | links if other == job else crossing.get(other, set())
            loads = (
                round(ledger.utilisation(i, demand_bps if i in links else 0.0), _DIGITS) for i in on
            )
            worst.append(max(loads, default=floor if other == job else 0.0))
        if job in affected:
            index = sorted(affected).index(job)
            worst[index] = max(worst[index], floor)
        worst.sort(reverse=True)
        here = _worst_after(ledger, demand_bps, path)
        ranked.append((worst, len(links - own), here, ledger.crowd(path), number))
    return paths[min(ranked)[-1]]
