"""The store writer: every Redis write the switches cause, done on one thread of its own.

A switch's actor must never wait on Redis: a sync that reports its result
while Redis is slow or gone would hold the next sync (and the detection
poll), and every other actor on the same pool thread, for a socket timeout.
Actors hand their writes to an ``Outbox`` instead and go on; one writer
thread delivers them.

Two kinds of writes, because they fail differently:

- *Keyed* writes are states (a switch's report, its applied version, its
  flow view, the fabric snapshot): only the latest per key matters, so a new
  one replaces a pending one, and one that Redis could not take is kept and
  retried until a newer one replaces it. Nothing is lost, nothing piles up.
  An *urgent* keyed write (a switch's applied version: what a client waiting
  on ``?wait=applied`` polls) goes ahead of every other pending write, and
  keyed writes go one at a time, so an urgent one waits for at most the
  write in flight, never for ten switches' reports.
- *Ordered* writes are events (reclassifications, fabric events): each one
  counts, in order. They are kept across an outage up to ``max_ordered``;
  past that the oldest are dropped, counted and logged, so an outage of any
  length costs bounded memory.

Redis being unreachable holds the writes and retries with back-off; Redis
refusing a write (an error reply) drops that one write with a warning:
retrying a refused write would only refuse it again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable

import redis

from controller.store.errors import StoreUnavailableError

LOG = logging.getLogger("flowlane.redis")

Write = Callable[[], object]
"""A write; what it returns is ignored."""
UNREACHABLE = (StoreUnavailableError, redis.ConnectionError, redis.TimeoutError)


class Outbox:
    def __init__(
        self,
        *,
        retry_s: float = 0.25,
        max_retry_s: float = 5.0,
        max_ordered: int = 10_000,
        name: str = "flowlane-store-writer",
    ) -> None:
        if retry_s <= 0 or max_retry_s < retry_s or max_ordered < 1:
            raise ValueError(
                f"need 0 < retry_s <= max_retry_s and max_ordered >= 1:"
                f" {retry_s}, {max_retry_s}, {max_ordered}"
            )
        self._retry_s = retry_s
        self._max_retry_s = max_retry_s
        self._max_ordered = max_ordered
        self._name = name
        self._cond = threading.Condition()
        self._keyed: dict[Hashable, tuple[str, Write]] = {}
        self._urgent: dict[Hashable, tuple[str, Write]] = {}
        self._ordered: deque[tuple[str, Write]] = deque()
        self._busy = False
        self._stopping = False
        self._failing = False
        self._dropped = 0
        self._thread: threading.Thread | None = None

    # ---- producers (any thread; never block on Redis) -----------------------------------

    def put(self, key: Hashable, what: str, write: Write, *, urgent: bool = False) -> None:
        """Deliver ``write`` soon; it replaces a pending write with the same key.

        ``urgent``: before every pending write that is not (a key is either
        always urgent or never)."""
        lane = self._urgent if urgent else self._keyed
        with self._cond:
            lane.pop(key, None)  # the newest goes last: states are written in order
            lane[key] = (what, write)
            self._wake()

    def append(self, what: str, write: Write) -> None:
        """Deliver ``write`` after every ordered write appended before it."""
        with self._cond:
            self._ordered.append((what, write))
            self._trim()
            self._wake()

    @property
    def pending(self) -> int:
        with self._cond:
            return (
                len(self._urgent) + len(self._keyed) + len(self._ordered) + (1 if self._busy else 0)
            )

    @property
    def dropped(self) -> int:
        """Ordered writes dropped because an outage outlasted ``max_ordered`` of them."""
        with self._cond:
            return self._dropped

    def flush(self, timeout_s: float) -> bool:
        """Wait until everything handed over so far is written; False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._urgent or self._keyed or self._ordered or self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._thread is None:
                    return False
                self._cond.wait(remaining)
            return True

    def stop(self, timeout_s: float = 1.0) -> None:
        """Write what is pending (within ``timeout_s``; not if Redis is failing), then stop."""
        if not self._failing:
            self.flush(timeout_s)
        with self._cond:
            self._stopping = True
            left = len(self._urgent) + len(self._keyed) + len(self._ordered)
            self._cond.notify_all()
        if left:
            LOG.warning("%d store write(s) not delivered at exit", left)
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)

    # ---- the writer thread ----------------------------------------------------------

    def _wake(self) -> None:
        if self._thread is None and not self._stopping:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        self._cond.notify_all()

    def _trim(self) -> None:
        excess = len(self._ordered) - self._max_ordered
        if excess <= 0:
            return
        for _ in range(excess):
            self._ordered.popleft()
        if self._dropped == 0:
            LOG.warning("store writes held too long: dropping the oldest events")
        self._dropped += excess

    def _run(self) -> None:
        delay = self._retry_s
        while True:
            with self._cond:
                while not self._stopping and not (self._urgent or self._keyed or self._ordered):
                    self._cond.wait()
                if self._stopping:
                    return
                ordered: list[tuple[str, Write]] = []
                if self._urgent:
                    lane = self._urgent
                    keyed, self._urgent = self._urgent, {}
                elif self._keyed:
                    lane = self._keyed
                    oldest = next(iter(self._keyed))
                    keyed = {oldest: self._keyed.pop(oldest)}
                else:
                    lane, keyed = self._keyed, {}
                    ordered = list(self._ordered)
                    self._ordered.clear()
                self._busy = True
            kept_keyed, kept_ordered, error = _deliver(keyed, ordered)
            with self._cond:
                self._busy = False
                if kept_keyed:
                    # Back in front, in their order; a newer write of a key wins.
                    merged = {k: lane.get(k, v) for k, v in kept_keyed.items()}
                    merged.update((k, v) for k, v in lane.items() if k not in merged)
                    lane.clear()
                    lane.update(merged)
                self._ordered.extendleft(reversed(kept_ordered))
                self._trim()
                self._cond.notify_all()
                if error is None:
                    if self._failing:
                        LOG.info("store writes delivered again")
                    self._failing, delay = False, self._retry_s
                    continue
                if not self._failing:
                    LOG.warning(
                        "store writes held (%d pending): %s; retrying",
                        len(self._urgent) + len(self._keyed) + len(self._ordered),
                        error,
                    )
                self._failing = True
                self._cond.wait_for(lambda: self._stopping, timeout=delay)
                delay = min(delay * 2, self._max_retry_s)


def _deliver(
    keyed: dict[Hashable, tuple[str, Write]], ordered: list[tuple[str, Write]]
) -> tuple[dict[Hashable, tuple[str, Write]], list[tuple[str, Write]], Exception | None]:
    """Write in order until Redis is unreachable; return what is left and why."""
    keys = list(keyed)
    for index, key in enumerate(keys):
        what, write = keyed[key]
        error = _attempt(what, write)
        if error is not None:
            return {k: keyed[k] for k in keys[index:]}, ordered, error
    for index, (what, write) in enumerate(ordered):
        error = _attempt(what, write)
        if error is not None:
            return {}, ordered[index:], error
    return {}, [], None


def _attempt(what: str, write: Write) -> Exception | None:
    """None when written or dropped for good; the error when Redis could not be reached."""
    try:
        write()
    except UNREACHABLE as exc:
        return exc
    except redis.RedisError as exc:
        LOG.warning("%s not written: %s", what, exc)
    except Exception:
        LOG.exception("%s not written", what)
    return None
