"""The live flow view: what each switch's tracked flows look like right now.

Key: ``<prefix>:flows`` hash dpid (16 hex digits) → JSON
``{"updated_at": t, "flows": [FlowRecord...]}``, rewritten by the controller
at most once a second per switch (the view is for people, not for control).

``FlowRecord`` (``controller/classify/records.py``) is the one published form
of a tracked flow: the controller derives it from its ``ObservedFlow``, Redis
holds it, ``GET /v1/flows`` serves it and the CLI reads it back from the API.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

import redis
from pydantic import ConfigDict, TypeAdapter

from controller.classify.records import FlowRecord as FlowRecord  # the stores' record
from controller.records import RECORD_CONFIG
from controller.store.client import translate_errors


@dataclass(frozen=True, slots=True)
class FlowsDocument:
    """One switch's entry: when it was published, and its flows."""

    __pydantic_config__: ClassVar[ConfigDict] = RECORD_CONFIG

    updated_at: float
    flows: list[FlowRecord]


FLOWS_DOCUMENT: TypeAdapter[FlowsDocument] = TypeAdapter(FlowsDocument)
"""Built once: a TypeAdapter compiles its validator and serializer when made."""


class FlowStore:
    def __init__(self, client: redis.Redis, prefix: str = "flowlane") -> None:
        self._redis = client
        self._flows = f"{prefix}:flows"

    @translate_errors
    def publish(self, dpid: int, flows: list[FlowRecord], now: float | None = None) -> None:
        document = FlowsDocument(now if now is not None else time.time(), flows)
        self._redis.hset(
            self._flows, f"{dpid:016x}", FLOWS_DOCUMENT.dump_json(document, by_alias=True)
        )

    @translate_errors
    def remove(self, dpid: int) -> None:
        self._redis.hdel(self._flows, f"{dpid:016x}")

    @translate_errors
    def all(self, switches: set[str] | None = None) -> list[FlowRecord]:
        """Every published flow, optionally only of the given dpids (hex)."""
        if switches is not None:
            # Only the switches asked for: a scoped read must not parse every view.
            wanted = sorted(switches)
            raws = self._redis.hmget(self._flows, wanted) if wanted else []
        else:
            raws = list(self._redis.hgetall(self._flows).values())
        flows: list[FlowRecord] = []
        for raw in raws:
            if raw is not None:
                flows.extend(FLOWS_DOCUMENT.validate_json(raw).flows)
        return flows
