"""OpenFlow messages as the bytes a switch receives, encoded once per content.

A policy change sends the same few flow-mods to every switch, and a
rule that moves back sends the very entries it sent before. os-ken builds
a message as a tree of objects and packs it field by field: on ten
switches that was the largest part of the controller's time per change.
A planned entry is frozen and already names its content (the cookie is a
hash of it), so its encoding is too: kept by entry, and only the
transaction id, which the channel assigns per send, is written into a
copy.
"""

from __future__ import annotations

import functools
import struct
from types import SimpleNamespace
from typing import Any, Final

from os_ken.ofproto import ofproto_v1_3 as v13
from os_ken.ofproto import ofproto_v1_3_parser as v13_parser

from controller.openflow import messages
from controller.pipeline.flows import FlowEntry, FlowKey

_XID_OFFSET: Final = 4
"""ofp_header: version (1), type (1), length (2), xid (4)."""

PROTOCOL: Final[Any] = SimpleNamespace(ofproto=v13, ofproto_parser=v13_parser, id=0)
"""What os-ken's message classes read from a datapath to encode: the protocol modules.
Encoding needs no connection, so a cached message belongs to no switch."""


def encode(msg: Any) -> bytes:
    """Any os-ken message, serialized; its xid is rewritten when it is sent."""
    msg.serialize()
    return bytes(msg.buf)


BARRIER: Final = encode(v13_parser.OFPBarrierRequest(PROTOCOL))
"""A barrier request, whose xid the channel sets like any other message's."""


@functools.lru_cache(maxsize=65_536)
def flow_add(entry: FlowEntry) -> bytes:
    return encode(messages.flow_add(PROTOCOL, entry))


@functools.lru_cache(maxsize=65_536)
def flow_delete(key: FlowKey) -> bytes:
    return encode(messages.flow_delete(PROTOCOL, key))


def with_xid(wire: bytes, xid: int) -> bytes:
    """``wire`` (one message) with its transaction id set to ``xid``."""
    stamped = bytearray(wire)
    struct.pack_into("!I", stamped, _XID_OFFSET, xid)
    return bytes(stamped)
