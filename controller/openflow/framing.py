"""OpenFlow on the wire: the 8-byte header and whole messages out of a byte stream.

A TCP (or TLS) stream carries messages back to back, each one's length in its
header; a read ends anywhere, so bytes are kept until a message is whole.
Nothing here does I/O or keeps a clock: the hub feeds what it read and gets
whole messages back.  No os-ken either: building and reading messages with its
classes goes through ``osken_internals`` (``encode``, ``parse``).
"""

from __future__ import annotations

import struct
from typing import Final

HEADER: Final = struct.Struct("!BBHI")
"""ofp_header: version, type, length (of the whole message), xid."""

_XID: Final = struct.Struct("!I")
_XID_OFFSET: Final = 4

OFP_VERSION: Final = 4
"""OpenFlow 1.3, the only version flowlane speaks."""

HELLO: Final = 0
ERROR: Final = 1
ECHO_REQUEST: Final = 2
ECHO_REPLY: Final = 3
FEATURES_REQUEST: Final = 5
FEATURES_REPLY: Final = 6

ERROR_HELLO_FAILED: Final = 0
HELLO_FAILED_INCOMPATIBLE: Final = 0
HELLO_ELEMENT_VERSIONBITMAP: Final = 1

FEATURES: Final = struct.Struct("!QIBB2xII")
"""ofp_switch_features after the header: datapath_id, n_buffers, n_tables, auxiliary_id,
pad, capabilities, reserved."""


class FramingError(ValueError):
    """The stream cannot be split into messages: the connection must go."""


def header(message: bytes | bytearray | memoryview) -> tuple[int, int, int, int]:
    """(version, type, length, xid) of the message at the start of ``message``."""
    if len(message) < HEADER.size:
        raise FramingError(f"{len(message)} bytes is shorter than an OpenFlow header")
    version, kind, length, xid = HEADER.unpack_from(message)
    return int(version), int(kind), int(length), int(xid)


def with_xid(message: bytes, xid: int) -> bytes:
    """``message`` (one or more whole messages: the first one's header) with xid ``xid``."""
    stamped = bytearray(message)
    _XID.pack_into(stamped, _XID_OFFSET, xid & 0xFFFFFFFF)
    return bytes(stamped)


def message(kind: int, xid: int = 0, body: bytes = b"", version: int = OFP_VERSION) -> bytes:
    """A message of ``kind`` with ``body``; the hub's own (HELLO, ECHO, FEATURES_REQUEST)."""
    return HEADER.pack(version, kind, HEADER.size + len(body), xid) + body


class Framer:
    """Bytes in, whole messages out, in order.

    Only the length is checked here (a length below the header's 8 bytes can
    never advance the stream); what a version or a type means is the hub's
    business, since during the handshake a HELLO of another version is legal.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Every message ``data`` completes; the rest is kept for the next feed."""
        buffer = self._buffer
        buffer += data
        messages: list[bytes] = []
        start = 0
        end = len(buffer)
        while end - start >= HEADER.size:
            _, _, length, _ = HEADER.unpack_from(buffer, start)
            if length < HEADER.size:
                raise FramingError(f"message length {length} is shorter than its header")
            if end - start < length:
                break
            messages.append(bytes(buffer[start : start + length]))
            start += length
        if start:
            # One cut per feed, not per message: many small messages in one read cost O(n).
            del buffer[:start]
        return messages

    @property
    def buffered(self) -> int:
        """Bytes of a message not yet whole."""
        return len(self._buffer)


def speaks_13(version: int, hello: bytes) -> bool:
    """Whether the peer's HELLO lets both sides use OpenFlow 1.3.

    With a version bitmap element the peer names every version it speaks;
    without one it speaks its header's version and, by the spec, every one
    below that we might choose.
    """
    offset = HEADER.size
    while offset + 4 <= len(hello):
        kind = int.from_bytes(hello[offset : offset + 2], "big")
        length = int.from_bytes(hello[offset + 2 : offset + 4], "big")
        if length < 4:
            break
        if kind == HELLO_ELEMENT_VERSIONBITMAP:
            bitmap = hello[offset + 4 : offset + length]
            word = OFP_VERSION // 32
            if len(bitmap) < 4 * (word + 1):
                return False
            bits = int.from_bytes(bitmap[4 * word : 4 * word + 4], "big")
            return bool(bits & (1 << (OFP_VERSION % 32)))
        offset += (length + 7) // 8 * 8
    return version >= OFP_VERSION


def hello_failed(version: int, text: str) -> bytes:
    """OFPT_ERROR HELLO_FAILED/INCOMPATIBLE with an ASCII reason, for a peer of ``version``.

    In the peer's own version when it is older, so that a 1.0 switch reads it: every
    version has this error's layout and codes.
    """
    own = version if 1 <= version < OFP_VERSION else OFP_VERSION
    body = struct.pack("!HH", ERROR_HELLO_FAILED, HELLO_FAILED_INCOMPATIBLE)
    return message(ERROR, 0, body + text.encode("ascii", "replace"), version=own)
