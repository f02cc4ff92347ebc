"""OpenFlow messages as the bytes a switch receives, encoded once per content.

A policy change sends the same few flow-mods to every switch, and a
rule that moves back sends the very entries it sent before. os-ken builds
a message as a tree of objects and packs it field by field: on ten
switches that was the largest part of the controller's time per change.
A planned entry is frozen and already names its content (the cookie is a
hash of it), so its encoding is too: kept by entry, and only the
transaction id, which the switch actor assigns per send, is written into a
copy (``framing.with_xid``).
"""

from __future__ import annotations

import functools
from typing import Final

from os_ken.ofproto import ofproto_v1_3_parser as v13_parser

from controller.openflow import messages
from controller.openflow.osken_internals import DATAPATH, encode
from controller.pipeline.flows import FlowEntry, FlowKey

BARRIER: Final = encode(v13_parser.OFPBarrierRequest(DATAPATH))
"""A barrier request, whose xid is set like any other message's."""


@functools.lru_cache(maxsize=65_536)
def flow_add(entry: FlowEntry) -> bytes:
    return encode(messages.flow_add(DATAPATH, entry))


@functools.lru_cache(maxsize=65_536)
def flow_delete(key: FlowKey) -> bytes:
    return encode(messages.flow_delete(DATAPATH, key))
