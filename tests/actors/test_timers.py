"""Timers of the threaded runtime: one thread, a heap, in due order, cancel, stop.

The runtime reads due times from a clock the test holds still while it sets
timers up and then moves past them, so a loaded machine pausing the test
between two calls cannot make a timer come due early.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator

import pytest

from controller.actors import Runtime
from controller.actors.timers import Timers
from tests.actors.recorder import Recorder


class Clock:
    """Still until moved: timers due at or before ``now`` fire (the thread looks every due-now
    real seconds at most, so delays in these tests stay small)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def runtime(clock: Clock) -> Iterator[Runtime]:
    rt = Runtime(threads=4, name="rt-timers", clock=clock)
    yield rt
    rt.stop(1.0)


def test_timers_fire_in_due_order_not_in_the_order_set(runtime: Runtime, clock: Clock) -> None:
    recorder = Recorder()
    ref = runtime.spawn("a", recorder)
    for delay in (0.03, 0.01, 0.02, 0.0, -1.0):
        ref.tell_after(delay, delay)
    # A negative delay means "now"; equal due times keep the order they were set in.
    assert recorder.wait_until(-1.0) == [0.0, -1.0]
    clock.now += 1.0
    assert recorder.wait_until(0.03) == [0.0, -1.0, 0.01, 0.02, 0.03]


def test_a_cancelled_timer_does_not_fire(runtime: Runtime, clock: Clock) -> None:
    recorder = Recorder()
    ref = runtime.spawn("a", recorder)
    cancel = ref.tell_after(0.01, "cancelled")
    ref.tell_after(0.03, "sentinel")  # due later: once it fired, the cancelled one was due
    cancel()
    cancel()  # idempotent
    assert runtime.stats().timers == 1
    clock.now += 1.0
    assert recorder.wait_until("sentinel") == ["sentinel"]
    cancel()  # after the due time: still a no-op
    assert runtime.stats().timers == 0


def test_a_stopped_actor_loses_its_timers_and_others_keep_theirs(
    runtime: Runtime, clock: Clock
) -> None:
    stopped, other = Recorder(), Recorder()
    stopped_ref = runtime.spawn("stopped", stopped)
    other_ref = runtime.spawn("other", other)
    stopped_ref.tell_after(0.01, "never")
    other_ref.tell_after(0.03, "sentinel")
    stopped_ref.stop()
    assert runtime.stats().timers == 1  # dropped from the heap's live count at once
    assert stopped_ref.tell_after(0.0, "after stop")() is None  # a no-op cancel
    clock.now += 1.0
    other.wait_until("sentinel")
    assert stopped.events == []


def test_ten_thousand_timers_cost_no_thread_fire_in_due_order_and_cancelled_ones_never(
    runtime: Runtime, clock: Clock
) -> None:
    rng = random.Random(21)
    recorders = [Recorder() for _ in range(100)]
    refs = [runtime.spawn(f"s{i}", r) for i, r in enumerate(recorders)]
    threads_before = threading.active_count()
    expected: list[list[tuple[float, int]]] = [[] for _ in refs]
    for n in range(10_000):
        k = n % 100
        delay = rng.uniform(0.001, 0.05)
        cancel = refs[k].tell_after(delay, (delay, n))
        if n % 2:
            cancel()
        else:
            expected[k].append((delay, n))
    assert threading.active_count() == threads_before
    assert runtime.thread_count() == 4 + 1 + 2
    assert runtime.stats().timers == 5000
    for ref in refs:
        ref.tell_after(0.1, "sentinel")  # after every other timer of its actor
    clock.now += 1.0
    for recorder, wanted in zip(recorders, expected, strict=True):
        events = recorder.wait_until("sentinel")
        assert events[:-1] == sorted(wanted)


def test_runtime_stop_drops_every_pending_timer() -> None:
    runtime = Runtime(threads=1, name="rt-timers-stop")
    recorder = Recorder()
    ref = runtime.spawn("a", recorder)
    for i in range(10):
        ref.tell_after(0.01 * i + 0.05, i)
    assert runtime.stats().timers == 10
    runtime.stop(1.0)
    assert runtime.stats().timers == 0
    assert recorder.events == []
    assert ref.tell_after(0.0, "late")() is None


def test_timers_heap_is_rebuilt_when_cancelled_entries_dominate() -> None:
    timers = Timers("timers-compact")  # not started: only the bookkeeping is under test
    handles = [timers.schedule(100.0, lambda: None) for _ in range(3000)]
    for handle in handles[:2000]:
        assert handle is not None
        handle.cancel()
    assert timers.pending() == 1000
    assert len(timers._heap) < 3000  # the cancelled entries did not stay in the heap
    timers.stop()
    assert timers.pending() == 0
    assert timers.schedule(0.0, lambda: None) is None
