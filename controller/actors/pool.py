"""A fixed pool of threads for blocking calls (OVSDB, tc, Redis), serialised per key.

Actors must not block, so slow calls run here and their answer comes back
through ``done`` (which usually ``tell``s the actor).  Work with the same key
(one switch's queues) runs one item at a time in submission order; only a
key's head item is ever on the shared queue, so a key whose calls hang
holds at most one thread and other keys go on with the rest.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import deque
from collections.abc import Callable
from typing import TypeVar

LOG = logging.getLogger("flowlane.actors")

T = TypeVar("T")

_Job = Callable[[], None]
_Item = tuple[str | None, _Job]


def _log_failed_done(_result: object, _error: Exception) -> None:
    LOG.exception("blocking work: done callback failed")


def job(
    work: Callable[[], T],
    done: Callable[[T | BaseException], None],
    done_failed: Callable[[T | BaseException, Exception], None] = _log_failed_done,
) -> _Job:
    """``work``, then ``done`` with its result or the exception it raised, as one call (the
    pool's threads and ``ManualRuntime.complete_blocking`` run the same thing); a failing
    ``done`` goes to ``done_failed``, called while it is being handled (logged by default)."""

    def run() -> None:
        result: T | BaseException
        try:
            result = work()
        except BaseException as exc:  # the caller decides; a SystemExit must not kill the thread
            result = exc
        try:
            done(result)
        except Exception as exc:
            done_failed(result, exc)

    return run


class BlockingPool:
    """``threads`` daemon threads named ``<name>-N`` running submitted work."""

    def __init__(self, threads: int, name: str) -> None:
        if threads < 1:
            raise ValueError(f"a blocking pool needs at least one thread, not {threads}")
        self._ready: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._waiting: dict[str, deque[_Job]] = {}
        """Keys with an item queued or running -> their later items, in submission order."""
        self._pending = 0
        self._stopping = False
        self.threads = [
            threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True)
            for i in range(threads)
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def submit(
        self,
        work: Callable[[], T],
        done: Callable[[T | BaseException], None],
        key: str | None = None,
    ) -> bool:
        """Queue ``work``; False (and nothing runs) once the pool is stopping."""
        queued = job(work, done)
        with self._lock:
            if self._stopping:
                return False
            self._pending += 1
            if key is not None:
                later = self._waiting.get(key)
                if later is not None:
                    later.append(queued)
                    return True
                self._waiting[key] = deque()
        self._ready.put((key, queued))
        return True

    def pending(self) -> int:
        """Items submitted and not finished (running ones included)."""
        with self._lock:
            return self._pending

    def stop(self) -> None:
        """Refuse new work, drop queued work, wake every thread so it exits."""
        with self._lock:
            self._stopping = True
            self._waiting.clear()
        for _ in self.threads:
            self._ready.put(None)

    def _run(self) -> None:
        while True:
            item = self._ready.get()
            if item is None:
                return
            with self._lock:
                if self._stopping:
                    return
            key, run = item
            run()
            self._finished(key)

    def _finished(self, key: str | None) -> None:
        """Count the item done; hand the key's next item to the shared queue."""
        following: _Job | None = None
        with self._lock:
            self._pending -= 1
            if key is not None and not self._stopping:
                later = self._waiting.get(key)
                if later:
                    following = later.popleft()
                else:
                    self._waiting.pop(key, None)
        if following is not None:
            self._ready.put((key, following))
