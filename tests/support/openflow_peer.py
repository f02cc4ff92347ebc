"""A scripted OpenFlow 1.3 switch, for controller tests that need no Open vSwitch.

It answers the handshake (HELLO, FEATURES with the datapath id it claims), echoes, every
multipart request (an empty reply of the asked type: a switch with an empty flow table),
role requests (granted) and barriers, so the controller takes it for a switch that accepts
every flow mod.  It reads until the controller hangs up, which is what the tests wait for.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading

HEADER = struct.Struct("!BBHI")
HELLO, ECHO_REQUEST, ECHO_REPLY, FEATURES_REQUEST, FEATURES_REPLY = 0, 2, 3, 5, 6
MULTIPART_REQUEST, MULTIPART_REPLY, BARRIER_REQUEST, BARRIER_REPLY = 18, 19, 20, 21
ROLE_REQUEST, ROLE_REPLY = 24, 25


class ScriptedSwitch:
    """Speaks OpenFlow 1.3 as ``dpid`` over ``sock`` (plain TCP or TLS) until hung up."""

    def __init__(self, sock: socket.socket, dpid: int) -> None:
        self.sock = sock
        self.dpid = dpid
        self.hung_up = threading.Event()
        self.sock.sendall(HEADER.pack(4, HELLO, 8, 1))
        threading.Thread(target=self._run, daemon=True).start()

    @classmethod
    def connect(cls, port: int, dpid: int) -> ScriptedSwitch:
        """A switch connected over plain TCP to the controller on 127.0.0.1:``port``."""
        return cls(socket.create_connection(("127.0.0.1", port), timeout=10), dpid)

    def _reply(self, kind: int, xid: int, body: bytes = b"") -> None:
        self.sock.sendall(HEADER.pack(4, kind, 8 + len(body), xid) + body)

    def _run(self) -> None:
        buffer = b""
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                self.hung_up.set()
                return
            buffer += data
            while len(buffer) >= HEADER.size:
                _, kind, length, xid = HEADER.unpack_from(buffer)
                if len(buffer) < length:
                    break
                message, buffer = buffer[:length], buffer[length:]
                with contextlib.suppress(OSError):  # hung up meanwhile: the next recv says so
                    if kind == FEATURES_REQUEST:
                        body = struct.pack("!QIBB2xII", self.dpid, 0, 254, 0, 0, 0)
                        self._reply(FEATURES_REPLY, xid, body)
                    elif kind == ECHO_REQUEST:
                        self._reply(ECHO_REPLY, xid)
                    elif kind == MULTIPART_REQUEST:  # an empty reply of the asked type
                        self._reply(MULTIPART_REPLY, xid, message[8:10] + b"\0" * 6)
                    elif kind == BARRIER_REQUEST:
                        self._reply(BARRIER_REPLY, xid)
                    elif kind == ROLE_REQUEST:  # granted, whatever the generation
                        self._reply(ROLE_REPLY, xid, message[8:24])

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
