"""An actor that records what it receives, for the threaded runtime's tests.

The test's thread waits on it, bounded by ``WAIT_S``, instead of sleeping.
"""

from __future__ import annotations

import threading
from typing import Any

WAIT_S = 5.0
"""Upper bound for waiting on an event that should come quickly (a failure, not a delay)."""


class Recorder:
    """Records what it receives and on which threads; ``wait_for(n)`` blocks until n events
    arrived, ``wait_until(event)`` until that one did."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.threads: set[str] = set()
        self._cond = threading.Condition()

    def receive(self, event: Any) -> None:
        with self._cond:
            self.events.append(event)
            self.threads.add(threading.current_thread().name)
            self._cond.notify_all()

    def wait_for(self, n: int) -> list[Any]:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.events) >= n, WAIT_S), self.events
            return list(self.events)

    def wait_until(self, event: Any) -> list[Any]:
        with self._cond:
            assert self._cond.wait_for(lambda: event in self.events, WAIT_S), self.events
            return list(self.events)
