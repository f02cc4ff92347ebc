"""Every use flowlane makes of os-ken's internals, and nothing else.

os-ken's public surface (apps, events, ``set_ev_cls``, the message classes,
``Datapath.send_msg``) is used where it is needed.  What lies behind it --
private names, attributes its own code sets, module globals we replace,
behaviour no document promises -- is reached only through this module, so
an os-ken upgrade that moves one of them breaks one place, and
``tests/openflow/test_osken_internals.py`` names the internal that moved.

What we rely on, and why:

- ``Datapath.xid`` and ``Datapath.set_xid``: the per-connection transaction
  counter.  Several threads send to one datapath and a batch takes a run of
  xids at once, so the counter is advanced here, under one lock.
- ``ofproto_v1_3_parser._MSG_PARSERS``: the parser table, whose
  multipart-reply entry ``RawFlowStats`` wraps to keep counting-table replies
  unparsed.
- ``os_ken.controller.controller.StreamServer``: the name
  ``OpenFlowController.server_loop`` looks up when it builds its listener,
  replaced to build a stoppable one; ``hub.StreamServer.server``, its
  listening socket.
- ``Datapath._recv_loop``, ``send_q`` and ``_send_q_sem``: the connection's
  receive loop, whose end wakes the send loop blocked on its queue.
- ``Datapath._recv_loop`` calling the ``ofp_event`` brick's handlers on the
  receive thread itself: ``InlineReplies`` answers waiters there.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

from os_ken.base import app_manager
from os_ken.controller import controller as ofp_controller
from os_ken.lib import hub
from os_ken.ofproto import ofproto_v1_3 as v13
from os_ken.ofproto import ofproto_v1_3_parser as v13_parser

# ---- transaction ids ------------------------------------------------------------------------

_XID_LOCK = threading.Lock()


def assign_xid(datapath: Any, msg: Any) -> int:
    """Give ``msg`` the datapath's next xid (os-ken's ``set_xid``, which is a plain increment)."""
    with _XID_LOCK:
        datapath.set_xid(msg)
    return int(msg.xid)


def reserve_xids(datapath: Any, count: int) -> list[int]:
    """``count`` consecutive xids, as ``set_xid`` would hand them out one by one."""
    with _XID_LOCK:
        first = int(datapath.xid)
        datapath.xid = (first + count) & datapath.ofproto.MAX_XID
    return [(first + n) & datapath.ofproto.MAX_XID for n in range(1, count + 1)]


# ---- the OpenFlow 1.3 parser table ---------------------------------------------------------

MsgParser = Callable[[Any, int, int, int, int, Any], Any]
"""os-ken's per-type parser: (datapath, version, msg_type, msg_len, xid, buf) -> message."""


def multipart_reply_parser() -> MsgParser:
    """The parser os-ken runs on every OpenFlow 1.3 multipart reply."""
    parsers: dict[int, MsgParser] = v13_parser._MSG_PARSERS
    return parsers[v13.OFPT_MULTIPART_REPLY]


def set_multipart_reply_parser(parser: MsgParser) -> None:
    """Make os-ken parse every OpenFlow 1.3 multipart reply with ``parser``."""
    parsers: dict[int, MsgParser] = v13_parser._MSG_PARSERS
    parsers[v13.OFPT_MULTIPART_REPLY] = parser


# ---- the listener and its connections --------------------------------------------------------


def replace_stream_server(factory: Callable[..., Any]) -> Any:
    """Have ``OpenFlowController`` build its listener with ``factory``; returns what it used."""
    original = ofp_controller.StreamServer
    ofp_controller.StreamServer = factory
    return original


def restore_stream_server(original: Any) -> None:
    ofp_controller.StreamServer = original


def listening_socket(server: hub.StreamServer) -> socket.socket:
    """The socket a ``hub.StreamServer`` accepts on."""
    sock: socket.socket = server.server
    return sock


class StoppableDatapath(ofp_controller.Datapath):  # type: ignore[misc]
    """os-ken's datapath, whose send loop ends with its receive loop."""

    def _recv_loop(self) -> None:
        try:
            super()._recv_loop()  # closes the socket when it ends
        finally:
            self._wake_send_loop()

    def _wake_send_loop(self) -> None:
        """Queue a close marker so ``_send_loop`` leaves ``send_q.get()``.

        Its ``sendall`` on the closed socket fails and it ends, as it does on
        any send error.  The marker takes a slot of os-ken's send semaphore,
        as every queued message does; when none is free the send loop is busy
        sending and ends on its own at the closed socket.
        """
        queue = self.send_q
        if queue is not None and self._send_q_sem.acquire(blocking=False):
            queue.put((b"", True))


# ---- handlers on the receive thread ----------------------------------------------------------


def openflow_brick() -> Any:
    """os-ken's ``ofp_event`` app, whose handlers each connection's receive loop calls itself.

    None when os-ken's OpenFlow handler is not running.
    """
    return app_manager.lookup_service_brick("ofp_event")
