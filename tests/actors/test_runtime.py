"""The threaded runtime: mailboxes on a fixed pool, ordering, exclusivity, fairness, stop."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from controller.actors import ActorSystem, Ref, Runtime
from tests.actors.recorder import WAIT_S, Recorder


def threads_named(prefix: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(prefix + "-")]


@pytest.fixture
def runtime() -> Iterator[Runtime]:
    rt = Runtime(threads=4, name="rt-test")
    yield rt
    rt.stop(1.0)


def test_events_of_one_actor_arrive_in_the_order_told(runtime: Runtime) -> None:
    recorder = Recorder()
    ref = runtime.spawn("a", recorder)
    for i in range(1000):
        ref.tell(i)
    assert recorder.wait_for(1000) == list(range(1000))
    assert all(name.startswith("rt-test-") for name in recorder.threads)


def test_tell_from_inside_receive_is_queued_not_reentered(runtime: Runtime) -> None:
    done = Recorder()
    done_ref = runtime.spawn("done", done)

    class Countdown:
        def __init__(self) -> None:
            self.ref: Ref[int] | None = None
            self.depth = 0
            self.max_depth = 0

        def receive(self, event: int) -> None:
            self.depth += 1
            self.max_depth = max(self.max_depth, self.depth)
            assert self.ref is not None
            if event > 0:
                self.ref.tell(event - 1)  # to itself: must not run before this returns
            else:
                done_ref.tell("zero")
            self.depth -= 1

    countdown = Countdown()
    countdown.ref = runtime.spawn("countdown", countdown)
    countdown.ref.tell(500)
    assert done.wait_for(1) == ["zero"]
    assert countdown.max_depth == 1


def test_no_two_threads_in_one_actor_and_per_sender_order_kept() -> None:
    """50 actors x 2000 events from 4 sender threads on 8 pool threads."""
    runtime = Runtime(threads=8, name="rt-excl")

    class Exclusive:
        def __init__(self) -> None:
            self.inside = threading.Lock()
            self.overlaps = 0
            self.count = 0
            self.last: dict[int, int] = {}
            self.out_of_order = 0
            self.finished = threading.Event()

        def receive(self, event: tuple[int, int]) -> None:
            if not self.inside.acquire(blocking=False):
                self.overlaps += 1  # another thread is in this actor's receive right now
                self.finished.set()  # the test has failed: no need to wait for the count
                return
            try:
                sender, seq = event
                if self.last.get(sender, -1) >= seq:
                    self.out_of_order += 1
                self.last[sender] = seq
                self.count += 1
                if self.count % 97 == 0:
                    time.sleep(0)  # give up the GIL mid-receive: invites another thread in
                if self.count == 2000:
                    self.finished.set()
            finally:
                self.inside.release()

    actors = [Exclusive() for _ in range(50)]
    refs = [runtime.spawn(f"x{i}", actor) for i, actor in enumerate(actors)]
    senders_n = 4

    def send(sender: int) -> None:
        for seq in range(2000 // senders_n):
            for ref in refs:
                ref.tell((sender, seq))

    senders = [threading.Thread(target=send, args=(s,)) for s in range(senders_n)]
    try:
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join(WAIT_S)
        for actor in actors:
            assert actor.finished.wait(WAIT_S)
        assert [a.overlaps for a in actors] == [0] * 50
        assert [a.out_of_order for a in actors] == [0] * 50
        assert [a.count for a in actors] == [2000] * 50
        stats = runtime.stats()
        assert {s.handled for s in stats.actors} == {2000}
        assert {s.depth for s in stats.actors} == {0}
    finally:
        runtime.stop(1.0)


def test_a_flooded_actor_does_not_starve_another() -> None:
    runtime = Runtime(threads=1, name="rt-fair", batch=64)
    gate = threading.Event()
    try:
        blocker = runtime.spawn("blocker", _Blocker(gate))
        blocker.tell("hold")  # the only pool thread waits here while the flood is queued

        flood = Recorder()
        flood_ref = runtime.spawn("flood", flood)
        seen_by_quiet: list[int] = []
        quiet_done = threading.Event()

        class Quiet:
            def receive(self, event: str) -> None:
                seen_by_quiet.append(len(flood.events))
                quiet_done.set()

        quiet = runtime.spawn("quiet", Quiet())
        for i in range(10_000):
            flood_ref.tell(i)
        quiet.tell("hello")
        gate.set()
        assert quiet_done.wait(WAIT_S)
        # One batch of the flood, then the quiet actor: not the 10 000 first.
        assert seen_by_quiet == [64]
        assert flood.wait_for(10_000)[-1] == 9_999
    finally:
        gate.set()
        runtime.stop(1.0)


class _Blocker:
    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate
        self.entered = threading.Event()

    def receive(self, event: object) -> None:
        self.entered.set()
        self.gate.wait(WAIT_S)


def test_a_failing_receive_is_logged_with_the_actor_name_and_the_actor_goes_on(
    runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder()

    class Fragile:
        def receive(self, event: str) -> None:
            if event == "boom":
                raise ValueError("bad event")
            recorder.receive(event)

    ref = runtime.spawn("fragile-7", Fragile())
    with caplog.at_level(logging.ERROR, logger="flowlane.actors"):
        ref.tell("before")
        ref.tell("boom")
        ref.tell("after")
        assert recorder.wait_for(2) == ["before", "after"]
    [record] = [r for r in caplog.records if r.name == "flowlane.actors"]
    assert "fragile-7" in record.getMessage()
    assert record.exc_info is not None and isinstance(record.exc_info[1], ValueError)
    [stats] = runtime.stats().actors
    assert (stats.name, stats.handled, stats.failed) == ("fragile-7", 3, 1)


def test_ref_stop_delivers_nothing_after_the_event_in_progress(runtime: Runtime) -> None:
    gate = threading.Event()
    blocker = _Blocker(gate)
    recorder = Recorder()

    class Both:
        def receive(self, event: str) -> None:
            recorder.receive(event)
            if event == "first":
                blocker.receive(event)

    ref = runtime.spawn("stoppable", Both())
    ref.tell("first")
    assert blocker.entered.wait(WAIT_S)
    ref.tell("second")  # queued behind the event in progress
    ref.stop()
    ref.tell("third")  # after stop: dropped
    gate.set()
    # A later actor on the same runtime proves the pool went past the stopped one.
    probe = Recorder()
    runtime.spawn("probe", probe).tell("x")
    probe.wait_for(1)
    assert recorder.events == ["first"]
    assert [s.name for s in runtime.stats().actors] == ["probe"]


def test_a_live_name_cannot_be_spawned_twice_but_a_stopped_one_can(runtime: Runtime) -> None:
    ref = runtime.spawn("switch-1", Recorder())
    with pytest.raises(ValueError, match="switch-1"):
        runtime.spawn("switch-1", Recorder())
    ref.stop()
    again = Recorder()
    runtime.spawn("switch-1", again).tell("hi")
    assert again.wait_for(1) == ["hi"]


def test_thread_count_is_fixed_whatever_the_number_of_actors() -> None:
    runtime = Runtime(threads=4, name="rt-many", io_threads=2)
    try:
        assert runtime.thread_count() == 4 + 1 + 2
        assert len(threads_named("rt-many")) == 7
        recorders = [Recorder() for _ in range(1000)]
        refs = [runtime.spawn(f"s{i}", r) for i, r in enumerate(recorders)]
        for ref in refs:
            ref.tell("hello")
            ref.tell_after(60.0, "much later")
        for recorder in recorders:
            recorder.wait_for(1)
        assert runtime.thread_count() == 7
        assert len(threads_named("rt-many")) == 7
        assert runtime.stats().timers == 1000
    finally:
        runtime.stop(1.0)
    assert threads_named("rt-many") == []


def test_stop_joins_within_the_timeout_even_with_a_stuck_receive_and_work_pending() -> None:
    runtime = Runtime(threads=2, name="rt-stuck", io_threads=1)
    gate = threading.Event()
    try:
        stuck = _Blocker(gate)
        runtime.spawn("stuck", stuck).tell("hold")
        assert stuck.entered.wait(WAIT_S)
        late = Recorder()
        late_ref = runtime.spawn("late", late)
        io_started = threading.Event()

        def hang() -> bool:
            io_started.set()
            return gate.wait(WAIT_S)

        runtime.blocking(hang, lambda _: None, key="k")
        runtime.blocking(lambda: late_ref.tell("from io"), lambda _: None, key="k")
        late_ref.tell_after(0.0, "timer")
        assert io_started.wait(WAIT_S)
        for i in range(100):
            late_ref.tell(i)

        started = time.monotonic()
        runtime.stop(0.2)
        elapsed = time.monotonic() - started
        assert 0.15 <= elapsed < 1.0  # waited for the stuck threads, not for ever
        assert runtime.stats().actors == ()
        assert runtime.stats().timers == 0
        late_ref.tell("after stop")
        left = threads_named("rt-stuck")
        assert {t.name for t in left} == {"rt-stuck-0", "rt-stuck-io-0"} or len(left) == 2
        assert all(t.daemon for t in left)
    finally:
        gate.set()
    for thread in threads_named("rt-stuck"):
        thread.join(WAIT_S)
    assert threads_named("rt-stuck") == []
    # Whatever was queued when stop came is dropped, the stuck ones' successors included.
    assert "after stop" not in late.events and "from io" not in late.events


def test_stop_with_nothing_stuck_ends_every_thread(runtime: Runtime) -> None:
    recorder = Recorder()
    runtime.spawn("a", recorder).tell(1)
    recorder.wait_for(1)
    runtime.stop(1.0)
    assert threads_named("rt-test") == []
    spawned_after = runtime.spawn("born-stopped", Recorder())
    spawned_after.tell("dropped")  # no exception, no delivery: the runtime is gone
    assert runtime.stats().actors == ()


def test_both_runtimes_offer_the_actor_system_api() -> None:
    from controller.actors import ManualRuntime

    make: list[Callable[[], ActorSystem]] = [
        lambda: ManualRuntime(clock_start=7.0),
        lambda: Runtime(name="rt-api", clock=lambda: 7.0),
    ]
    for factory in make:
        system = factory()
        try:
            assert system.now() == 7.0
            assert system.stats().actors == ()
        finally:
            system.stop(1.0)


def test_even_a_system_exit_in_receive_leaves_the_pool_thread_alive() -> None:
    runtime = Runtime(threads=1, name="rt-exit")
    recorder = Recorder()

    class Exits:
        def receive(self, event: str) -> None:
            if event == "exit":
                raise SystemExit(3)
            recorder.receive(event)

    try:
        ref = runtime.spawn("exits", Exits())
        ref.tell("exit")
        ref.tell("after")
        assert recorder.wait_for(1) == ["after"]
        assert len(threads_named("rt-exit")) == runtime.thread_count()
    finally:
        runtime.stop(1.0)
