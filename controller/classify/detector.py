"""The elephant detector: counting-table polls in, overrides to install and remove out.

Every flow no rule claims starts in the default (latency) class.  Each poll,
the detector compares each learned entry's byte counter with the previous
poll.  A window in which a flow sent at ``rate`` or more is *bulk*; a flow is
demoted to the elephant class once its bulk windows have run unbroken for
``for``, or have carried ``bytes`` (a fast flow need not wait out ``for``).
A window below the rate ends the run and its bytes stop counting: a
keep-alive connection that carries requests at a small share of the port
never starts a run, so it is never demoted however many bytes it sends over
hours, while a bulk transfer is caught within ``for`` plus one interval.

A window runs from one growth of the counter to the next, not from one poll
to the next: Open vSwitch refreshes its flow counters only when it
revalidates its datapath flows (``other_config:max-revalidator``, every
500 ms by default), so a poll every 100 ms sees a steady 60 Mbit/s flow
stand still four times and then jump by half a second's bytes. Judged poll
by poll, such a flow never kept up any rate for two windows running and was
never demoted; judged from growth to growth, it is what it is, and the
unchanged polls between two growths neither break its run nor count.

An override is released when its flow has been idle for ``release_after``, or
has stayed below ``release_ratio`` of the rate that long (it turned sparse).

Hysteresis, so that a flow near the threshold does not flap between queues:

- demotion needs the rate held for ``for`` (one bulk window is not enough by
  default), and a dip below the rate starts the run over;
- release needs the flow below ``release_ratio`` of the rate, not below the
  rate, for the whole of ``release_after``.

Pure and deterministic: the caller passes the time (a monotonic clock) with
each poll, and the same polls always give the same decisions.  Memory is
bounded by ``max_tracked``; flows past it are counted, heaviest kept first.

The per-flow loop is the controller's hot path (100 000 entries every
interval), so it is written for CPython: one dict lookup per sample, state
updated in place in slotted objects, one integer comparison against the
rate threshold precomputed once per poll, and anything rare (a new flow, a
bulk window, an elephant, a re-learned entry) deferred to a second pass.
A run needs no reset when a flow drops below the rate: it only continues if
its last bulk window ended at the previous poll, which is checked when the
next bulk window comes.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from operator import itemgetter

from controller.classify.decisions import (
    Decisions,
    Demotion,
    DemotionReason,
    Release,
    ReleaseReason,
)
from controller.classify.flows import CounterSample, FlowState, FlowView
from controller.classify.thresholds import Thresholds
from controller.flowid import FlowId
from controller.policy.detection import DetectionSpec

REBIRTH_SLACK_S = 0.5
"""An entry whose first packet is dated this much later than before was learned again.

OVS learn timeouts are whole seconds, so a re-learned entry is always dated
at least 1 s later than the one it replaces; half of that absorbs the jitter
between the controller's clock and the switch's ``duration``.
"""

_NEVER = 1 << 62
"""A byte count no window reaches: no flow is bulk before there is a previous poll."""

_UNSAMPLED = -1
"""Byte count of an adopted elephant that no poll has sampled yet."""

_EPSILON = 1e-9
"""Float slack on time comparisons, so 0.5 s polls add up to exactly 1 s."""

_MIN_WINDOW_S = 1e-3
"""Shortest window a rate is computed over; a just-learned entry has an age near 0."""

_BYTES = itemgetter(1)
_RATE_THEN_BYTES = itemgetter(0, 1)


class _Override:
    """Why and since when a flow is an elephant; only elephants carry one."""

    __slots__ = ("calm", "reason", "since")

    def __init__(self, reason: DemotionReason, since: float) -> None:
        self.reason = reason
        self.since = since
        self.calm: float | None = None
        """Start of the run of polls below the release rate (rate elephants)."""


class _Track:
    """Mutable state of one tracked flow, updated in place; an idle flow costs one store a poll."""

    __slots__ = (
        "above",
        "above_at",
        "active",
        "born",
        "bytes",
        "cutoff",
        "delta",
        "override",
        "run_bytes",
        "seen",
        "since",
        "span",
    )

    def __init__(self, octets: int, born: float, active: float, seen: int) -> None:
        self.bytes = octets
        """Counter at the last poll."""
        self.delta = octets
        """Growth in the last window in which it grew (all of it for a new entry)."""
        self.active = active
        """Last poll at which the counter grew (``born`` if it never did)."""
        self.span = born
        """Where the window of ``delta`` starts: the growth before ``active`` (or ``born``)."""
        self.born = born
        """First packet of the counting entry: ``now - age_s`` when first seen."""
        self.cutoff = born
        """``born``, or -inf for an elephant: one comparison sends both out of the fast path."""
        self.since: float | None = born
        """First packet, what a demotion's latency counts from; ``None`` after a release
        (the next demotion counts from the start of its run)."""
        self.seen = seen
        """Number of the last poll that sampled this flow."""
        self.above: float | None = None
        """Start of the run of windows at or above the rate threshold..."""
        self.above_at = -math.inf
        """...which is still running only if the last of them ended at the previous poll."""
        self.run_bytes = 0
        """Bytes sent in the windows of that run: the only bytes ``min_bytes`` counts."""
        self.override: _Override | None = None


class Detector:
    """Elephant detection for one switch's counting table; call ``observe`` once per poll.

    ``port_rate_bps`` resolves a rate threshold given as a share (``10%``).
    """

    def __init__(self, spec: DetectionSpec, port_rate_bps: int) -> None:
        self.thresholds = Thresholds.from_spec(spec, port_rate_bps)
        self._tracks: dict[FlowId, _Track] = {}
        self._overrides = 0
        self._poll = 0
        self._now = -math.inf
        self._previous = -math.inf
        self._dropped_total = 0

    def retune(self, spec: DetectionSpec, port_rate_bps: int) -> None:
        """Judge by a changed detection section from the next poll on, keeping the counters.

        A detector built afresh for the new section met every entry still in
        the counting table as a new flow, and judged its first window as its
        whole life: a bulk flow that had ended seconds before (OVS keeps its
        entry for ``release_after``) still averaged above the rate over its
        life, and the change itself demoted it.  Here each flow keeps its
        counter and its last growth, so it is judged only on what it sends
        after that growth, as at any poll: a flow whose counter does not grow
        is never judged at all.

        Overrides end with the section that made them (the caller drops them
        without announcing releases, as before).  A flow that was an elephant
        keeps its run, so if its next window is bulk by the new rate it is
        demoted again at once, not after another ``for`` in the latency class;
        below the new rate its run ends as any other.  Runs of other flows
        were measured against the old rate and start over.  Poll times must
        still increase across the change: the clock is the caller's.
        """
        self.thresholds = Thresholds.from_spec(spec, port_rate_bps)
        tracks = self._tracks
        for flow, track in list(tracks.items()):
            if track.bytes == _UNSAMPLED:
                del tracks[flow]  # adopted and never sampled: no counter to carry over
                continue
            override = track.override
            track.override = None
            track.cutoff = track.born
            track.run_bytes = 0
            if override is None:
                track.above, track.above_at = None, -math.inf
            else:
                # Bulk since its demotion, as far as anyone knows; the window that starts at
                # its last growth must show it (see _evaluate), and a re-demotion counts its
                # latency from this change, not from the flow's first packet.
                track.above, track.above_at = override.since, track.active
                track.since = self._now
        self._overrides = 0
        excess = len(tracks) - self.thresholds.max_tracked
        if excess > 0:
            self._evict(excess)

    # ----------------------------------------------------------------------------------------
    # One poll
    # ----------------------------------------------------------------------------------------

    def observe(self, samples: Iterable[CounterSample], now: float) -> Decisions:
        """Take one complete read of the counting table at time ``now`` (seconds, monotonic).

        A tracked flow missing from ``samples`` has left the table, so pass
        every entry of the table once, all parts of a multipart reply
        together.  (A table read in shards, say by cookie, needs one detector
        per shard.)  Apply the releases and the demotions it returns; no flow
        is in both.

        Take ``now`` when the request is sent: the switch measures the ages as
        it answers, at once, whereas decoding a large reply takes a varying
        while, and ``now - age_s`` must date a flow's first packet to within
        ``REBIRTH_SLACK_S`` from one poll to the next.
        """
        if self._poll and now <= self._now:
            raise ValueError(f"poll time must increase: got {now} after {self._now}")
        batch = samples if isinstance(samples, Sequence) else list(samples)
        thresholds = self.thresholds
        poll = self._poll + 1
        last = self._now
        rate_delta = _NEVER
        if self._poll:
            # Growth over this window that reaches the rate threshold, as a whole byte count.
            rate_delta = math.ceil(thresholds.rate_bps * (now - last) / 8)
        reborn_before = now - REBIRTH_SLACK_S

        fresh: list[CounterSample] = []
        special: list[tuple[_Track, CounterSample]] = []
        candidates: list[tuple[_Track, FlowId]] = []
        get = self._tracks.get
        # Samples are read by index (flow 0, bytes 1, age_s 3): unpacking a tuple subclass
        # takes CPython's slow path, and this loop runs for every entry of every poll.
        for sample in batch:
            flow = sample[0]
            track = get(flow)
            if track is None:
                fresh.append(sample)
                continue
            track.seen = poll
            octets = sample[1]
            if reborn_before - sample[3] > track.cutoff:  # re-learned, or an elephant
                special.append((track, sample))
            elif octets != track.bytes:
                delta = octets - track.bytes
                if delta < 0:
                    special.append((track, sample))
                    continue
                track.bytes = octets
                track.delta = delta
                # The window runs from the last growth: the switch may not have refreshed
                # the counter at the polls in between (see the module docstring).
                track.span = track.active
                track.active = now
                if delta >= rate_delta:  # no shorter than a poll: a bulk window needs this
                    candidates.append((track, flow))

        demote: list[Demotion] = []
        release: list[Release] = []
        for track, flow in candidates:
            demotion = self._evaluate(track, flow, max(track.span, track.born), now)
            if demotion is not None:
                demote.append(demotion)
        for track, sample in special:
            self._special(track, sample, last, now, demote, release)
        if len(self._tracks) > len(batch) - len(fresh):  # some tracked flow was not sampled
            self._sweep(poll, now, release)
        dropped = self._admit(fresh, poll, now, demote)

        self._poll = poll
        self._previous, self._now = last, now
        self._dropped_total += dropped
        return Decisions(
            demote=tuple(demote),
            release=tuple(release),
            samples=len(batch),
            tracked=len(self._tracks),
            overrides=self._overrides,
            dropped=dropped,
        )

    def _evaluate(
        self, track: _Track, flow: FlowId, window_start: float, now: float
    ) -> Demotion | None:
        """Whether a flow that grew ``delta`` since ``window_start`` is an elephant now.

        A bulk window extends the flow's run if the run's last window ended
        where this one starts, and starts a new run otherwise.
        """
        thresholds = self.thresholds
        window = now - window_start
        if window <= 0 or track.delta * 8 < thresholds.rate_bps * window:
            track.above = None
            return None
        if track.above is None or track.above_at != window_start:
            track.above = window_start  # a new run: the last one did not reach this window
            track.run_bytes = 0
        track.run_bytes += track.delta
        track.above_at = now
        min_bytes = thresholds.min_bytes
        if min_bytes is not None and track.run_bytes >= min_bytes:
            return self._demote(track, flow, DemotionReason.BYTES, window_start, now)
        if now - track.above >= thresholds.sustain_s - _EPSILON:
            return self._demote(track, flow, DemotionReason.RATE, window_start, now)
        return None

    def _demote(
        self,
        track: _Track,
        flow: FlowId,
        reason: DemotionReason,
        window_start: float,
        now: float,
    ) -> Demotion:
        start = track.since if track.since is not None else track.above
        assert start is not None
        track.override = _Override(reason, now)
        track.cutoff = -math.inf
        track.above = None
        self._overrides += 1
        window = max(now - window_start, _MIN_WINDOW_S)
        return Demotion(
            flow=flow,
            reason=reason,
            bytes=track.run_bytes,
            rate_bps=track.delta * 8 / window,
            latency_s=now - start,
        )

    def _release(
        self, track: _Track, flow: FlowId, reason: ReleaseReason, idle: float, now: float
    ) -> Release:
        override = track.override
        assert override is not None
        track.override = None
        track.cutoff = track.born
        track.above = None
        track.since = None
        self._overrides -= 1
        return Release(flow=flow, reason=reason, idle_s=idle, held_s=now - override.since)

    def _restart(self, track: _Track, octets: int, born: float, now: float) -> None:
        """A re-learned entry is a new flow: its history starts again from its counters."""
        track.bytes = track.delta = octets
        track.born = track.cutoff = born
        track.since = born
        track.span = born
        track.active = now if octets else born
        track.above = None

    def _special(
        self,
        track: _Track,
        sample: CounterSample,
        last: float,
        now: float,
        demote: list[Demotion],
        release: list[Release],
    ) -> None:
        """An elephant, or an entry that was re-learned (its counter or its age went back)."""
        flow, octets, _, age = sample
        if track.bytes != _UNSAMPLED and (
            octets < track.bytes or now - REBIRTH_SLACK_S - age > track.born
        ):
            self._relearned(track, flow, octets, now - age, now, demote, release)
        else:
            self._elephant(track, flow, octets, last, now, release)

    def _relearned(
        self,
        track: _Track,
        flow: FlowId,
        octets: int,
        born: float,
        now: float,
        demote: list[Demotion],
        release: list[Release],
    ) -> None:
        """OVS expired the entry and learned it again: the counters start over."""
        override = track.override
        if override is None:
            self._restart(track, octets, born, now)
            demotion = self._evaluate(track, flow, born, now)
            if demotion is not None:
                demote.append(demotion)
            return
        gap = born - track.active
        if gap < self.thresholds.release_after_s - _EPSILON:
            # The same conversation, back before its override ran out: keep it.
            track.bytes = track.delta = octets
            track.born = born
            if octets:
                track.active = now
            override.calm = None
            return
        released = self._release(track, flow, ReleaseReason.IDLE, gap, now)
        self._restart(track, octets, born, now)
        if self._evaluate(track, flow, born, now) is None:
            release.append(released)
        # Otherwise it is an elephant again on its new counters: the override just stays,
        # and the controller never sees one flow both released and demoted in a poll.

    def _elephant(
        self,
        track: _Track,
        flow: FlowId,
        octets: int,
        last: float,
        now: float,
        release: list[Release],
    ) -> None:
        """An override stays until its flow idles or calms down (turns sparse)."""
        thresholds = self.thresholds
        override = track.override
        assert override is not None
        if track.bytes == _UNSAMPLED:  # adopted: this first sample is only a baseline
            track.bytes, track.delta = octets, 0
            track.active = now
            return
        delta = octets - track.bytes
        track.bytes = octets
        track.delta = delta
        if delta:
            track.span = track.active
            track.active = now
        idle = now - track.active
        if idle >= thresholds.release_after_s - _EPSILON:
            release.append(self._release(track, flow, ReleaseReason.IDLE, idle, now))
            return
        if delta * 8 < thresholds.release_ratio * thresholds.rate_bps * (now - last):
            if override.calm is None:
                override.calm = last
            if now - override.calm >= thresholds.release_after_s - _EPSILON:
                release.append(self._release(track, flow, ReleaseReason.CALM, idle, now))
        else:
            override.calm = None

    def _sweep(self, poll: int, now: float, release: list[Release]) -> None:
        """Forget flows that left the table; an override outlives its entry by ``release_after``."""
        tracks = self._tracks
        gone = [(flow, track) for flow, track in tracks.items() if track.seen != poll]
        release_after = self.thresholds.release_after_s - _EPSILON
        for flow, track in gone:
            if track.override is None:
                del tracks[flow]
                continue
            idle = now - track.active
            if idle >= release_after:
                release.append(self._release(track, flow, ReleaseReason.VANISHED, idle, now))
                del tracks[flow]

    def adopt(self, flows: Iterable[FlowId], now: float) -> None:
        """Take over elephants that an earlier controller demoted (read back from the switch).

        Each becomes an override as of ``now``: it is released like any
        other once it idles or calms down for ``release_after``, and it is
        not announced again as a demotion.  Its counters start at the first
        poll that samples it.  Call before the first ``observe``.
        """
        for flow in flows:
            if flow in self._tracks:
                continue
            track = _Track(0, now, now, self._poll)
            track.bytes = _UNSAMPLED  # the first sample sets the baseline (see _elephant)
            track.override = _Override(DemotionReason.RATE, now)
            track.cutoff = -math.inf
            track.since = None
            self._tracks[flow] = track
            self._overrides += 1

    # ----------------------------------------------------------------------------------------
    # New flows and the max_tracked limit
    # ----------------------------------------------------------------------------------------

    def _admit(
        self, fresh: list[CounterSample], poll: int, now: float, demote: list[Demotion]
    ) -> int:
        """Start tracking new flows, within ``max_tracked``; return how many were left out."""
        thresholds = self.thresholds
        tracks = self._tracks
        dropped = 0
        room = thresholds.max_tracked - len(tracks)
        if len(fresh) > room:
            fresh, dropped = self._choose(fresh, room)
        rate = thresholds.rate_bps
        for sample in fresh:
            flow, octets, _, age = sample
            born = now - age
            track = _Track(octets, born, now if octets else born, poll)
            if tracks.setdefault(flow, track) is not track:
                continue  # the same flow twice in one poll
            # Its first window is its whole life: bulk if its average so far reaches the rate.
            if octets and octets * 8 >= rate * age:
                demotion = self._evaluate(track, flow, born, now)
                if demotion is not None:
                    demote.append(demotion)
        return dropped

    def _qualifies(self, sample: CounterSample) -> bool:
        """Whether an untracked flow is an elephant already, judged on its whole life."""
        thresholds = self.thresholds
        _, octets, _, age = sample
        if age <= 0 or octets * 8 < thresholds.rate_bps * age:
            return False
        min_bytes = thresholds.min_bytes
        return age >= thresholds.sustain_s - _EPSILON or (
            min_bytes is not None and octets >= min_bytes
        )

    def _choose(self, fresh: list[CounterSample], room: int) -> tuple[list[CounterSample], int]:
        """Over the limit: keep overrides, then elephants-to-be, then the heaviest flows.

        Flows that qualify as elephants right now may push out the lightest
        tracked flows; the others only fill free room, heaviest first.
        Returns the flows to admit and how many of this poll's flows end up
        untracked (left out or pushed out).
        """
        urgent: list[CounterSample] = []
        others: list[CounterSample] = []
        for sample in fresh:
            (urgent if self._qualifies(sample) else others).append(sample)
        evicted = 0
        if len(urgent) > room:
            evicted = self._evict(len(urgent) - room)
            room += evicted
        urgent.sort(key=_BYTES, reverse=True)
        chosen = urgent[:room]
        if room > len(chosen):
            chosen.extend(heapq.nlargest(room - len(chosen), others, key=_BYTES))
        return chosen, len(fresh) - len(chosen) + evicted

    def _evict(self, count: int) -> int:
        """Drop up to ``count`` of the lightest tracked flows that have no override."""
        tracks = self._tracks
        victims = heapq.nsmallest(
            count,
            ((flow, track) for flow, track in tracks.items() if track.override is None),
            key=lambda item: item[1].bytes,
        )
        for flow, _ in victims:
            del tracks[flow]
        return len(victims)

    # ----------------------------------------------------------------------------------------
    # What the controller publishes
    # ----------------------------------------------------------------------------------------

    @property
    def tracked(self) -> int:
        return len(self._tracks)

    @property
    def dropped_total(self) -> int:
        """Flow-polls left untracked because of ``max_tracked``, since the detector started."""
        return self._dropped_total

    def overrides(self) -> list[FlowId]:
        """Every flow that should hold an override now, to reconcile against a switch."""
        return [flow for flow, track in self._tracks.items() if track.override is not None]

    def flows(self, limit: int | None = None) -> list[FlowView]:
        """Tracked flows, fastest first (then largest); ``limit`` keeps the top ones.

        Views are built only for the flows returned: a flow moved at the last
        poll exactly when its counter grew then, so the fastest ``limit`` are
        found among those few, and idle flows (rate 0) only fill up by size.
        """
        tracks = self._tracks
        if limit is None:
            views = [self._view(flow, track, self._rate(track)) for flow, track in tracks.items()]
            views.sort(key=_view_order, reverse=True)
            return views
        now = self._now
        moving = [
            (
                track.delta * 8 / max(now - max(track.span, track.born), _MIN_WINDOW_S),
                track.bytes,
                flow,
                track,
            )
            for flow, track in tracks.items()
            if track.active == now
        ]
        ranked = heapq.nlargest(limit, moving, key=_RATE_THEN_BYTES)
        if len(ranked) < limit:
            still = ((0.0, t.bytes, f, t) for f, t in tracks.items() if t.active != now)
            ranked += heapq.nlargest(limit - len(ranked), still, key=_RATE_THEN_BYTES)
        return [self._view(flow, track, rate) for rate, _, flow, track in ranked]

    def view(self, flow: FlowId) -> FlowView | None:
        track = self._tracks.get(flow)
        return None if track is None else self._view(flow, track, self._rate(track))

    def _rate(self, track: _Track) -> float:
        """Bit/s over the last window (from the growth before): if it grew at the last poll."""
        if track.active != self._now:
            return 0.0
        window = self._now - max(track.span, track.born)
        return track.delta * 8 / max(window, _MIN_WINDOW_S)

    def _view(self, flow: FlowId, track: _Track, rate: float) -> FlowView:
        return FlowView(
            flow=flow,
            bytes=max(track.bytes, 0),
            rate_bps=rate,
            first_seen=track.born,
            last_seen=track.active,
            state=FlowState.TRACKED if track.override is None else FlowState.ELEPHANT,
        )


def _view_order(view: FlowView) -> tuple[float, int]:
    return (view.rate_bps, view.bytes)
