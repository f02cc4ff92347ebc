"""The blocking pool: per-key order, parallel keys, results and exceptions to ``done``."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from controller.actors import Runtime

WAIT_S = 5.0


@pytest.fixture
def runtime() -> Iterator[Runtime]:
    rt = Runtime(threads=1, name="rt-io", io_threads=2)
    yield rt
    rt.stop(1.0)


def test_a_slow_key_holds_one_thread_and_its_later_work_waits(runtime: Runtime) -> None:
    """Two io threads: key a's first item hangs; a's second item must wait behind it
    (if it ran, it would hang the second thread too) while key b's item runs."""
    gate = threading.Event()
    started: list[str] = []
    b_done = threading.Event()
    a_done: list[object] = []
    all_a_done = threading.Event()

    def hang(tag: str) -> str:
        started.append(tag)
        gate.wait(WAIT_S)
        return tag

    def a_finished(result: object) -> None:
        a_done.append(result)
        if len(a_done) == 2:
            all_a_done.set()

    runtime.blocking(lambda: hang("a1"), a_finished, key="a")
    runtime.blocking(lambda: hang("a2"), a_finished, key="a")
    runtime.blocking(lambda: "b1", lambda _: b_done.set(), key="b")
    try:
        assert b_done.wait(WAIT_S)  # b was not stuck behind a
        assert started == ["a1"]
        assert runtime.stats().blocking == 2
    finally:
        gate.set()
    assert all_a_done.wait(WAIT_S)
    assert a_done == ["a1", "a2"]
    assert started == ["a1", "a2"]


def test_items_of_one_key_run_one_at_a_time_in_submission_order(runtime: Runtime) -> None:
    inside = {key: threading.Lock() for key in "abc"}
    order: dict[str, list[int]] = {key: [] for key in "abc"}
    overlaps: list[str] = []
    finished = threading.Semaphore(0)

    def work(key: str, n: int) -> None:
        if not inside[key].acquire(blocking=False):
            overlaps.append(key)
            return
        try:
            order[key].append(n)
            time.sleep(0)  # give up the GIL while inside: invites another thread in
        finally:
            inside[key].release()

    def submit(key: str, n: int) -> None:
        runtime.blocking(lambda: work(key, n), lambda _: finished.release(), key)

    for key in "abc":
        for n in range(200):
            submit(key, n)
    for _ in range(600):
        assert finished.acquire(timeout=WAIT_S)
    assert overlaps == []
    assert order == {key: list(range(200)) for key in "abc"}


def test_done_gets_the_result_or_the_exception_on_an_io_thread(runtime: Runtime) -> None:
    results: list[object] = []
    threads: list[str] = []
    got = threading.Semaphore(0)

    def done(result: object) -> None:
        results.append(result)
        threads.append(threading.current_thread().name)
        got.release()

    def fail() -> int:
        raise OSError("ovsdb went away")

    runtime.blocking(lambda: 42, done, key="s1")
    runtime.blocking(fail, done, key="s1")
    for _ in range(2):
        assert got.acquire(timeout=WAIT_S)
    assert results[0] == 42
    assert isinstance(results[1], OSError) and str(results[1]) == "ovsdb went away"
    assert all(name.startswith("rt-io-io-") for name in threads)


def test_unkeyed_work_runs_in_parallel(runtime: Runtime) -> None:
    """Two unkeyed items that each wait for the other can only finish side by side."""
    barrier = threading.Barrier(2, timeout=WAIT_S)
    done = threading.Semaphore(0)
    results: list[int | BaseException] = []

    def meet() -> int:
        return barrier.wait()

    def met(result: int | BaseException) -> None:
        results.append(result)
        done.release()

    for _ in range(2):
        runtime.blocking(meet, met)
    for _ in range(2):
        assert done.acquire(timeout=WAIT_S)
    assert set(results) == {0, 1}  # each got its own place at the barrier: both waited at once


def test_a_failing_done_is_logged_and_the_key_goes_on(
    runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    second = threading.Event()

    def bad_done(_: object) -> None:
        raise RuntimeError("done broke")

    runtime.blocking(lambda: 1, bad_done, key="k")
    runtime.blocking(lambda: 2, lambda _: second.set(), key="k")
    assert second.wait(WAIT_S)
    assert any("done callback failed" in r.getMessage() for r in caplog.records)


def test_work_after_stop_is_dropped() -> None:
    runtime = Runtime(threads=1, name="rt-io-stop", io_threads=1)
    runtime.stop(1.0)
    ran: list[object] = []
    runtime.blocking(lambda: ran.append("work"), ran.append, key="k")
    assert ran == []
    assert runtime.stats().blocking == 0
