"""One switch connection of the OpenFlow hub: its stage, and the bytes queued for it.

``send`` and ``close`` are called from any thread and only queue under the
connection's small lock, then ask the hub (``wake``) to look; everything
else is the hub thread's own. Queued messages are kept as they came and
joined into larger writes only when written, so a sender never copies more
than its own message.
"""

from __future__ import annotations

import contextlib
import enum
import socket
import ssl
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Final

from controller.openflow.framing import Framer
from controller.openflow.osken_internals import CodecDatapath


class Stage(enum.Enum):
    """Where a connection is, in the order it goes through them."""

    TLS_HANDSHAKE = "tls-handshake"
    HELLO = "hello"
    FEATURES = "features"
    OPEN = "open"
    """``connected`` was called: ``disconnected`` is owed."""
    CLOSED = "closed"


CLOSED_BY_CONTROLLER: Final = "closed by the controller"

MAX_BACKLOG: Final = 64 << 20
"""Bytes queued for one switch beyond which it counts as not reading: the connection is
closed rather than let the controller's memory grow with a stuck peer."""

WRITE_CHUNK: Final = 64 << 10
"""Small queued messages are joined into writes of up to this size: one system call (and
one TLS record) for a burst of flow-mods rather than one each."""

Wake = Callable[["HubConnection"], None]
"""Tells the hub to look at a connection (bytes queued, or a close asked)."""


class HubConnection:
    """A switch connection; everything but ``send``/``close``/the getters is the hub
    thread's own."""

    def __init__(
        self, sock: socket.socket, address: str, now: float, deadline: float, wake: Wake
    ) -> None:
        self.dpid = 0
        self.address = address
        self.n_tables = 0
        self.sock = sock
        self.stage = Stage.TLS_HANDSHAKE if isinstance(sock, ssl.SSLSocket) else Stage.HELLO
        self.framer = Framer()
        self.events = 0
        """What the selector watches for this socket now."""
        self.deadline = deadline
        """When the handshake must have ended."""
        self.last_rx = now
        """When the switch last sent anything (any byte shows it is alive)."""
        self.echo_sent: float | None = None
        self.write_retry = False
        """A TLS write must be retried with the same bytes: the head chunk stays as it is."""
        self.write_wants_read = False
        self.read_wants_write = False
        """TLS wants to write before it can read more (renegotiation): read on writability."""
        self._wake = wake
        self._lock = threading.Lock()
        self._out: deque[bytes] = deque()
        self._offset = 0
        self._backlog = 0
        self._closing: str | None = None
        self._cert: bytes | None = None

    # ---- any thread --------------------------------------------------------------

    def send(self, data: bytes) -> bool:
        with self._lock:
            if self._closing is not None:
                return False
            if self._backlog + len(data) > MAX_BACKLOG:
                self._closing = f"it stopped reading ({self._backlog} bytes queued)"
                too_much = True
            else:
                too_much = False
                if data:
                    self._out.append(bytes(data))
                    self._backlog += len(data)
        self._wake(self)
        return not too_much

    def close(self) -> None:
        with self._lock:
            if self._closing is not None:
                return
            self._closing = CLOSED_BY_CONTROLLER
        self._wake(self)

    def peer_certificate(self) -> bytes | None:
        return self._cert

    def datapath(self) -> Any:
        # A new one each call: cached, it would be written by whichever thread asked first.
        return CodecDatapath(self.dpid)

    def __repr__(self) -> str:
        return f"HubConnection({self.address}, dpid={self.dpid:016x}, {self.stage.value})"

    # ---- the hub thread ----------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Closed by the hub (a stage others may read: it only ever moves forward)."""
        return self.stage is Stage.CLOSED

    @property
    def closing(self) -> str | None:
        """Why the connection must close (asked by ``close``, or its backlog); None: it may live."""
        with self._lock:
            return self._closing

    @property
    def backlog(self) -> int:
        with self._lock:
            return self._backlog

    def mark_closing(self, reason: str) -> None:
        with self._lock:
            if self._closing is None:
                self._closing = reason

    def queue(self, data: bytes) -> None:
        """The hub's own messages (HELLO, echo, errors), queued even while closing."""
        with self._lock:
            self._out.append(data)
            self._backlog += len(data)

    def head(self) -> memoryview | None:
        """The bytes to write next, small messages joined; None when nothing is queued."""
        with self._lock:
            out = self._out
            if not out:
                return None
            if not self.write_retry and self._offset == 0 and len(out) > 1:
                size = len(out[0])
                if size < WRITE_CHUNK:
                    pieces = [out.popleft()]
                    while out and size + len(out[0]) <= WRITE_CHUNK:
                        size += len(out[0])
                        pieces.append(out.popleft())
                    out.appendleft(b"".join(pieces))
            return memoryview(out[0])[self._offset :]

    def wrote(self, count: int) -> None:
        with self._lock:
            self._backlog -= count
            self._offset += count
            if self._offset >= len(self._out[0]):
                self._out.popleft()
                self._offset = 0

    def set_certificate(self, der: bytes | None) -> None:
        self._cert = der


class Wakeup:
    """A socket pair the hub's selector watches: any thread writes a byte to end its wait."""

    def __init__(self) -> None:
        self.reader, self.writer = socket.socketpair()
        self.reader.setblocking(False)
        self.writer.setblocking(False)

    def poke(self) -> None:
        # A full pair already has a byte to be read: the hub is awake either way.
        with contextlib.suppress(OSError):
            self.writer.send(b"\0")

    def drain(self) -> None:
        with contextlib.suppress(OSError):
            while self.reader.recv(4096):
                pass

    def close(self) -> None:
        self.reader.close()
        self.writer.close()
