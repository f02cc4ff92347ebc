"""Queue statistics: the one record the controller reads, Redis stores, the API serves and
``flowlane top`` shows.

A frozen dataclass rather than a pydantic model: the controller builds one per
port, class and second on every switch, and a dataclass is built without
validation.  Its JSON form (what ``<prefix>:queues`` holds and what
``GET /v1/switches/{dpid}/queues`` answers) comes from the field annotations
through pydantic: ``class`` and ``queue`` on the wire are ``traffic_class`` and
``queue_id`` in Python, and the descriptions are the API's documentation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from pydantic import ConfigDict, Field, TypeAdapter

from controller.records import RECORD_CONFIG


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One class's queue on one port, read from its HTB class: counters since the queue was
    made, the backlog now, and the send rate since the reading before."""

    __pydantic_config__: ClassVar[ConfigDict] = RECORD_CONFIG

    port: str
    traffic_class: Annotated[str, Field(alias="class")]
    queue_id: Annotated[
        int,
        Field(alias="queue", description="The queue number: the class's position in the policy"),
    ]
    bytes: Annotated[int, Field(description="Bytes sent since the queue was made")]
    packets: Annotated[int, Field(description="Packets sent since the queue was made")]
    drops: Annotated[int, Field(description="Packets dropped since the queue was made")]
    overlimits: Annotated[int, Field(description="Times the class was over its rate")]
    backlog_bytes: Annotated[int, Field(description="Bytes waiting now")]
    backlog_packets: Annotated[int, Field(description="Packets waiting now")]
    rate_bps: Annotated[
        float | None, Field(description="bit/s sent since the reading before; null: first")
    ]
    at: Annotated[float, Field(description="Unix time of the reading")]
    min_bps: Annotated[
        int, Field(description="The queue's guarantee on this port (HTB rate), bit/s")
    ] = 0
    priority: Annotated[
        int, Field(description="HTB priority; 0: a latency class, served first")
    ] = 0

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON values, spelled as on the wire."""
        data: dict[str, Any] = QUEUE_STATS.dump_python(self, mode="json", by_alias=True)
        return data

    @staticmethod
    def from_dict(data: Any) -> QueueStats:
        """A record from its JSON values (wire spelling); raises pydantic's ValidationError."""
        return QUEUE_STATS.validate_python(data)


QUEUE_STATS: TypeAdapter[QueueStats] = TypeAdapter(QueueStats)
"""Built once: a TypeAdapter compiles its validator and serializer when made."""
