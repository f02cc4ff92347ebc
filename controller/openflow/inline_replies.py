"""Replies to the controller's own requests, handed to their waiter on the receive thread.

os-ken delivers every message of every switch to an app through that app's
one event queue and thread.  A barrier reply that a worker waits for (every
policy change ends with one per switch) then queues behind whatever the app
thread is doing for the other switches (port status, packet-ins of
discovery, table reads), and each queue hop costs a scheduling round on a
busy interpreter: on ten switches that was most of a policy change's time,
while Open vSwitch itself answered in about 2 ms.

So the replies that only complete a request (barrier, multipart and error
replies) are handled where os-ken reads them: on the connection's receive
thread, as handlers of os-ken's own OpenFlow brick (``ofp_event``), which
that thread calls directly.  Errors go the same way as the barrier replies,
so a request's error is always recorded before the barrier that ends it (the
switch sends them in that order, and one thread handles them in order).
Nothing here blocks: each handler is a dictionary update and an event.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER

from controller.openflow.flowstats import deferred_body
from controller.openflow.handlers import on_event
from controller.openflow.osken_internals import openflow_brick
from controller.openflow.replies import ReplyWaiter

LOG = logging.getLogger("flowlane.controller")

MULTIPART_REPLIES = [
    ofp_event.EventOFPFlowStatsReply,
    ofp_event.EventOFPPortDescStatsReply,
    ofp_event.EventOFPQueueStatsReply,
    ofp_event.EventOFPPortStatsReply,
    ofp_event.EventOFPGroupDescStatsReply,
    ofp_event.EventOFPMeterConfigStatsReply,
]

Served = Callable[[Any], bool]
"""Whether a datapath (connection) is the one served for its id: a refused twin's replies
must not answer our requests."""


class InlineReplies:
    """Routes request replies to a ``ReplyWaiter`` from the receive threads."""

    def __init__(self, replies: ReplyWaiter, served: Served) -> None:
        self._replies = replies
        self._served = served
        self._brick: Any = None
        self._registered: list[tuple[Any, Any]] = []

    def attach(self) -> None:
        """Register with os-ken's OpenFlow brick (once its apps exist, before switches come)."""
        if self._brick is not None:
            return
        brick = openflow_brick()
        if brick is None:
            raise RuntimeError("os-ken's ofp_event brick is not running: no OpenFlow handler")
        handlers: list[tuple[Any, Any]] = [(ev, self._multipart) for ev in MULTIPART_REPLIES]
        handlers += [
            (ofp_event.EventOFPBarrierReply, self._barrier),
            (ofp_event.EventOFPErrorMsg, self._error),
        ]
        for event, handler in handlers:
            brick.register_handler(event, handler)
        self._brick, self._registered = brick, handlers

    def detach(self) -> None:
        """Unregister, so a later app in this process (tests) is the only one answered."""
        if self._brick is None:
            return
        for event, handler in self._registered:
            self._brick.unregister_handler(event, handler)
        self._brick, self._registered = None, []

    # os-ken reads ``callers`` off each handler to filter by the connection's state.

    @on_event(MULTIPART_REPLIES, MAIN_DISPATCHER)
    def _multipart(self, ev: Any) -> None:
        msg = ev.msg
        if not self._served(msg.datapath):
            return
        more = bool(msg.flags & msg.datapath.ofproto.OFPMPF_REPLY_MORE)
        raw = deferred_body(msg)
        self._replies.part(msg.datapath.id, msg.xid, msg.body if raw is None else [raw], more)

    @on_event(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def _barrier(self, ev: Any) -> None:
        if self._served(ev.msg.datapath):
            self._replies.part(ev.msg.datapath.id, ev.msg.xid, [], False)

    @on_event(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _error(self, ev: Any) -> None:
        msg = ev.msg
        reason = f"switch error type={msg.type} code={msg.code} for xid {msg.xid:#x}"
        # Only the served connection's errors can fail a request; a twin's are just logged.
        if not self._served(msg.datapath) or not self._replies.fail(
            msg.datapath.id, msg.xid, reason
        ):
            LOG.error("switch %016x: %s", msg.datapath.id, reason)
