"""Where a job's elephants run: together, so that the job's slowest flow is as fast as it can be.

A training job finishes an all-reduce step when its last flow does, so what
matters to it is the most loaded link any of its flows crosses, not each
flow's own link (Meta's RoCE fabric, SIGCOMM'24: ECMP collisions between a
job's flows slow the whole collective).  Placing flows one by one, each on
the path with the most headroom for itself, spreads a job over links it
did not need while another job with no slack is left the hot ones.

The objective (``job_score``): the jobs' worst links, each job's most loaded
link once every flow is placed, sorted worst first and compared as lists
(min-max across jobs, then the next worst job, ...).  Two greedy
placements are tried and the better by that objective kept (the first on
a tie):

* **by job** (``_by_job``): jobs in order of demand (the biggest first,
  then by name), each job's flows biggest demand first (then by flow id),
  each flow on the path that leaves the jobs best off, judged in this order:

  1. the jobs' worst links: for every job crossing a link of any candidate
     (and the flow's own job), the utilisation of its most loaded link once
     the flow is on the path; the lists sorted worst first are compared, so
     the flow neither raises its own job's worst link nor another job's
     where a path exists that does not (min-max across jobs);
  2. fewest links the job does not cross yet: while its worst link is not
     raised, a job stays on the links it already loads, leaving the others
     to other jobs (this keeps a job with a hot link somewhere from
     spreading over the cool links another job needs);
  3. the path's own most loaded link after the flow, then fewest flows on
     its most crowded link, then the candidates' order (deterministic).

* **most constrained first** (``_most_constrained``): every waiting flow of
  every job in one queue, the biggest demand first and, among the same
  demand, the flow that loses most if it misses its best path, each on
  its least loaded path (the order flow-level placement uses).

Why two: the greedy by job places a whole job before it looks at the next
one, so it cannot see that its choice between two equally good spines
shuts another job's only collision-free path.  On a leaf-spine of four
leaves and two spines, of 9030 layouts of two rings of four workers (at
most three workers a leaf), it left both rings sharing a link, at half
their rate, in 672 where placing flow by flow gave every hop links of its
own (ring ``a`` on leaves 1, 1, 2, 2 and ``b`` on 1, 3, 2, 3, for one); with
both placements tried, none.  The queue that takes the most constrained
flow next resolves such chains as they form (an edge-colouring heuristic)
but knows nothing of jobs; the greedy by job keeps a job off another job's
hot link where the queue would spread it (the tests show both).  Kept:
whichever leaves the jobs' worst links lower.

Utilisations are rounded (``_DIGITS``) so measurement noise never breaks a
tie that is one.  Nothing here reads a clock or keeps state: the caller's
ledger holds the loads and takes the reservations of the placement kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from controller.fabric.model import Path
from controller.flowid import FlowId

_DIGITS = 3
"""Utilisations are compared to a tenth of a percent of a link: finer differences are
measurement noise (port counters, a trickle of ACKs), and must not decide between paths."""

_SAME_DEMAND = 0.05
"""Demands within 5 % of each other are estimates of the same share (as in ``placement``)."""


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

    def release(self, path: Path, demand_bps: float) -> None:
        """Undo one ``reserve`` (a placement tried and not kept)."""
        ...


def place_jobs(
    ledger: LinkLedger,
    jobs: Mapping[FlowId, str],
    demand: Mapping[FlowId, float],
    choices: Mapping[FlowId, Sequence[Path]],
    crossed: Mapping[str, Iterable[int]] | None = None,
) -> dict[FlowId, Path]:
    """A path for every flow of ``jobs`` (flow -> job name), reserved on ``ledger``.

    ``crossed``: the links each job's flows already hold (pins kept), which
    count towards its worst link.  Every flow needs at least one candidate.
    """
    held: dict[str, frozenset[int]] = {
        job: frozenset(links) for job, links in (crossed or {}).items()
    }
    best: tuple[list[float], dict[FlowId, Path]] | None = None
    for greedy in (_by_job, _most_constrained):
        placed = greedy(ledger, jobs, demand, choices, held)
        score = job_score(ledger, jobs, placed, held)
        for flow, path in placed.items():
            ledger.release(path, demand[flow])
        if best is None or score < best[0]:
            best = (score, placed)
    assert best is not None
    for flow, path in best[1].items():
        ledger.reserve(path, demand[flow])
    return best[1]


def job_score(
    ledger: LinkLedger,
    jobs: Mapping[FlowId, str],
    placed: Mapping[FlowId, Path],
    held: Mapping[str, Iterable[int]] | None = None,
) -> list[float]:
    """Every job's most loaded link, worst first: the objective (``placed`` as reserved now,
    ``held`` the links each job's other flows hold)."""
    crossing: dict[str, set[int]] = {job: set(links) for job, links in (held or {}).items()}
    for flow, path in placed.items():
        crossing.setdefault(jobs[flow], set()).update(ledger.path_links(path))
    worst = [
        max((round(ledger.utilisation(i), _DIGITS) for i in links), default=0.0)
        for links in crossing.values()
    ]
    return sorted(worst, reverse=True)


def _by_job(
    ledger: LinkLedger,
    jobs: Mapping[FlowId, str],
    demand: Mapping[FlowId, float],
    choices: Mapping[FlowId, Sequence[Path]],
    held: Mapping[str, frozenset[int]],
) -> dict[FlowId, Path]:
    """The greedy by job (the module's first placement), reserved on ``ledger`` as placed."""
    crossing: dict[str, set[int]] = {job: set(links) for job, links in held.items()}
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


def _most_constrained(
    ledger: LinkLedger,
    jobs: Mapping[FlowId, str],
    demand: Mapping[FlowId, float],
    choices: Mapping[FlowId, Sequence[Path]],
    held: Mapping[str, frozenset[int]],
) -> dict[FlowId, Path]:
    """Most constrained flow first (the module's second placement), reserved as placed.

    Among flows whose demands are the same share of the biggest waiting one,
    the next is the one whose best path is furthest below its second best
    (its regret); each goes on its least loaded path (ties: fewest flows on
    its most crowded link, then the candidates' order).  Regrets are judged
    against what is reserved now, so placing a flow raises the urgency of
    those that shared its links, and chains of constrained flows are
    resolved while they still can be.
    """
    pending = sorted(jobs, key=lambda f: (-demand[f], f))
    placed: dict[FlowId, Path] = {}
    while pending:
        floor = demand[pending[0]] * (1.0 - _SAME_DEMAND)
        chosen: tuple[float, int] | None = None
        for position, flow in enumerate(pending):
            if demand[flow] < floor:
                break
            regret = _regret(ledger, demand[flow], choices[flow])
            if chosen is None or regret > chosen[0]:  # ties: the earlier, lower flow
                chosen = (regret, position)
        assert chosen is not None
        flow = pending.pop(chosen[1])
        path = _ranked(ledger, demand[flow], choices[flow])[0]
        ledger.reserve(path, demand[flow])
        placed[flow] = path
    return placed


def _ranked(ledger: LinkLedger, demand_bps: float, paths: Sequence[Path]) -> list[Path]:
    """Paths best first: lowest most loaded link with the flow on it, fewest flows on the
    most crowded link, then the candidates' order."""
    keyed = sorted(
        (_worst_after(ledger, demand_bps, path), ledger.crowd(path), number)
        for number, path in enumerate(paths)
    )
    return [paths[number] for *_, number in keyed]


def _regret(ledger: LinkLedger, demand_bps: float, paths: Sequence[Path]) -> float:
    """How much higher the flow's most loaded link is on its second best path than its best."""
    if len(paths) < 2:
        return 0.0
    first, second = _ranked(ledger, demand_bps, paths)[:2]
    return _worst_after(ledger, demand_bps, second) - _worst_after(ledger, demand_bps, first)


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
