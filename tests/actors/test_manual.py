"""ManualRuntime: the fake clock, run_until_idle, advance, held-back blocking work."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import pytest

from controller.actors import (
    ActorStats,
    LivelockError,
    ManualRuntime,
    PendingTimer,
    Ref,
)


class Recorder:
    def __init__(self, runtime: ManualRuntime) -> None:
        self.runtime = runtime
        self.events: list[tuple[float, Any]] = []

    def receive(self, event: Any) -> None:
        self.events.append((self.runtime.now(), event))


@dataclass(frozen=True)
class Ping:
    n: int


def test_nothing_happens_until_the_test_runs_it() -> None:
    rt = ManualRuntime()
    recorder = Recorder(rt)
    ref = rt.spawn("a", recorder)
    ref.tell("x")
    ref.tell("y")
    assert recorder.events == []
    assert rt.stats().actors == (ActorStats("a", depth=2, handled=0, failed=0),)
    assert rt.run_until_idle() == 2
    assert recorder.events == [(0.0, "x"), (0.0, "y")]
    assert rt.stats().actors == (ActorStats("a", depth=0, handled=2, failed=0),)
    assert rt.thread_count() == 0


def test_events_are_delivered_in_the_global_order_told_nested_tells_included() -> None:
    rt = ManualRuntime()
    log: list[str] = []

    class Relay:
        def __init__(self, name: str) -> None:
            self.name = name
            self.next: Ref[int] | None = None

        def receive(self, event: int) -> None:
            log.append(f"{self.name}{event}")
            if self.next is not None and event > 0:
                self.next.tell(event - 1)

    a, b = Relay("a"), Relay("b")
    a_ref, b_ref = rt.spawn("a", a), rt.spawn("b", b)
    a.next, b.next = b_ref, a_ref
    a_ref.tell(3)
    b_ref.tell(0)
    rt.run_until_idle()
    assert log == ["a3", "b0", "b2", "a1", "b0"]


def test_advance_fires_timers_in_time_order_and_runs_what_they_cause() -> None:
    rt = ManualRuntime(clock_start=100.0)
    recorder = Recorder(rt)
    rec_ref = rt.spawn("rec", recorder)

    class Scheduler:
        def __init__(self) -> None:
            self.ref: Ref[str] | None = None

        def receive(self, event: str) -> None:
            assert self.ref is not None
            rec_ref.tell(event)
            if event == "start":
                self.ref.tell_after(5.0, "five")
                self.ref.tell_after(2.0, "two")
            elif event == "two":
                self.ref.tell_after(1.0, "three")  # set while advancing: fires in the same call
                self.ref.tell_after(10.0, "twelve")

    scheduler = Scheduler()
    scheduler.ref = rt.spawn("sched", scheduler)
    scheduler.ref.tell("start")
    rt.run_until_idle()
    assert rt.timers() == (
        PendingTimer(102.0, "sched", "two"),
        PendingTimer(105.0, "sched", "five"),
    )
    rt.advance(6.0)
    assert recorder.events == [
        (100.0, "start"),
        (102.0, "two"),
        (103.0, "three"),
        (105.0, "five"),
    ]
    assert rt.now() == 106.0
    assert rt.timers() == (PendingTimer(112.0, "sched", "twelve"),)
    rt.advance(5.999)
    assert recorder.events[-1] == (105.0, "five")
    rt.advance(0.001)
    assert recorder.events[-1] == (112.0, "twelve")


def test_equal_due_times_fire_in_the_order_set_and_zero_delay_needs_no_advance() -> None:
    rt = ManualRuntime()
    recorder = Recorder(rt)
    ref = rt.spawn("a", recorder)
    ref.tell_after(1.0, "first")
    ref.tell_after(1.0, "second")
    ref.tell_after(0.0, "now")
    ref.tell_after(-3.0, "also now")
    rt.run_until_idle()
    assert recorder.events == [(0.0, "now"), (0.0, "also now")]
    rt.advance(1.0)
    assert [e for _, e in recorder.events[2:]] == ["first", "second"]


def test_cancel_and_stop_drop_timers() -> None:
    rt = ManualRuntime()
    recorder = Recorder(rt)
    ref = rt.spawn("a", recorder)
    other = rt.spawn("b", Recorder(rt))
    cancel = ref.tell_after(1.0, "cancelled")
    ref.tell_after(2.0, "dropped by stop")
    other.tell_after(3.0, "kept")
    cancel()
    assert [t.event for t in rt.timers()] == ["dropped by stop", "kept"]
    ref.tell("queued before stop")
    ref.stop()
    ref.tell("after stop")
    assert [t.event for t in rt.timers()] == ["kept"]
    rt.advance(10.0)
    assert recorder.events == []
    assert [s.name for s in rt.stats().actors] == ["b"]


def test_the_livelock_guard_names_the_busy_actor() -> None:
    rt = ManualRuntime()

    class Echo:
        def __init__(self) -> None:
            self.ref: Ref[int] | None = None

        def receive(self, event: int) -> None:
            assert self.ref is not None
            self.ref.tell(event + 1)

    echo = Echo()
    echo.ref = rt.spawn("echo", echo)
    echo.ref.tell(0)
    with pytest.raises(LivelockError, match="echo"):
        rt.run_until_idle(max_events=500)
    # A zero-delay timer loop is a livelock too, also under advance.
    rt2 = ManualRuntime()

    class Ticker:
        def __init__(self) -> None:
            self.ref: Ref[str] | None = None

        def receive(self, event: str) -> None:
            assert self.ref is not None
            self.ref.tell_after(0.0, event)

    ticker = Ticker()
    ticker.ref = rt2.spawn("ticker", ticker)
    ticker.ref.tell("tick")
    with pytest.raises(LivelockError, match="ticker"):
        rt2.advance(1.0, max_events=100)


def test_blocking_work_waits_until_completed_so_a_reply_can_be_held_back() -> None:
    rt = ManualRuntime()
    recorder = Recorder(rt)
    ref = rt.spawn("switch-1", recorder)
    ran: list[str] = []

    def work(tag: str) -> str:
        ran.append(tag)
        return tag

    def submit(tag: str, key: str) -> None:
        rt.blocking(lambda: work(tag), lambda result: ref.tell(("done", result)), key=key)

    submit("qos-1", "s1")
    submit("qos-2", "s1")
    submit("qos-x", "s2")
    assert ran == []
    assert (rt.pending_blocking(), rt.pending_blocking("s1")) == (3, 2)
    ref.tell("port went down")  # interleaves before any QoS answer
    rt.run_until_idle()
    assert rt.complete_blocking(1, key="s2") == 1
    assert rt.complete_blocking(1) == 1  # the oldest: s1's first
    assert ran == ["qos-x", "qos-1"]
    assert [e for _, e in recorder.events] == [
        "port went down",
        ("done", "qos-x"),
        ("done", "qos-1"),
    ]
    with pytest.raises(ValueError, match="2 blocking item"):
        rt.complete_blocking(2)
    assert rt.complete_blocking() == 1
    assert rt.pending_blocking() == 0
    assert rt.stats().blocking == 0


def test_blocking_exceptions_go_to_done_and_settle_drains_chains() -> None:
    rt = ManualRuntime()
    results: list[object] = []

    def fail() -> None:
        raise OSError("tc failed")

    def chain(result: object) -> None:
        results.append(result)
        if len(results) < 3:
            rt.blocking(fail, chain, key="k")  # queued for a later round

    rt.blocking(fail, chain, key="k")
    assert rt.complete_blocking() == 1
    assert rt.pending_blocking() == 1
    rt.settle()
    assert len(results) == 3 and all(isinstance(r, OSError) for r in results)


def test_a_failing_receive_is_logged_recorded_and_the_actor_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rt = ManualRuntime()
    recorder = Recorder(rt)

    class Fragile:
        def receive(self, event: str) -> None:
            if event == "boom":
                raise ValueError("bad")
            recorder.receive(event)

    ref = rt.spawn("fragile", Fragile())
    for event in ("a", "boom", "b"):
        ref.tell(event)
    with caplog.at_level(logging.ERROR, logger="flowlane.actors"):
        rt.run_until_idle()
    assert [e for _, e in recorder.events] == ["a", "b"]
    [failure] = rt.failures
    assert (failure.actor, failure.event) == ("fragile", "boom")
    assert isinstance(failure.error, ValueError)
    assert "fragile" in caplog.text
    assert rt.stats().actors[0].failed == 1


def test_raise_errors_makes_a_failing_receive_fail_the_test() -> None:
    rt = ManualRuntime(raise_errors=True)

    class Fragile:
        def receive(self, event: str) -> None:
            raise ValueError(event)

    rt.spawn("fragile", Fragile()).tell("boom")
    with pytest.raises(ValueError, match="boom"):
        rt.run_until_idle()
    assert rt.run_until_idle() == 0  # still usable afterwards


def test_driving_the_runtime_from_inside_a_receive_is_refused() -> None:
    rt = ManualRuntime(raise_errors=True)

    class Nested:
        def receive(self, event: str) -> None:
            rt.run_until_idle()

    rt.spawn("nested", Nested()).tell("x")
    with pytest.raises(RuntimeError, match="not reentrant"):
        rt.run_until_idle()


def test_stop_drops_everything_and_later_spawns_are_born_stopped() -> None:
    rt = ManualRuntime()
    recorder = Recorder(rt)
    ref = rt.spawn("a", recorder)
    ref.tell("queued")
    ref.tell_after(1.0, "timer")
    rt.blocking(lambda: ref.tell("from work"), lambda _: None)
    rt.stop()
    assert (rt.timers(), rt.pending_blocking(), rt.stats().actors) == ((), 0, ())
    late = rt.spawn("late", Recorder(rt))
    late.tell("dropped")
    rt.blocking(lambda: None, lambda _: None)
    rt.advance(5.0)
    assert recorder.events == []
    assert rt.pending_blocking() == 0
    with pytest.raises(ValueError, match="forward"):
        rt.advance(-1.0)
