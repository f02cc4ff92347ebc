"""Actors on a fixed number of threads, whatever the number of switches.

Each actor has a FIFO mailbox.  A mailbox with events that is not being run
sits (once) on one shared ready queue; ``threads`` pool threads take
mailboxes off it and deliver up to ``batch`` events before putting the
mailbox back at the end, so a flooded actor cannot starve the others and no
actor is ever in two threads at once.  Timers are entries on one timer
thread's heap (``timers.py``); blocking calls go to a fixed, per-key
serialised pool (``pool.py``).  ``thread_count()`` is fixed at construction.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from controller.actors.pool import BlockingPool
from controller.actors.timers import TimerHandle, Timers

LOG = logging.getLogger("flowlane.actors")

E = TypeVar("E")
E_contra = TypeVar("E_contra", contravariant=True)
T = TypeVar("T")

Cancel = Callable[[], None]
"""Cancels a timer; idempotent, and a no-op once the timer fired."""


def _never() -> None:
    """The cancel of a timer that was never scheduled (its actor or the runtime had stopped)."""


class Actor(Protocol[E_contra]):
    def receive(self, event: E_contra) -> None:
        """Called for each event in the order told; never two at once for one actor."""


class Mailbox(Protocol[E_contra]):
    """What a ``Ref`` delegates to: each runtime has its own kind of mailbox."""

    def tell(self, event: E_contra) -> None: ...
    def tell_after(self, delay_s: float, event: E_contra) -> Cancel: ...
    def stop(self) -> None: ...


class Ref(Generic[E]):
    """The handle by which anyone (any thread) sends events to one actor."""

    __slots__ = ("_mailbox", "name")

    def __init__(self, name: str, mailbox: Mailbox[E]) -> None:
        self.name = name
        self._mailbox = mailbox

    def tell(self, event: E) -> None:
        """Queue ``event``; never blocks, safe from any thread; dropped once stopped."""
        self._mailbox.tell(event)

    def tell_after(self, delay_s: float, event: E) -> Cancel:
        """Tell ``event`` after ``delay_s`` seconds (a heap entry, not a thread)."""
        return self._mailbox.tell_after(delay_s, event)

    def stop(self) -> None:
        """No event is delivered after the one in progress; pending timers are dropped."""
        self._mailbox.stop()

    def __repr__(self) -> str:
        return f"Ref({self.name!r})"


@dataclass(frozen=True)
class ActorStats:
    name: str
    depth: int
    """Events waiting in the mailbox."""
    handled: int
    """Events delivered (failed ones included)."""
    failed: int
    """Deliveries whose ``receive`` raised."""


@dataclass(frozen=True)
class RuntimeStats:
    actors: tuple[ActorStats, ...]
    """Live (spawned, not stopped) actors, by name."""
    timers: int
    """Timers pending."""
    blocking: int
    """Blocking work items queued or running."""


class ActorSystem(Protocol):
    """What ``Runtime`` and ``ManualRuntime`` both offer: code that spawns actors takes this."""

    def spawn(self, name: str, actor: Actor[E]) -> Ref[E]: ...
    def blocking(
        self,
        work: Callable[[], T],
        done: Callable[[T | BaseException], None],
        key: str | None = None,
    ) -> None: ...
    def stop(self, timeout_s: float = 1.0) -> None: ...
    def thread_count(self) -> int: ...
    def stats(self) -> RuntimeStats: ...
    def now(self) -> float:
        """The monotonic clock timers count from (the fake one under ``ManualRuntime``)."""
        ...


class _Mailbox(Generic[E]):
    """One actor's queue and its scheduling state (all under ``_lock``)."""

    def __init__(self, runtime: Runtime, name: str, actor: Actor[E]) -> None:
        self.name = name
        self._runtime = runtime
        self._actor = actor
        self._lock = threading.Lock()
        self._events: deque[E] = deque()
        self._scheduled = False
        """On the ready queue or being run by a pool thread: then a tell only appends."""
        self.stopped = False
        self._timers: set[TimerHandle] = set()
        self.handled = 0
        self.failed = 0

    def tell(self, event: E) -> None:
        with self._lock:
            if self.stopped:
                return
            self._events.append(event)
            if self._scheduled:
                return
            self._scheduled = True
        self._runtime._ready.put(self)

    def tell_after(self, delay_s: float, event: E) -> Cancel:
        # The handle is only known once scheduled; the callback reads it from this cell.
        cell: list[TimerHandle] = []

        def fire() -> None:
            with self._lock:
                self._timers.discard(cell[0])
            self.tell(event)

        with self._lock:
            if self.stopped:
                return _never
            handle = self._runtime._timers.schedule(delay_s, fire)
            if handle is None:
                return _never
            cell.append(handle)
            self._timers.add(handle)

        def cancel() -> None:
            handle.cancel()
            with self._lock:
                self._timers.discard(handle)

        return cancel

    def stop(self) -> None:
        with self._lock:
            if self.stopped:
                return
            self.stopped = True
            self._events.clear()
            timers, self._timers = self._timers, set()
        for handle in timers:
            handle.cancel()
        self._runtime._forget(self)

    def depth(self) -> int:
        with self._lock:
            return len(self._events)

    def run_batch(self, limit: int) -> None:
        """Deliver up to ``limit`` events (pool thread); requeue at the end if more wait."""
        for _ in range(limit):
            with self._lock:
                if self.stopped or not self._events:
                    self._scheduled = False
                    return
                event = self._events.popleft()
            try:
                self._actor.receive(event)
            except BaseException:  # even a SystemExit must not take a pool thread with it
                self.failed += 1
                LOG.exception("actor %s: receive failed on %s", self.name, type(event).__name__)
            self.handled += 1
        with self._lock:
            if self.stopped or not self._events:
                self._scheduled = False
                return
        self._runtime._ready.put(self)


class Runtime:
    """Actors on ``threads`` pool threads, one timer thread and ``io_threads`` blocking threads.

    Every thread starts here and is a daemon, so one stuck in a ``receive``
    or a blocking call cannot hold the process at exit.
    """

    def __init__(
        self,
        threads: int = 4,
        name: str = "actor",
        *,
        io_threads: int = 2,
        batch: int = 64,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``batch``: events delivered to one actor before the others get a turn.
        ``clock``: what timer due times are read from (tests freeze it)."""
        if threads < 1:
            raise ValueError(f"a runtime needs at least one thread, not {threads}")
        if batch < 1:
            raise ValueError(f"batch must be at least 1, not {batch}")
        self.name = name
        self._batch = batch
        self._ready: queue.SimpleQueue[_Mailbox[Any] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._actors: dict[str, _Mailbox[Any]] = {}
        self._stopping = False
        self._clock = clock
        self._timers = Timers(f"{name}-timer", clock)
        self._pool = BlockingPool(io_threads, f"{name}-io")
        self._threads = [
            threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True)
            for i in range(threads)
        ]
        for thread in self._threads:
            thread.start()
        self._timers.start()
        self._pool.start()

    def spawn(self, name: str, actor: Actor[E]) -> Ref[E]:
        """Start delivering to ``actor``; a live actor's name may not be reused (stop it first).

        After ``stop`` the actor is born stopped: everything told to it is dropped.
        """
        mailbox: _Mailbox[E] = _Mailbox(self, name, actor)
        with self._lock:
            if name in self._actors:
                raise ValueError(f"an actor named {name} is already running")
            if self._stopping:
                # A connection racing the shutdown gets a dead actor, not an exception.
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
        """Run blocking work (OVSDB, tc, Redis) on a fixed pool of `io_threads`; `done` gets the
        result or the exception. Work with the same key runs in submission order, one at a time.

        ``done`` runs on the io thread (it usually ``tell``s); dropped once stopped.
        """
        self._pool.submit(work, done, key)

    def stop(self, timeout_s: float = 1.0) -> None:
        """Stop every actor, timer and blocking item; join every thread within ``timeout_s``.

        Work in progress is not interrupted: a thread still in it after the
        timeout is left behind (a daemon) and named in a warning.
        """
        deadline = time.monotonic() + timeout_s
        with self._lock:
            self._stopping = True
            mailboxes = list(self._actors.values())
        for mailbox in mailboxes:
            mailbox.stop()
        self._timers.stop()
        self._pool.stop()
        for _ in self._threads:
            self._ready.put(None)
        current = threading.current_thread()
        left = []
        for thread in self._all_threads():
            if thread is current:
                continue
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                left.append(thread.name)
        if left:
            LOG.warning("runtime %s: threads still busy after stop: %s", self.name, ", ".join(left))

    def now(self) -> float:
        """The clock timers count from (``time.monotonic`` unless given): events stamp it."""
        return self._clock()

    def thread_count(self) -> int:
        """Threads this runtime owns: pool, timer and io threads (fixed at construction)."""
        return len(self._all_threads())

    def stats(self) -> RuntimeStats:
        with self._lock:
            mailboxes = sorted(self._actors.values(), key=lambda m: m.name)
        return RuntimeStats(
            actors=tuple(ActorStats(m.name, m.depth(), m.handled, m.failed) for m in mailboxes),
            timers=self._timers.pending(),
            blocking=self._pool.pending(),
        )

    def _all_threads(self) -> list[threading.Thread]:
        return [*self._threads, self._timers.thread, *self._pool.threads]

    def _forget(self, mailbox: _Mailbox[E]) -> None:
        with self._lock:
            if self._actors.get(mailbox.name) is mailbox:
                del self._actors[mailbox.name]

    def _run(self) -> None:
        while True:
            mailbox = self._ready.get()
            if mailbox is None or self._stopping:
                return
            mailbox.run_batch(self._batch)
