"""The store writer: producers never wait, states coalesce, events keep their order."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import redis

from controller.link.outbox import Outbox
from controller.store.errors import StoreUnavailableError


class FakeStore:
    """Records writes; ``down`` makes every write fail as an unreachable Redis does."""

    def __init__(self) -> None:
        self.written: list[str] = []
        self.down = False
        self.gate = threading.Event()
        self.gate.set()

    def write(self, value: str) -> None:
        self.gate.wait()
        if self.down:
            raise StoreUnavailableError("Redis unavailable: connection refused")
        self.written.append(value)

    def writer(self, value: str) -> Callable[[], None]:
        return lambda: self.write(value)


@pytest.fixture
def store() -> FakeStore:
    return FakeStore()


@pytest.fixture
def outbox() -> Iterator[Outbox]:
    box = Outbox(retry_s=0.01, max_retry_s=0.05, max_ordered=100)
    yield box
    box.stop(timeout_s=0.5)


def test_a_slow_store_never_holds_the_producer(store: FakeStore, outbox: Outbox) -> None:
    store.gate.clear()  # every write blocks, as on a Redis that stopped answering
    started = time.monotonic()
    for n in range(1000):
        outbox.put(("report", n % 10), "report", store.writer(f"r{n}"))
        outbox.append("event", store.writer(f"e{n}"))
    assert time.monotonic() - started < 0.5
    assert not outbox.flush(0.1)
    store.gate.set()
    assert outbox.flush(5)


def test_the_latest_state_of_a_key_wins(store: FakeStore, outbox: Outbox) -> None:
    store.gate.clear()
    outbox.put("first", "blocker", store.writer("blocker"))
    time.sleep(0.05)  # the writer is now inside the blocking write
    for n in range(5):
        outbox.put(("report", 1), "report", store.writer(f"one-{n}"))
    outbox.put(("report", 2), "report", store.writer("two"))
    store.gate.set()
    assert outbox.flush(5)
    assert store.written == ["blocker", "one-4", "two"]


def test_events_arrive_in_order(store: FakeStore, outbox: Outbox) -> None:
    for n in range(50):
        outbox.append("event", store.writer(str(n)))
    assert outbox.flush(5)
    assert store.written == [str(n) for n in range(50)]


def test_an_outage_holds_writes_and_delivers_them_after(
    store: FakeStore, outbox: Outbox, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "flowlane.redis")
    store.down = True
    outbox.put("state", "state", store.writer("s1"))
    for n in range(3):
        outbox.append("event", store.writer(f"e{n}"))
    outbox.put("state", "state", store.writer("s2"))
    assert not outbox.flush(0.2)
    assert outbox.pending == 4  # one state (the latest) and three events
    store.down = False
    assert outbox.flush(5)
    assert store.written == ["s2", "e0", "e1", "e2"]
    assert caplog.text.count("store writes held") == 1  # once per outage, not per retry
    assert "store writes delivered again" in caplog.text


def test_a_refused_write_is_dropped_and_the_rest_go_on(
    store: FakeStore, outbox: Outbox, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse() -> None:
        raise redis.ResponseError("OOM command not allowed")

    caplog.set_level(logging.WARNING, "flowlane.redis")
    outbox.append("event", store.writer("before"))
    outbox.append("placement event", refuse)
    outbox.append("event", store.writer("after"))
    assert outbox.flush(5)
    assert store.written == ["before", "after"]
    assert "placement event not written: OOM" in caplog.text


def test_a_long_outage_keeps_only_the_newest_events(store: FakeStore) -> None:
    box = Outbox(retry_s=0.01, max_retry_s=0.02, max_ordered=3)
    try:
        store.down = True
        for n in range(5):
            box.append("event", store.writer(str(n)))
        time.sleep(0.1)
        assert box.dropped == 2
        store.down = False
        assert box.flush(5)
        assert store.written == ["2", "3", "4"]
    finally:
        box.stop(timeout_s=0.5)


def test_stop_is_prompt_while_redis_is_down(store: FakeStore) -> None:
    box = Outbox(retry_s=0.01, max_retry_s=10.0, name="prompt-stop-writer")
    store.down = True
    box.append("event", store.writer("lost"))
    time.sleep(0.2)  # failing, and backing off towards 10 s
    started = time.monotonic()
    box.stop(timeout_s=1.0)
    assert time.monotonic() - started < 1.0
    assert not any(
        t.name == "flowlane-store-writer" and t.is_alive() for t in threading.enumerate()
    )


def test_stop_delivers_what_is_pending(store: FakeStore) -> None:
    box = Outbox()
    for n in range(20):
        box.append("event", store.writer(str(n)))
    box.stop(timeout_s=2.0)
    assert store.written == [str(n) for n in range(20)]


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="retry_s"):
        Outbox(retry_s=0)
    with pytest.raises(ValueError, match="max_ordered"):
        Outbox(max_ordered=0)


def test_an_urgent_state_waits_only_for_the_write_in_flight(
    store: FakeStore, outbox: Outbox
) -> None:
    """Ten switches' reports are pending; the applied version written next jumps them."""
    store.gate.clear()
    outbox.put("first", "blocker", store.writer("blocker"))
    time.sleep(0.05)  # the writer is now inside the blocking write
    for n in range(10):
        outbox.put(("report", n), "report", store.writer(f"report-{n}"))
    outbox.append("event", store.writer("event"))
    outbox.put(("applied", 3), "applied", store.writer("applied-3-old"), urgent=True)
    outbox.put(("applied", 3), "applied", store.writer("applied-3"), urgent=True)
    outbox.put(("applied", 7), "applied", store.writer("applied-7"), urgent=True)
    store.gate.set()
    assert outbox.flush(5)
    assert store.written[:3] == ["blocker", "applied-3", "applied-7"]
    assert store.written[3:] == [*(f"report-{n}" for n in range(10)), "event"]


def test_an_urgent_state_arriving_mid_batch_goes_before_the_rest(
    store: FakeStore, outbox: Outbox
) -> None:
    store.gate.clear()
    for n in range(5):
        outbox.put(("report", n), "report", store.writer(f"report-{n}"))
    time.sleep(0.05)  # the writer holds report-0
    outbox.put(("applied", 1), "applied", store.writer("applied-1"), urgent=True)
    store.gate.set()
    assert outbox.flush(5)
    assert store.written == ["report-0", "applied-1", *(f"report-{n}" for n in range(1, 5))]


def test_an_urgent_state_held_by_an_outage_is_retried_first(
    store: FakeStore, outbox: Outbox
) -> None:
    store.down = True
    outbox.put(("report", 1), "report", store.writer("report-1"))
    outbox.put(("applied", 1), "applied", store.writer("applied-1"), urgent=True)
    time.sleep(0.1)  # a few failed attempts
    outbox.put(("applied", 1), "applied", store.writer("applied-1-newer"), urgent=True)
    store.down = False
    assert outbox.flush(5)
    assert store.written == ["applied-1-newer", "report-1"]
