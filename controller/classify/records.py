"""What classification tells the rest of the controller: reclassifications and the flow view.

One record type per concept, shared by the detector's bookkeeping, the
switch actor, the Redis link, the API, the CLI and the tests.  A tracked flow
is an ``ObservedFlow`` inside the controller (keyed by its ``FlowId``) and a
``FlowRecord`` once published (the switch named, the addresses as text): the
record Redis holds, ``GET /v1/flows`` serves and ``flowlane`` reads back.
This module stays light (no Redis, no policy model): the CLI imports it.
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from pydantic import ConfigDict, Field, TypeAdapter

from controller.flowid import ETH_TYPE_IPV6, FlowId
from controller.records import RECORD_CONFIG


@dataclass(frozen=True)
class Reclassification:
    """A detected elephant moved to ``to_class``, or released back to ``to_class``."""

    dpid: int
    flow: FlowId
    from_class: str
    to_class: str
    reason: str
    bytes: int
    latency_s: float | None
    """For a demotion: from the flow's first packet to the decision."""


@dataclass(frozen=True)
class ObservedFlow:
    """One counted flow with its class and why it has it (``rule:<name>``, ``job:<name>``,
    ``detected`` or ``default``); times are wall-clock (for people)."""

    flow: FlowId
    traffic_class: str
    why: str
    bytes: int
    rate_bps: float
    first_seen: float
    last_seen: float
    packets: int = 0
    """Packets counted (0: not known); bytes per packet tells an ACK stream from data."""


@dataclass(frozen=True, slots=True)
class FlowRecord:
    """One tracked flow as its controller last published it."""

    __pydantic_config__: ClassVar[ConfigDict] = RECORD_CONFIG

    switch: Annotated[str, Field(description="dpid, 16 hex digits")]
    eth_type: int
    ip_proto: int
    src: str
    dst: str
    src_port: int
    dst_port: int
    traffic_class: Annotated[str, Field(alias="class")]
    why: Annotated[str, Field(description="`rule:<name>`, `job:<name>`, `detected` or `default`")]
    bytes: int
    rate_bps: Annotated[
        float | None, Field(description="Over the last interval; null: not measurable")
    ]
    """The controller always publishes a number; the API sends one that is not finite (a
    zero-length window) as null, since JSON has no NaN, and the CLI reads it so."""
    first_seen: Annotated[float, Field(description="Unix time")]
    last_seen: Annotated[float, Field(description="Unix time")]

    @staticmethod
    def observed(dpid: int, seen: ObservedFlow) -> FlowRecord:
        """The published form of a flow the controller observed on switch ``dpid``: the
        same flow, with the switch named and the addresses as text."""
        flow = seen.flow
        return FlowRecord(
            f"{dpid:016x}",
            flow.eth_type,
            flow.ip_proto,
            _address_text(flow.eth_type, flow.src),
            _address_text(flow.eth_type, flow.dst),
            flow.src_port,
            flow.dst_port,
            seen.traffic_class,
            seen.why,
            seen.bytes,
            seen.rate_bps,
            seen.first_seen,
            seen.last_seen,
        )

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON values, spelled as on the wire (``class``)."""
        data: dict[str, Any] = FLOW_RECORD.dump_python(self, mode="json", by_alias=True)
        return data

    @staticmethod
    def from_dict(data: Any) -> FlowRecord:
        """A record from its JSON values; raises pydantic's ValidationError."""
        return FLOW_RECORD.validate_python(data)


FLOW_RECORD: TypeAdapter[FlowRecord] = TypeAdapter(FlowRecord)
FLOW_RECORDS: TypeAdapter[list[FlowRecord]] = TypeAdapter(list[FlowRecord])
"""Built once each: a TypeAdapter compiles its validator and serializer when made."""


@functools.lru_cache(maxsize=65_536)
def _address_text(eth_type: int, value: int) -> str:
    """An address as text, kept: the same hosts appear in every flow of every publication,
    and ``ipaddress`` is slow enough to show at 2 000 flows a switch."""
    if eth_type == ETH_TYPE_IPV6:
        return str(ipaddress.IPv6Address(value))
    return str(ipaddress.IPv4Address(value))
