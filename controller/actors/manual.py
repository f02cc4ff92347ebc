"""``ManualRuntime``: the runtime's API with no threads, for deterministic tests.

Nothing happens until the test says so:

* ``run_until_idle()`` delivers every told event, one at a time in the global
  order told (so per actor in the order told), and fires the timers due at
  the current fake time, until nothing is left; it raises ``LivelockError``
  past ``max_events`` (actors telling each other forever).
* ``advance(seconds)`` moves the fake clock to each due timer in turn (ties in
  the order scheduled), fires it and runs until idle after each.
* ``blocking`` work is queued, never run on its own: ``complete_blocking(n,
  key)`` runs the oldest items (of one key, if given) inline, calls their
  ``done`` and then runs until idle.  A test can so hold one switch's QoS
  answer back while it interleaves other events.

Single-threaded: call it from the test's thread only.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from controller.actors.pool import job
from controller.actors.runtime import Actor, ActorStats, Cancel, Ref, RuntimeStats

LOG = logging.getLogger("flowlane.actors")

E = TypeVar("E")
T = TypeVar("T")


class LivelockError(RuntimeError):
    """``run_until_idle``/``advance`` delivered more than ``max_events`` without settling."""


@dataclass(frozen=True)
class PendingTimer:
    due: float
    actor: str
    event: object


@dataclass(frozen=True)
class Failure:
    """A ``receive`` (or a blocking ``done``) that raised; ``actor`` is None for ``done``."""

    actor: str | None
    event: object
    error: Exception


@dataclass(eq=False)
class _Timer:
    due: float
    mailbox: _ManualMailbox[Any]
    event: object
    cancelled: bool = False


@dataclass(eq=False)
class _Work:
    key: str | None
    run: Callable[[], None]


class _Budget:
    """Counts deliveries of one call and names the busiest actors when it runs out."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.spent = 0
        self.by_actor: Counter[str] = Counter()

    def spend(self, actor: str) -> None:
        self.spent += 1
        self.by_actor[actor] += 1
        if self.spent > self.limit:
            busiest = ", ".join(f"{name} ({n})" for name, n in self.by_actor.most_common(3))
            raise LivelockError(f"no idle after {self.limit} events; busiest: {busiest}")


class _ManualMailbox(Generic[E]):
    def __init__(self, runtime: ManualRuntime, name: str, actor: Actor[E]) -> None:
        self.name = name
        self._runtime = runtime
        self._actor = actor
        self.stopped = False
        self.depth = 0
        self.handled = 0
        self.failed = 0

    def tell(self, event: E) -> None:
        if self.stopped:
            return
        self.depth += 1
        self._runtime._queue.append((self, event))

    def tell_after(self, delay_s: float, event: E) -> Cancel:
        if self.stopped:
            return _never
        return self._runtime._schedule(self, delay_s, event)

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.depth = 0
            self._runtime._forget(self)

    def deliver(self, event: E) -> None:
        self.depth -= 1
        self.handled += 1
        try:
            self._actor.receive(event)
        except Exception as exc:
            self.failed += 1
            self._runtime._failed(Failure(self.name, event, exc))


def _never() -> None:
    """The cancel of a timer never scheduled (its actor had stopped)."""


class ManualRuntime:
    """Same public API as ``Runtime`` plus the controls above; no threads."""

    def __init__(self, clock_start: float = 0.0, *, raise_errors: bool = False) -> None:
        """``raise_errors``: a failing ``receive`` or ``done`` propagates out of the call that
        ran it (after being recorded) instead of only being logged, as ``Runtime`` does."""
        self._now = clock_start
        self._raise = raise_errors
        self._actors: dict[str, _ManualMailbox[Any]] = {}
        self._queue: deque[tuple[_ManualMailbox[Any], Any]] = deque()
        self._heap: list[tuple[float, int, _Timer]] = []
        self._seq = itertools.count()
        self._work: deque[_Work] = deque()
        self._running = False
        self._stopped = False
        self.failures: list[Failure] = []
        """Every failed ``receive``/``done`` so far, oldest first."""

    # ---- the Runtime API ----------------------------------------------------

    def spawn(self, name: str, actor: Actor[E]) -> Ref[E]:
        """As ``Runtime.spawn``: a live actor's name may not be reused; born stopped after stop."""
        if name in self._actors:
            raise ValueError(f"an actor named {name} is already running")
        mailbox: _ManualMailbox[E] = _ManualMailbox(self, name, actor)
        if self._stopped:
            mailbox.stopped = True
        else:
            self._actors[name] = mailbox
        return Ref(name, mailbox)

    def blocking(
        self,
        work: Callable[[], T],
        done: Callable[[T | BaseException], None],
        key: str | None = None,
    ) -> None:
        """Queue ``work``; it runs (with its ``done``) only in ``complete_blocking``."""
        if self._stopped:
            return

        def failed(result: object, error: Exception) -> None:
            self._failed(Failure(None, result, error))

        self._work.append(_Work(key, job(work, done, failed)))

    def stop(self, timeout_s: float = 1.0) -> None:
        """Stop every actor; drop queued events, timers and blocking work."""
        self._stopped = True
        for mailbox in list(self._actors.values()):
            mailbox.stop()
        self._queue.clear()
        self._heap.clear()
        self._work.clear()

    def thread_count(self) -> int:
        return 0

    def stats(self) -> RuntimeStats:
        return RuntimeStats(
            actors=tuple(
                ActorStats(m.name, m.depth, m.handled, m.failed)
                for m in sorted(self._actors.values(), key=lambda m: m.name)
            ),
            timers=len(self.timers()),
            blocking=len(self._work),
        )

    # ---- test controls --------------------------------------------------------

    def now(self) -> float:
        """The fake monotonic clock (what ``tell_after`` delays are counted from)."""
        return self._now

    def run_until_idle(self, max_events: int = 100_000) -> int:
        """Deliver events and fire timers due now until none is left; the number delivered."""
        self._enter()
        try:
            budget = _Budget(max_events)
            self._drain(budget)
            return budget.spent
        finally:
            self._running = False

    def advance(self, seconds: float, max_events: int = 100_000) -> int:
        """Move the clock by ``seconds``, through every timer due on the way, in time order.

        Runs until idle first (at the current time), then after each timer.
        Returns the events delivered, timers fired included.
        """
        if not seconds >= 0:
            raise ValueError(f"the clock only goes forward, not by {seconds}")
        self._enter()
        try:
            target = self._now + seconds
            budget = _Budget(max_events)
            self._drain(budget)
            while (timer := self._peek()) is not None and timer.due <= target:
                self._now = max(self._now, timer.due)
                self._drain(budget)
            self._now = target
            return budget.spent
        finally:
            self._running = False

    def timers(self) -> tuple[PendingTimer, ...]:
        """Pending timers (neither fired, cancelled nor of a stopped actor), soonest first."""
        return tuple(
            PendingTimer(timer.due, timer.mailbox.name, timer.event)
            for _, _, timer in sorted(self._heap)
            if not timer.cancelled and not timer.mailbox.stopped
        )

    def pending_blocking(self, key: str | None = None) -> int:
        """Blocking items queued (of ``key`` only, if given)."""
        return sum(1 for w in self._work if key is None or w.key == key)

    def complete_blocking(self, n: int | None = None, key: str | None = None) -> int:
        """Run the ``n`` oldest queued items (all queued now if None; of ``key`` only, if given)
        inline with their ``done``, then run until idle; the number of items run.

        Items queued meanwhile (by ``done`` or by actors) wait for the next call.
        """
        chosen = [w for w in self._work if key is None or w.key == key]
        if n is not None:
            if n > len(chosen):
                raise ValueError(f"{n} blocking item(s) asked for, {len(chosen)} queued")
            chosen = chosen[:n]
        self._enter()
        try:
            for work in chosen:
                self._work.remove(work)
                work.run()
        finally:
            self._running = False
        self.run_until_idle()
        return len(chosen)

    def settle(self, max_rounds: int = 1000) -> None:
        """Run until idle and complete blocking work, over and over, until neither is left."""
        for _ in range(max_rounds):
            self.run_until_idle()
            if not self._work:
                return
            self.complete_blocking()
        raise LivelockError(f"blocking work still queued after {max_rounds} rounds")

    # ---- internals ------------------------------------------------------------

    def _enter(self) -> None:
        if self._running:
            raise RuntimeError("ManualRuntime is not reentrant: called from inside a delivery")
        self._running = True

    def _drain(self, budget: _Budget) -> None:
        while True:
            if self._queue:
                mailbox, event = self._queue.popleft()
                if mailbox.stopped:
                    continue
                budget.spend(mailbox.name)
                mailbox.deliver(event)
                continue
            timer = self._peek()
            if timer is None or timer.due > self._now:
                return
            heapq.heappop(self._heap)
            budget.spend(timer.mailbox.name)
            timer.mailbox.tell(timer.event)

    def _peek(self) -> _Timer | None:
        """The earliest live timer (dead ones are dropped on the way)."""
        while self._heap:
            timer = self._heap[0][2]
            if not timer.cancelled and not timer.mailbox.stopped:
                return timer
            heapq.heappop(self._heap)
        return None

    def _schedule(self, mailbox: _ManualMailbox[Any], delay_s: float, event: object) -> Cancel:
        timer = _Timer(self._now + max(0.0, delay_s), mailbox, event)
        heapq.heappush(self._heap, (timer.due, next(self._seq), timer))

        def cancel() -> None:
            timer.cancelled = True

        return cancel

    def _forget(self, mailbox: _ManualMailbox[Any]) -> None:
        if self._actors.get(mailbox.name) is mailbox:
            del self._actors[mailbox.name]

    def _failed(self, failure: Failure) -> None:
        self.failures.append(failure)
        if failure.actor is None:
            LOG.error("blocking work: done callback failed", exc_info=failure.error)
        else:
            LOG.error(
                "actor %s: receive failed on %s",
                failure.actor,
                type(failure.event).__name__,
                exc_info=failure.error,
            )
        if self._raise:
            raise failure.error
