"""Headline figures of several runs of one scenario, side by side, and their medians.

One run's inference p99 is the tenth slowest of about 960 requests in a 20 s
window, so on a shared machine it is decided by whether one cluster of
stalled requests fell in that window (docs/jobs.md, "What decides the
inference p99: stalls, not the steady load").  A median over runs, each run's
p99 read against its own run's control, is not moved by one run's cluster;
the per-run figures stay next to it so the outlier is still seen.

Pure: reports in, a frozen result out (the tables are in ``across_runs_table``).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from flowlane_bench.suite.report import CONTROL, IDLE, Headline, Report, meets

FLOWLANE = "flowlane"


class AcrossRunsError(ValueError):
    """The reports cannot be compared; the message names the file at fault."""


@dataclass(frozen=True)
class Run:
    """One report and where it came from (the errors and the tables name runs by it)."""

    source: str
    report: Report


@dataclass(frozen=True)
class ModeAcrossRuns:
    """One mode's figures, one per run in the order the runs were given, and their medians."""

    mode: str
    p99: tuple[float, ...]
    """Inference p99 over the reference phase of the same run (``AcrossRuns.reference``)."""
    p99_median: float
    p99_met: int
    """Runs whose p99 ratio met flowlane's target (how often, not just the median)."""
    allreduce_p50_ms: tuple[float | None, ...] = ()
    """Slowest all-reduce's median iteration per run (empty: no all-reduce in the scenario;
    None: a report written before the p50 was kept)."""
    allreduce_p50_median: float | None = None
    flowlane_saving: tuple[float | None, ...] = ()
    """Per run, 1 - flowlane's slowest ring p50 / this mode's: the fraction of iteration time
    flowlane saves (positive: flowlane faster).  Empty for flowlane itself."""
    flowlane_saving_median: float | None = None


@dataclass(frozen=True)
class AcrossRuns:
    """Every mode that all the runs have, compared; the ones some runs lack, named."""

    scenario: str
    sources: tuple[str, ...]
    durations_s: tuple[float, ...]
    """Each run's measured seconds per phase: runs of unequal windows are shown as such."""
    reference: str
    """``control`` when every run has a control phase, else ``idle`` for every run: a median
    of ratios against different references (and targets) would mean nothing."""
    modes: tuple[ModeAcrossRuns, ...]
    skipped: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """(mode, the sources that lack it) for modes not in every run."""
    allreduce: bool = False

    @property
    def figure(self) -> str:
        """The headline figure the p99 ratios are (a key of ``TARGETS``)."""
        return f"p99_over_{self.reference}"

    @property
    def runs(self) -> int:
        return len(self.sources)


def _median(values: Sequence[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def _saving(flowlane: float | None, mode: float | None) -> float | None:
    if flowlane is None or not mode:
        return None
    return 1 - flowlane / mode


def _check_scenario(runs: Sequence[Run]) -> None:
    first = runs[0]
    for run in runs[1:]:
        if run.report.scenario != first.report.scenario:
            raise AcrossRunsError(
                f"{run.source} is a run of scenario '{run.report.scenario}', {first.source}"
                f" of '{first.report.scenario}': only runs of one scenario are compared"
            )


def _common_modes(runs: Sequence[Run]) -> tuple[list[str], tuple[tuple[str, tuple[str, ...]], ...]]:
    """Modes with a headline row in every run (first run's order first), and the others."""
    order: list[str] = []
    for run in runs:
        order += [row.mode for row in run.report.headline if row.mode not in order]
    present = [{row.mode for row in run.report.headline} for run in runs]
    common = [mode for mode in order if all(mode in modes for modes in present)]
    skipped = tuple(
        (
            mode,
            tuple(
                run.source for run, modes in zip(runs, present, strict=True) if mode not in modes
            ),
        )
        for mode in order
        if mode not in common
    )
    return common, skipped


def compare_runs(runs: Sequence[Run]) -> AcrossRuns:
    """Per mode: each run's p99 ratio, their median and how many met the target; with
    all-reduce, each run's slowest ring p50 and, against flowlane, the time it saves.

    Every figure is taken within its own run first (against that run's control, that run's
    flowlane) and only then the median across runs, so the machine's state in one run is
    never set against another run's.
    """
    if len(runs) < 2:
        raise AcrossRunsError(f"comparing runs needs at least two reports, got {len(runs)}")
    _check_scenario(runs)
    modes, skipped = _common_modes(runs)
    if not modes:
        raise AcrossRunsError(
            "no mode is in every report: "
            + ", ".join(f"{m} missing from {', '.join(s)}" for m, s in skipped)
        )
    rows = [{row.mode: row for row in run.report.headline} for run in runs]
    reference = (
        CONTROL
        if all(row[mode].p99_over_control is not None for row in rows for mode in modes)
        else IDLE
    )
    allreduce = any(row[mode].allreduce_p50_ms is not None for row in rows for mode in modes)

    def p99(row: Headline) -> float:
        value = row.p99_over_control if reference == CONTROL else row.p99_over_idle
        assert value is not None  # reference is control only when every run has it
        return value

    figure = f"p99_over_{reference}"
    compared = []
    for mode in modes:
        ratios = tuple(p99(row[mode]) for row in rows)
        ring: tuple[float | None, ...] = ()
        saving: tuple[float | None, ...] = ()
        if allreduce:
            ring = tuple(row[mode].allreduce_p50_ms for row in rows)
            if mode != FLOWLANE and FLOWLANE in modes:
                saving = tuple(
                    _saving(row[FLOWLANE].allreduce_p50_ms, row[mode].allreduce_p50_ms)
                    for row in rows
                )
        compared.append(
            ModeAcrossRuns(
                mode=mode,
                p99=ratios,
                p99_median=statistics.median(ratios),
                p99_met=sum(meets(figure, value) is True for value in ratios),
                allreduce_p50_ms=ring,
                allreduce_p50_median=_median(ring),
                flowlane_saving=saving,
                flowlane_saving_median=_median(saving),
            )
        )
    return AcrossRuns(
        scenario=runs[0].report.scenario,
        sources=tuple(run.source for run in runs),
        durations_s=tuple(run.report.duration_s for run in runs),
        reference=reference,
        modes=tuple(compared),
        skipped=skipped,
        allreduce=allreduce,
    )
