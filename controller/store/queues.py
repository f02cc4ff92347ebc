"""The queue telemetry view: each switch's port queues by class, as last read.

Key: ``<prefix>:queues`` hash dpid (16 hex digits) → JSON
``{"updated_at": t, "queues": [QueueStats...]}``, rewritten by the
controller about once a second per switch (the latest reading wins).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

import redis
from pydantic import ConfigDict, TypeAdapter

from controller.qos.records import QueueStats
from controller.records import RECORD_CONFIG
from controller.store.client import translate_errors


@dataclass(frozen=True, slots=True)
class QueuesDocument:
    """One switch's entry: when it was read, and its queues."""

    __pydantic_config__: ClassVar[ConfigDict] = RECORD_CONFIG

    updated_at: float
    queues: list[QueueStats]


QUEUES_DOCUMENT: TypeAdapter[QueuesDocument] = TypeAdapter(QueuesDocument)


class QueueStore:
    def __init__(self, client: redis.Redis, prefix: str = "flowlane") -> None:
        self._redis = client
        self._queues = f"{prefix}:queues"

    @translate_errors
    def publish(self, dpid: int, queues: list[QueueStats], now: float | None = None) -> None:
        document = QueuesDocument(now if now is not None else time.time(), queues)
        self._redis.hset(
            self._queues, f"{dpid:016x}", QUEUES_DOCUMENT.dump_json(document, by_alias=True)
        )

    @translate_errors
    def remove(self, dpid: int) -> None:
        self._redis.hdel(self._queues, f"{dpid:016x}")

    @translate_errors
    def get(self, dpid_hex: str) -> tuple[float, list[QueueStats]] | None:
        """(when it was read, the queues) of one switch; None when none was published."""
        raw = self._redis.hget(self._queues, dpid_hex)
        if raw is None:
            return None
        document = QUEUES_DOCUMENT.validate_json(raw)
        return document.updated_at, document.queues
