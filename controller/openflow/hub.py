"""Every OpenFlow connection of the controller, served by one selector thread.

os-ken serves each switch with a receive thread and a send thread of its own,
so the controller's thread count grew with its switches. Here one thread
(``openflow-hub``) waits on the listening sockets and every connection at
once: it accepts, runs the TLS handshake without blocking, says HELLO, asks
for the switch's features, answers echoes, cuts the byte stream into whole
messages and writes what other threads queued, as far as each socket takes
it. os-ken is used only to build and read messages (``osken_internals``).

Other threads talk to a connection through ``Connection.send`` and
``close``: both only queue under a small lock and wake the hub through a
socket pair, so none of them ever waits for a switch. The handler's
callbacks run on the hub thread, in order for each connection, and must not
block (they tell actors).
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, Protocol

from controller.openflow import framing
from controller.openflow.framing import FramingError
from controller.openflow.hub_connection import CLOSED_BY_CONTROLLER, HubConnection, Stage, Wakeup
from controller.openflow.osken_internals import encode

__all__ = ["Connection", "Hub", "HubConnection", "HubHandler", "encode"]

LOG = logging.getLogger("flowlane.controller")

HANDSHAKE_TIMEOUT_S: Final = 5.0
"""From accept to FEATURES_REPLY (TLS included): a peer that has not become a switch by
then is a port scan or a stuck client, and holds a socket for nothing."""

_READ_SIZE: Final = 256 << 10
_READ_BUDGET: Final = 1 << 20
"""Bytes read from one connection per round, so one busy switch cannot starve the others;
the rest is read in the next round, which then does not wait in ``select``."""
_ACCEPT_BATCH: Final = 64
_ACCEPT_PAUSE_S: Final = 0.5
"""After accept fails (out of file descriptors), how long the listener is left alone: its
socket stays readable, and retrying at once would spin."""


class Connection(Protocol):
    """One switch, as the handler sees it."""

    dpid: int
    address: str
    n_tables: int

    def send(self, data: bytes) -> bool:
        """Queue whole encoded messages (xids set); any thread, never blocks.
        False once the connection is closed or closing."""
        ...

    def close(self) -> None:
        """Hang up (after writing what is queued, as far as the socket takes it at once);
        any thread. ``disconnected`` follows, once."""
        ...

    def peer_certificate(self) -> bytes | None:
        """The switch's certificate (DER) over TLS; None over TCP."""
        ...

    def datapath(self) -> Any:
        """What os-ken's OpenFlow 1.3 message classes accept as ``datapath``."""
        ...


class HubHandler(Protocol):
    """The hub's callbacks, all on the hub thread: none may block."""

    def connected(self, conn: Connection) -> None:
        """After FEATURES_REPLY, before any other message of ``conn``."""
        ...

    def received(self, conn: Connection, data: bytes) -> None:
        """One whole message; HELLO and ECHO are handled by the hub and never passed."""
        ...

    def disconnected(self, conn: Connection) -> None:
        """Exactly once per ``connected``."""
        ...


class Hub:
    """The OpenFlow listener(s) and every switch connection, on one thread."""

    def __init__(
        self,
        handler: HubHandler,
        listen: Sequence[tuple[str, int]],
        tls: ssl.SSLContext | None = None,
        echo_interval_s: float = 5.0,
        echo_timeout_s: float = 15.0,
        handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S,
    ) -> None:
        self._handler = handler
        self._listen = list(listen)
        self._tls = tls
        self.echo_interval_s = echo_interval_s
        self.echo_timeout_s = echo_timeout_s
        self.handshake_timeout_s = handshake_timeout_s
        self._tick = max(0.005, min(0.5, echo_interval_s / 4, echo_timeout_s / 4))
        self._tick = min(self._tick, max(0.005, handshake_timeout_s / 4))
        self._servers: list[socket.socket] = []
        self._ports: list[int] = []
        self._conns: set[HubConnection] = set()
        self._ready: set[HubConnection] = set()
        """Connections with bytes left to read (budget spent, or held by TLS)."""
        self._lock = threading.Lock()
        self._pending: set[HubConnection] = set()
        """Connections other threads sent to or closed since the hub last looked."""
        self._woken = False
        self._stopping = False
        self._selector: selectors.BaseSelector | None = None
        self._wakeup: Wakeup | None = None
        self._thread: threading.Thread | None = None
        self._accept_paused_until: float | None = None

    # ---- life cycle (any thread) ---------------------------------------------------

    def start(self) -> None:
        """Bind every listen address, then start the hub thread.

        Raises ``OSError`` naming the address when one cannot be bound; then
        nothing is left listening.
        """
        if self._thread is not None:
            raise RuntimeError("the OpenFlow hub is already started")
        try:
            for host, port in self._listen:
                self._servers.append(_listen(host, port))
        except OSError:
            for server in self._servers:
                server.close()
            self._servers = []
            raise
        self._ports = [int(server.getsockname()[1]) for server in self._servers]
        self._selector = selectors.DefaultSelector()
        self._wakeup = Wakeup()
        self._selector.register(self._wakeup.reader, selectors.EVENT_READ, None)
        for server in self._servers:
            self._selector.register(server, selectors.EVENT_READ, server)
        self._thread = threading.Thread(target=self._run, name="openflow-hub", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 1.0) -> None:
        """Close every connection (``disconnected`` for each connected one) and the
        listeners, and wait at most ``timeout_s`` for the hub thread to end."""
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
        thread = self._thread
        if thread is None:
            return
        wakeup = self._wakeup
        if wakeup is not None:
            wakeup.poke()
        if thread is not threading.current_thread():
            thread.join(timeout_s)
            if thread.is_alive():
                LOG.warning("the OpenFlow hub thread is still running %g s after stop", timeout_s)

    @property
    def running(self) -> bool:
        """Whether the hub thread runs (false before ``start``, after ``stop``, and after the
        thread failed: the process then serves no switch)."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def ports(self) -> list[int]:
        """The bound port of each listen address, in order (empty before ``start``)."""
        return list(self._ports)

    def _wake(self, conn: HubConnection) -> None:
        """Have the hub look at ``conn`` (queued bytes, or a close) soon."""
        with self._lock:
            self._pending.add(conn)
            if self._woken or threading.current_thread() is self._thread:
                return  # the hub looks at ``_pending`` before it waits again
            self._woken = True
        wakeup = self._wakeup  # None once the hub has stopped
        if wakeup is not None:
            wakeup.poke()

    # ---- the hub thread ------------------------------------------------------------

    def _run(self) -> None:
        assert self._selector is not None and self._wakeup is not None
        selector, wakeup = self._selector, self._wakeup
        next_check = time.monotonic() + self._tick
        try:
            while not self._stopping:
                # Callbacks on this thread may have sent: those are in ``_pending`` unannounced.
                busy = self._ready or self._pending
                timeout = 0.0 if busy else max(0.0, next_check - time.monotonic())
                events = selector.select(timeout)
                now = time.monotonic()
                for key, mask in events:
                    owner = key.data
                    if owner is None:
                        wakeup.drain()
                    elif isinstance(owner, HubConnection):
                        self._serve(owner, mask, now)
                    else:
                        self._accept(owner, now)
                for conn in list(self._ready):
                    self._ready.discard(conn)
                    if not conn.closed:
                        self._read(conn, now)
                self._take_pending()
                if now >= next_check:
                    self._check_timers(now)
                    next_check = now + self._tick
        except Exception:
            LOG.exception("the OpenFlow hub failed; closing every switch connection")
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        for conn in list(self._conns):
            self._close(conn, "the controller is stopping", flush=True)
        for server in self._servers:
            with contextlib.suppress(OSError):
                server.close()
        if self._selector is not None:
            self._selector.close()
        with self._lock:
            self._stopping = True
            wakeup, self._wakeup = self._wakeup, None
        if wakeup is not None:
            wakeup.close()

    def _take_pending(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, set()
            self._woken = False
        for conn in pending:
            if conn.closed:
                continue
            reason = conn.closing
            if reason is not None:
                self._close(conn, reason, flush=True, warn=reason != CLOSED_BY_CONTROLLER)
            elif conn.stage != Stage.TLS_HANDSHAKE:
                self._flush(conn)

    def _accept(self, server: socket.socket, now: float) -> None:
        for _ in range(_ACCEPT_BATCH):
            try:
                sock, peer = server.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                LOG.warning("cannot accept a switch connection: %s", exc)
                self._pause_accept(now)
                return
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self._tls is not None:
                    sock = self._tls.wrap_socket(
                        sock, server_side=True, do_handshake_on_connect=False
                    )
            except (OSError, ValueError) as exc:
                LOG.warning("cannot set up the connection from %s: %s", _host_port(peer), exc)
                sock.close()
                continue
            deadline = now + self.handshake_timeout_s
            conn = HubConnection(sock, _host_port(peer), now, deadline, self._wake)
            self._conns.add(conn)
            self._set_events(conn, selectors.EVENT_READ)
            LOG.debug("connection from %s", conn.address)
            if conn.stage == Stage.HELLO:
                self._say_hello(conn)

    def _pause_accept(self, now: float) -> None:
        assert self._selector is not None
        for server in self._servers:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(server)
        self._accept_paused_until = now + _ACCEPT_PAUSE_S

    def _resume_accept(self) -> None:
        assert self._selector is not None
        self._accept_paused_until = None
        for server in self._servers:
            self._selector.register(server, selectors.EVENT_READ, server)

    def _serve(self, conn: HubConnection, mask: int, now: float) -> None:
        if conn.closed:
            return
        if conn.stage == Stage.TLS_HANDSHAKE:
            self._tls_handshake(conn, now)
            return
        if mask & selectors.EVENT_READ or (conn.read_wants_write and mask & selectors.EVENT_WRITE):
            self._read(conn, now)
        if not conn.closed and (
            mask & selectors.EVENT_WRITE or (conn.write_wants_read and mask & selectors.EVENT_READ)
        ):
            self._flush(conn)

    def _tls_handshake(self, conn: HubConnection, now: float) -> None:
        sock = conn.sock
        assert isinstance(sock, ssl.SSLSocket)
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            self._set_events(conn, selectors.EVENT_READ)
            return
        except ssl.SSLWantWriteError:
            self._set_events(conn, selectors.EVENT_READ | selectors.EVENT_WRITE)
            return
        except (ssl.SSLError, OSError) as exc:
            reason = getattr(exc, "reason", None) or exc
            LOG.warning(
                "refused a switch connection from %s: TLS handshake failed: %s",
                conn.address,
                reason,
            )
            self._close(conn, f"TLS handshake failed: {reason}")
            return
        conn.address = f"{conn.address} over {sock.version()}"
        conn.set_certificate(sock.getpeercert(binary_form=True))
        conn.stage = Stage.HELLO
        self._set_events(conn, selectors.EVENT_READ)
        self._say_hello(conn)
        if not conn.closed:
            self._read(conn, now)  # the switch's HELLO may have come with its last flight

    def _say_hello(self, conn: HubConnection) -> None:
        conn.queue(framing.message(framing.HELLO))
        self._flush(conn)

    def _read(self, conn: HubConnection, now: float) -> None:
        budget = _READ_BUDGET
        sock = conn.sock
        if conn.read_wants_write:
            conn.read_wants_write = False
            self._watch(conn)
        while budget > 0:
            try:
                data = sock.recv(_READ_SIZE)
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError):
                return
            except ssl.SSLWantWriteError:
                conn.read_wants_write = True
                self._watch(conn)
                return
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                data = b""
            except OSError as exc:
                self._close(conn, f"read failed: {exc}")
                return
            if not data:
                self._close(conn, "closed by the switch")
                return
            budget -= len(data)
            conn.last_rx = now
            conn.echo_sent = None
            try:
                messages = conn.framer.feed(data)
            except FramingError as exc:
                self._protocol_error(conn, str(exc))
                return
            for message in messages:
                self._dispatch(conn, message)
                if conn.closed or conn.closing is not None:
                    return
        self._ready.add(conn)

    def _dispatch(self, conn: HubConnection, message: bytes) -> None:
        version, kind, _, xid = framing.header(message)
        if conn.stage == Stage.HELLO:
            self._hello(conn, version, kind, message)
            return
        if version != framing.OFP_VERSION:
            self._protocol_error(conn, f"message of OpenFlow version {version} (type {kind})")
            return
        if kind == framing.ECHO_REQUEST:
            conn.queue(framing.message(framing.ECHO_REPLY, xid, message[framing.HEADER.size :]))
            self._flush(conn)
        elif kind in (framing.ECHO_REPLY, framing.HELLO):
            pass  # liveness (any byte counts), or a repeated HELLO
        elif conn.stage == Stage.OPEN:
            self._call(self._handler.received, conn, message)
        elif kind == framing.FEATURES_REPLY:
            self._features(conn, message)
        elif kind == framing.ERROR:
            self._protocol_error(conn, f"error during the handshake: {message[8:12].hex()}")
        else:
            LOG.debug("%s: ignored message type %d during the handshake", conn.address, kind)

    def _hello(self, conn: HubConnection, version: int, kind: int, message: bytes) -> None:
        if kind != framing.HELLO:
            self._protocol_error(conn, f"message type {kind} before HELLO")
            return
        if not framing.speaks_13(version, message):
            text = (
                f"no common OpenFlow version: the switch offers version {version}"
                " (or a bitmap without 1.3) and flowlane speaks only OpenFlow 1.3 (version 4)"
            )
            LOG.warning("refused a switch connection from %s: %s", conn.address, text)
            conn.queue(framing.hello_failed(version, text))
            self._close(conn, "no common OpenFlow version", flush=True)
            return
        conn.stage = Stage.FEATURES
        conn.queue(framing.message(framing.FEATURES_REQUEST))
        self._flush(conn)

    def _features(self, conn: HubConnection, message: bytes) -> None:
        if len(message) < framing.HEADER.size + framing.FEATURES.size:
            self._protocol_error(conn, f"FEATURES_REPLY of {len(message)} bytes")
            return
        dpid, _, n_tables, _, _, _ = framing.FEATURES.unpack_from(message, framing.HEADER.size)
        conn.dpid, conn.n_tables = int(dpid), int(n_tables)
        conn.stage = Stage.OPEN
        LOG.debug("%s is datapath %016x (%d tables)", conn.address, conn.dpid, conn.n_tables)
        self._call(self._handler.connected, conn)

    def _flush(self, conn: HubConnection) -> None:
        """Write what is queued until the socket takes no more; then watch for writability
        while anything is left."""
        sock = conn.sock
        conn.write_wants_read = False
        while True:
            head = conn.head()
            if head is None:
                break
            try:
                count = sock.send(head)
            except (BlockingIOError, InterruptedError):
                break
            except ssl.SSLWantWriteError:
                conn.write_retry = True
                break
            except ssl.SSLWantReadError:
                conn.write_retry = conn.write_wants_read = True
                break
            except OSError as exc:
                self._close(conn, f"write failed: {exc}")
                return
            finally:
                head.release()
            conn.write_retry = False
            conn.wrote(count)
        self._watch(conn)

    def _watch(self, conn: HubConnection) -> None:
        """Readability always; writability while bytes wait for it (not for readability)."""
        backlog = conn.backlog > 0 and not conn.write_wants_read
        writable = backlog or conn.read_wants_write
        self._set_events(conn, selectors.EVENT_READ | (selectors.EVENT_WRITE if writable else 0))

    def _check_timers(self, now: float) -> None:
        if self._accept_paused_until is not None and now >= self._accept_paused_until:
            self._resume_accept()
        for conn in list(self._conns):
            if conn.stage != Stage.OPEN:
                if now >= conn.deadline:
                    self._protocol_error(
                        conn, f"no OpenFlow handshake within {self.handshake_timeout_s:g} s"
                    )
            elif conn.echo_sent is not None:
                if now - conn.echo_sent >= self.echo_timeout_s:
                    self._protocol_error(
                        conn, f"silent for {self.echo_timeout_s:g} s after an echo request"
                    )
            elif now - conn.last_rx >= self.echo_interval_s:
                conn.echo_sent = now
                conn.queue(framing.message(framing.ECHO_REQUEST))
                self._flush(conn)

    def _protocol_error(self, conn: HubConnection, reason: str) -> None:
        LOG.warning("closing the switch connection from %s: %s", conn.address, reason)
        self._close(conn, reason)

    def _close(
        self, conn: HubConnection, reason: str, *, flush: bool = False, warn: bool = False
    ) -> None:
        if conn.closed:
            return
        conn.mark_closing(reason)
        if flush and conn.stage != Stage.TLS_HANDSHAKE:
            self._flush(conn)  # what is queued, as far as the socket takes it now
            if conn.closed:
                return  # the write failed and closed it
        if warn:
            LOG.warning("closing the switch connection from %s: %s", conn.address, reason)
        was_open = conn.stage == Stage.OPEN
        conn.stage = Stage.CLOSED
        self._conns.discard(conn)
        self._ready.discard(conn)
        if self._selector is not None and conn.events:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(conn.sock)
        conn.events = 0
        with contextlib.suppress(OSError):
            conn.sock.close()
        LOG.debug("closed the connection from %s: %s", conn.address, reason)
        if was_open:
            self._call(self._handler.disconnected, conn)

    def _set_events(self, conn: HubConnection, events: int) -> None:
        if conn.closed or events == conn.events:
            return
        assert self._selector is not None
        if conn.events:
            self._selector.modify(conn.sock, events, conn)
        else:
            self._selector.register(conn.sock, events, conn)
        conn.events = events

    def _call(self, callback: Callable[..., None], conn: Connection, *args: Any) -> None:
        """A handler callback; its failure is logged and the hub goes on."""
        try:
            callback(conn, *args)
        except Exception:
            LOG.exception("the OpenFlow handler failed on %s", conn.address)


def _listen(host: str, port: int) -> socket.socket:
    """A non-blocking listening socket on ``host:port``, or OSError naming the address."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        server = socket.create_server((host, port), family=family, backlog=socket.SOMAXCONN)
    except OSError as exc:
        raise OSError(
            exc.errno, f"cannot listen for OpenFlow on {host}:{port}: {exc.strerror or exc}"
        ) from exc
    server.setblocking(False)
    return server


def _host_port(peer: Any) -> str:
    host, port = peer[:2]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
