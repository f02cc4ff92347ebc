"""One timer thread for every actor: a heap of due times under a condition.

A timer is an entry in a heap, not a thread, so ten thousand pending timers
(audits, request deadlines, retries of every switch) cost memory only.  The
thread sleeps until the earliest due time or until a new earlier timer
arrives; a cancelled timer stays in the heap, marked, until it comes up or
until cancelled entries outnumber live ones and the heap is rebuilt.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

LOG = logging.getLogger("flowlane.actors")

_COMPACT_MIN = 1024
"""Rebuild the heap only once this many cancelled entries sit in it (and they are the majority)."""


class TimerHandle:
    """One scheduled call; ``cancel`` is idempotent and a no-op once it fired."""

    __slots__ = ("_done", "_owner", "due", "fire")

    def __init__(self, owner: Timers, due: float, fire: Callable[[], None]) -> None:
        self._owner = owner
        self._done = False
        """Fired or cancelled: guarded by the owner's condition."""
        self.due = due
        self.fire = fire

    def cancel(self) -> None:
        self._owner._cancel(self)


class Timers:
    """Calls ``fire`` callbacks at their due time on one daemon thread.

    Callbacks run on the timer thread and must not block (they ``tell``): a
    slow callback delays every later timer.  An exception in one is logged.
    """

    def __init__(self, name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, TimerHandle]] = []
        self._seq = itertools.count()
        """Ties on the due time fire in the order scheduled."""
        self._cancelled = 0
        self._stopping = False
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def schedule(self, delay_s: float, fire: Callable[[], None]) -> TimerHandle | None:
        """Call ``fire`` after ``delay_s`` (negative or NaN: at once); None once stopped."""
        delay = max(0.0, delay_s)  # NaN compares false: max keeps 0.0
        with self._cond:
            if self._stopping:
                return None
            handle = TimerHandle(self, self._clock() + delay, fire)
            heapq.heappush(self._heap, (handle.due, next(self._seq), handle))
            if self._heap[0][2] is handle:
                # Only a new earliest timer changes how long the thread should sleep.
                self._cond.notify()
            return handle

    def pending(self) -> int:
        """Timers scheduled and neither fired nor cancelled."""
        with self._cond:
            return len(self._heap) - self._cancelled

    def stop(self) -> None:
        """Drop every pending timer and wake the thread so it exits (join ``thread`` after)."""
        with self._cond:
            self._stopping = True
            for _, _, handle in self._heap:
                handle._done = True
            self._heap.clear()
            self._cancelled = 0
            self._cond.notify_all()

    def _cancel(self, handle: TimerHandle) -> None:
        with self._cond:
            if handle._done:
                return
            handle._done = True
            self._cancelled += 1
            if self._cancelled >= _COMPACT_MIN and self._cancelled * 2 > len(self._heap):
                self._heap = [entry for entry in self._heap if not entry[2]._done]
                heapq.heapify(self._heap)
                self._cancelled = 0

    def _run(self) -> None:
        while True:
            with self._cond:
                handle = self._next_due()
                if handle is None:
                    return
            try:
                handle.fire()
            except Exception:
                LOG.exception("timer callback failed")

    def _next_due(self) -> TimerHandle | None:
        """Wait (condition held) for the earliest live timer to come due; None when stopping."""
        while not self._stopping:
            if not self._heap:
                self._cond.wait()
                continue
            due, _, handle = self._heap[0]
            if handle._done:
                heapq.heappop(self._heap)
                self._cancelled -= 1
                continue
            delay = due - self._clock()
            if delay > 0:
                self._cond.wait(delay)
                continue
            heapq.heappop(self._heap)
            handle._done = True
            return handle
        return None
