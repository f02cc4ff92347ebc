"""A Redis retry bounded by time, not by a count: how long a failover may hold a command.

redis-py retries at two levels with one policy: a command's send is retried, and every
reconnect inside it is retried again, so a count of N allows about N x N attempts.  A
failover lasts a time (the Sentinels' ``down-after-milliseconds`` and an election), so the
bound here is a deadline, shared by every retry nested in the outermost one on a thread: a
command meeting a dead or demoted primary is retried with backoff until the new primary
answers, or fails once ``window_s`` has passed since it started.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Final, TypeVar

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

T = TypeVar("T")

BACKOFF_BASE_S: Final = 0.05
BACKOFF_CAP_S: Final = 0.5
"""Retries come at least every half second, so the new primary is found within about that
of its promotion."""
RETRIED: Final = (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError)
"""A primary gone (refused, reset, timed out, or no primary known to the Sentinels yet:
``MasterNotFoundError`` is a ``ConnectionError``), or one demoted to a replica."""

_deadline = threading.local()
"""The deadline of the outermost retry running on this thread (module-level: redis-py
deep-copies the policy into every connection)."""


class DeadlineRetry(Retry):
    """Retry ``RETRIED`` errors with exponential backoff until ``window_s`` has passed."""

    def __init__(self, window_s: float) -> None:
        super().__init__(ExponentialBackoff(cap=BACKOFF_CAP_S, base=BACKOFF_BASE_S), -1, RETRIED)
        self.window_s = window_s

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DeadlineRetry) and other.window_s == self.window_s

    __hash__ = Retry.__hash__

    def call_with_retry(
        self,
        do: Callable[[], T],
        fail: Callable[..., Any],
        is_retryable: Callable[[Exception], bool] | None = None,
        with_failure_count: bool = False,
    ) -> T:
        outermost = getattr(_deadline, "at", None) is None
        if outermost:
            _deadline.at = time.monotonic() + self.window_s
        try:
            return self._attempts(do, fail, is_retryable, with_failure_count)
        finally:
            if outermost:
                _deadline.at = None

    def _attempts(
        self,
        do: Callable[[], T],
        fail: Callable[..., Any],
        is_retryable: Callable[[Exception], bool] | None,
        with_failure_count: bool,
    ) -> T:
        self._backoff.reset()  # type: ignore[no-untyped-call]  # redis-py: untyped
        failures = 0
        while True:
            try:
                return do()
            except RETRIED as error:
                failures += 1
                # The failure handler first: it drops the broken connection (and a
                # pipeline's WATCH state) whether or not we go on.
                if with_failure_count:
                    fail(error, failures)
                else:
                    fail(error)
                checks = (self._is_retryable, is_retryable)
                if any(check is not None and not check(error) for check in checks):
                    raise
                pause = self._backoff.compute(failures)
                if time.monotonic() + pause > _deadline.at:
                    raise
                time.sleep(pause)
