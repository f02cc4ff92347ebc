"""os-ken as flowlane uses it, beyond its documented message classes: one place.

os-ken is only a codec now: the hub (``controller.openflow.hub``) owns the
sockets, and no os-ken app, ``Datapath`` or event loop runs.  Its message
classes (``OFPFlowMod``, ``OFPMatch``...) are its documented surface and are
used wherever a message is built or read.  What lies behind them -- what a
message class reads from its ``datapath``, the module function that turns
bytes into a message, the method that turns a message into bytes -- is
reached only through this module, so an os-ken upgrade that moves one of
them breaks one place, and ``tests/openflow/test_osken_internals.py`` names
what moved.

What we rely on, and why:

- A stand-in for ``os_ken.controller.controller.Datapath`` (which needs a
  socket): os-ken's OpenFlow 1.3 classes read only ``datapath.ofproto`` (the
  version and header layout when serializing) and ``datapath.ofproto_parser``
  (nested classes), and keep ``datapath`` on the message.  ``CodecDatapath``
  is that stand-in, for the hub, the switch codec and the simulated switch.
- ``os_ken.ofproto.ofproto_parser.msg``: bytes of one message to os-ken's
  message object, dispatched on version and type (it logs and returns None
  when a body does not parse; ``parse`` raises instead).
- ``MsgBase.serialize`` filling ``msg.buf`` with the whole message, its
  header's xid 0 when none was set: ``encode`` writes the caller's xid into
  the bytes, since the switch actor, not a ``Datapath``, owns the counter.
- ``ofproto_v1_3.oxm_types`` and ``oxm_fields.OpenFlowBasic``: os-ken's table
  of OXM fields, whose numbers and names (the names ``OFPMatch`` takes) the
  audit's raw decoder (``installed``) reads matches with.
"""

from __future__ import annotations

from typing import Any, Final

from os_ken.ofproto import ofproto_parser as osken_parser
from os_ken.ofproto import ofproto_v1_3 as v13
from os_ken.ofproto import ofproto_v1_3_parser as v13_parser
from os_ken.ofproto.oxm_fields import OpenFlowBasic

from controller.openflow.framing import HEADER, header, with_xid

__all__ = ["DATAPATH", "CodecDatapath", "ParseError", "basic_oxm_fields", "encode", "parse"]


class CodecDatapath:
    """What os-ken's OpenFlow 1.3 message classes read from ``datapath``: the protocol
    modules, and the switch's id for whoever logs a message.

    Nothing here sends, so no xid counter lives here: the switch actor owns its xids.
    """

    __slots__ = ("id", "ofproto", "ofproto_parser")

    def __init__(self, dpid: int = 0) -> None:
        self.ofproto: Any = v13
        self.ofproto_parser: Any = v13_parser
        self.id = dpid

    def __repr__(self) -> str:
        return f"CodecDatapath(dpid={self.id:016x})"


DATAPATH: Final = CodecDatapath()
"""The one stand-in every encoding and parse uses when no switch is named: a message's
bytes do not depend on the switch it goes to."""


class ParseError(ValueError):
    """Bytes os-ken cannot read as one OpenFlow 1.3 message."""


def parse(data: bytes | bytearray | memoryview, datapath: CodecDatapath = DATAPATH) -> Any:
    """One whole message as os-ken's message object (``msg.xid``, ``msg.body``...)."""
    if len(data) < HEADER.size:
        raise ParseError(f"{len(data)} bytes is shorter than an OpenFlow header")
    version, msg_type, length, xid = header(data)
    buf = bytes(data)
    try:
        msg = osken_parser.msg(datapath, version, msg_type, length, xid, buf)
    except Exception as exc:
        raise ParseError(f"os-ken cannot parse message type {msg_type}: {exc!r}") from exc
    if msg is None:  # os-ken logged the failure and handed back nothing
        raise ParseError(f"os-ken cannot parse message type {msg_type}")
    return msg


def encode(msg: Any, xid: int = 0) -> bytes:
    """An os-ken message, serialized, with transaction id ``xid`` in its header.

    The xid is written into the bytes, not the message (which keeps whatever it
    had), so one message may be encoded for several xids.
    """
    msg.serialize()
    return with_xid(bytes(msg.buf), xid)


def basic_oxm_fields() -> dict[int, str]:
    """OpenFlow 1.3 OXM fields of the OpenFlow basic class: number -> ``OFPMatch`` name."""
    return {
        int(field.oxm_field): str(field.name)
        for field in v13.oxm_types
        if isinstance(field, OpenFlowBasic)
    }
