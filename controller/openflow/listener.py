"""os-ken's OpenFlow listener and switch connections, made stoppable on the native hub.

With ``OSKEN_HUB_TYPE=native`` (the default), os-ken runs on plain,
non-daemon threads and ``hub.kill`` does nothing, so nothing it starts can
be stopped from outside:

- the listening ``StreamServer`` blocks in ``accept()`` for ever;
- a switch connection has a receive loop and a send loop.  When the
  receive loop ends (the switch hung up), ``Datapath.serve`` joins the send
  loop, which blocks in ``send_q.get()`` until something else is sent.  So a
  disconnect is noticed (``DEAD_DISPATCHER``) only when the next request
  goes out, and a process with a switch connected cannot exit.

This module replaces the ``StreamServer`` that os-ken's ``OpenFlowController``
builds with one whose ``accept`` loop ends on ``stop``, serves each switch
with a ``Datapath`` whose receive loop wakes the send loop when it ends, and
keeps every connection so that ``stop`` can shut its socket (which wakes a
blocked ``recv`` or ``sendall`` at once).  os-ken then closes each datapath
the usual way: the apps see ``DEAD_DISPATCHER`` for every switch.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import socket
import ssl
import threading
import time
from typing import Any

from os_ken.lib import hub

from controller.openflow.osken_internals import (
    StoppableDatapath,
    listening_socket,
    replace_stream_server,
    restore_stream_server,
)

LOG = logging.getLogger("flowlane.controller")


class Listener:
    """The OpenFlow listener of this process and every switch connection it serves."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stopping = False
        self._servers: list[_Server] = []
        self._datapaths: set[Any] = set()
        self._threads: set[threading.Thread] = set()
        self._original: Any = None

    @property
    def stopping(self) -> bool:
        return self._stopping

    def install(self) -> None:
        """Make os-ken build our server (call before ``AppManager.instantiate_apps``).

        ``OpenFlowController.server_loop`` looks ``StreamServer`` up in its
        module when it runs; replacing that one name is the whole hook.
        """
        self._original = replace_stream_server(functools.partial(_Server, self))

    def uninstall(self) -> None:
        if self._original is not None:
            restore_stream_server(self._original)
            self._original = None

    def stop(self, timeout_s: float) -> None:
        """Stop accepting, hang up every switch, and wait (at most ``timeout_s``) for each
        connection to end.  Switches keep their flows (``fail-mode=secure``)."""
        with self._lock:
            self._stopping = True
            servers, datapaths = list(self._servers), list(self._datapaths)
        for server in servers:
            server.close()
        for datapath in datapaths:
            with contextlib.suppress(OSError):
                datapath.socket.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + timeout_s
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        left = [thread.name for thread in threads if thread.is_alive()]
        if left:
            LOG.warning("switch connections still closing after %g s: %s", timeout_s, left)

    # ---- called by _Server ----------------------------------------------------------

    def _add_server(self, server: _Server) -> bool:
        with self._lock:
            if self._stopping:
                return False
            self._servers.append(server)
            return True

    def _spawn(self, handle: Any, sock: socket.socket, address: Any) -> None:
        # A daemon: it ends when ``stop`` shuts its socket; one still in a TLS handshake
        # has no datapath to shut yet, and must not keep the process alive for it.
        thread = threading.Thread(
            target=self._run_connection,
            args=(handle, sock, address),
            name=f"ofp-{address[0]}:{address[1]}" if isinstance(address, tuple) else "ofp",
            daemon=True,
        )
        with self._lock:
            if self._stopping:
                sock.close()
                return
            self._threads.add(thread)
        thread.start()

    def _run_connection(self, handle: Any, sock: socket.socket, address: Any) -> None:
        try:
            handle(sock, address)
        except ssl.SSLError as exc:
            # A switch without a certificate of our CA, or a port scan: refused, not a fault.
            LOG.warning(
                "refused a switch connection from %s: TLS handshake failed: %s", address, exc
            )
            with contextlib.suppress(OSError):
                sock.close()
        except Exception:
            LOG.exception("switch connection from %s failed", address)
        finally:
            with self._lock:
                self._threads.discard(threading.current_thread())

    def serve_switch(self, sock: Any, address: Any) -> None:
        """os-ken's ``datapath_connection_factory``, with our datapath and its bookkeeping."""
        with contextlib.closing(StoppableDatapath(sock, address)) as datapath:
            with self._lock:
                if self._stopping:
                    return
                self._datapaths.add(datapath)
            try:
                datapath.serve()
            finally:
                with self._lock:
                    self._datapaths.discard(datapath)


class _Server(hub.StreamServer):  # type: ignore[misc]
    """os-ken's ``StreamServer`` (TLS included), with an ``accept`` loop that ``close`` ends."""

    def __init__(
        self, listener: Listener, listen_info: Any, handle: Any = None, **kwargs: Any
    ) -> None:
        # ``handle`` is os-ken's datapath factory; ours does the same with a stoppable datapath.
        del handle
        super().__init__(listen_info, listener.serve_switch, **kwargs)
        self._listener = listener
        if not listener._add_server(self):
            self.close()

    def serve_forever(self) -> None:
        while not self._listener.stopping:
            try:
                sock, address = listening_socket(self).accept()
            except OSError:
                if self._listener.stopping:
                    return
                raise
            self._listener._spawn(self.handle, sock, address)

    def close(self) -> None:
        # shutdown() wakes a thread blocked in accept() (Linux); close() alone would not.
        server = listening_socket(self)
        with contextlib.suppress(OSError):
            server.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            server.close()
