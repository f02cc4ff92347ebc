"""Match OpenFlow replies to the request that asked for them, across threads.

os-ken delivers replies as events on the app's event thread; the switch
sync runs on its own thread and blocks here until its reply (all parts of
a multipart reply) or an error for that xid has arrived.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


class RequestFailedError(RuntimeError):
    pass


@dataclass
class _Pending:
    done: threading.Event = field(default_factory=threading.Event)
    parts: list[Any] = field(default_factory=list)
    error: str | None = None


class ReplyWaiter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[tuple[int, int], _Pending] = {}

    def expect(self, dpid: int, xid: int) -> None:
        with self._lock:
            self._pending[(dpid, xid)] = _Pending()

    def part(self, dpid: int, xid: int, body: Any, more: bool) -> None:
        with self._lock:
            pending = self._pending.get((dpid, xid))
        if pending is None:
            return
        if isinstance(body, list):
            pending.parts.extend(body)
        else:
            pending.parts.append(body)
        if not more:
            pending.done.set()

    def fail(self, dpid: int, xid: int, reason: str) -> bool:
        """Record a switch error for ``xid``; True when someone was waiting for it."""
        with self._lock:
            pending = self._pending.get((dpid, xid))
        if pending is None:
            return False
        pending.error = reason
        pending.done.set()
        return True

    def cancel_all(self, dpid: int, reason: str) -> None:
        with self._lock:
            keys = [key for key in self._pending if key[0] == dpid]
        for key in keys:
            self.fail(key[0], key[1], reason)

    def settle(self, dpid: int, xids: list[int]) -> list[str]:
        """Stop tracking requests that get no reply on success; return their errors.

        Call after a barrier reply: OpenFlow answers in order, so any error
        for these requests has arrived by then.
        """
        with self._lock:
            settled = [self._pending.pop((dpid, xid), None) for xid in xids]
        return [p.error for p in settled if p is not None and p.error is not None]

    def wait(self, dpid: int, xid: int, timeout_s: float) -> list[Any]:
        with self._lock:
            pending = self._pending[(dpid, xid)]
        try:
            if not pending.done.wait(timeout_s):
                raise RequestFailedError(f"no reply to xid {xid:#x} within {timeout_s:g}s")
            if pending.error is not None:
                raise RequestFailedError(pending.error)
            return pending.parts
        finally:
            with self._lock:
                self._pending.pop((dpid, xid), None)
