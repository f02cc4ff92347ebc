"""Reply tracking between os-ken's event thread and a sync thread."""

from __future__ import annotations

import threading

import pytest

from controller.openflow.replies import ReplyWaiter, RequestFailedError


def test_multipart_reply_is_collected_until_the_last_part() -> None:
    waiter = ReplyWaiter()
    waiter.expect(1, 7)

    def deliver() -> None:
        waiter.part(1, 7, ["a", "b"], more=True)
        waiter.part(1, 7, ["c"], more=False)

    threading.Thread(target=deliver).start()
    assert waiter.wait(1, 7, timeout_s=5) == ["a", "b", "c"]


def test_timeout_names_the_request() -> None:
    waiter = ReplyWaiter()
    waiter.expect(1, 9)
    with pytest.raises(RequestFailedError, match="0x9"):
        waiter.wait(1, 9, timeout_s=0.05)


def test_switch_error_fails_the_waiting_request() -> None:
    waiter = ReplyWaiter()
    waiter.expect(1, 3)
    assert waiter.fail(1, 3, "switch error type=4 code=1")
    with pytest.raises(RequestFailedError, match="type=4"):
        waiter.wait(1, 3, timeout_s=1)


def test_error_for_an_unknown_request_is_not_swallowed() -> None:
    assert not ReplyWaiter().fail(1, 99, "stray")


def test_settle_returns_only_errors_and_forgets_the_requests() -> None:
    waiter = ReplyWaiter()
    for xid in (1, 2, 3):
        waiter.expect(5, xid)
    waiter.fail(5, 2, "bad match")
    assert waiter.settle(5, [1, 2, 3]) == ["bad match"]
    assert not waiter.fail(5, 1, "late")


def test_disconnect_cancels_every_pending_request_of_that_switch_only() -> None:
    waiter = ReplyWaiter()
    waiter.expect(1, 1)
    waiter.expect(2, 1)
    waiter.cancel_all(1, "switch disconnected")
    with pytest.raises(RequestFailedError, match="disconnected"):
        waiter.wait(1, 1, timeout_s=1)
    with pytest.raises(RequestFailedError, match="no reply"):
        waiter.wait(2, 1, timeout_s=0.01)
