"""One switch's OpenFlow connection as the worker sees it: requests, batches and barriers.

os-ken's ``Datapath.set_xid`` is a plain increment; the switch worker, the
discovery loop and the packet-in handler all send to one datapath, so every
xid here is taken under one lock (``osken_internals``) and no two requests
share one (which would hand one waiter the other's reply).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from controller.openflow.flowstats import RawFlowStats
from controller.openflow.osken_internals import assign_xid, reserve_xids
from controller.openflow.replies import ReplyWaiter, RequestFailedError
from controller.openflow.wire import BARRIER, with_xid


class Channel:
    """Requests to one datapath, answered through the shared ``ReplyWaiter``."""

    def __init__(
        self,
        datapath: Any,
        replies: ReplyWaiter,
        timeout_s: float,
        raw: RawFlowStats,
    ) -> None:
        self.datapath = datapath
        self._replies = replies
        self._timeout_s = timeout_s
        self._raw = raw

    def request_raw_flow_stats(self, msg: Any) -> list[Any]:
        """A flow-stats request whose reply parts come back as raw bodies (``memoryview``)."""
        xid = assign_xid(self.datapath, msg)
        self._raw.register(self.dpid, xid)  # before sending: the reply may beat send_msg
        try:
            self._replies.expect(self.dpid, xid)
            return self._awaited(xid, bool(self.datapath.send_msg(msg)))
        finally:
            self._raw.forget(self.dpid, xid)

    @property
    def dpid(self) -> int:
        return int(self.datapath.id)

    def send(self, msg: Any) -> bool:
        """Fire and forget (packet-outs): no reply is expected, errors are logged by the app."""
        assign_xid(self.datapath, msg)
        return bool(self.datapath.send_msg(msg))

    def request(self, msg: Any, timeout_s: float | None = None) -> list[Any]:
        """Send and wait for the whole (multipart) reply."""
        xid = assign_xid(self.datapath, msg)
        self._replies.expect(self.dpid, xid)
        return self._awaited(xid, bool(self.datapath.send_msg(msg)), timeout_s)

    def _awaited(self, xid: int, sent: bool, timeout_s: float | None = None) -> list[Any]:
        """The reply to ``xid`` (expected before it was sent); at once a failure when the
        connection took nothing."""
        if not sent:
            self._replies.fail(self.dpid, xid, "switch connection is closed")
        return self._replies.wait(self.dpid, xid, timeout_s or self._timeout_s)

    def answers(self, timeout_s: float) -> bool:
        """Whether the switch answers a barrier within ``timeout_s``: is this connection live?"""
        barrier = self.datapath.ofproto_parser.OFPBarrierRequest(self.datapath)
        try:
            self.request(barrier, timeout_s)
        except (RequestFailedError, TimeoutError):
            return False
        return True

    def batch(self, encoded: Sequence[bytes]) -> None:
        """Send in order, then a barrier, as one write; raise if the switch rejected any.

        ``encoded`` are whole messages (``wire``); each gets a transaction id
        of its own here. OpenFlow answers in order, so every error for the
        batch has arrived when the barrier reply does.  One write rather than
        one per message: each message os-ken queues is a hand-off to the
        connection's send thread, and on a busy interpreter each hand-off
        waits its turn.
        """
        xids = reserve_xids(self.datapath, len(encoded) + 1)
        *sent, barrier_xid = xids
        for xid in xids:
            self._replies.expect(self.dpid, xid)
        out = b"".join(
            with_xid(msg, xid) for msg, xid in zip((*encoded, BARRIER), xids, strict=True)
        )
        try:
            self._awaited(barrier_xid, bool(self.datapath.send(out)))
        finally:
            errors = self._replies.settle(self.dpid, sent)
        if errors:
            raise RequestFailedError(f"{len(errors)} message(s) rejected, first: {errors[0]}")
