"""The queue telemetry view: each switch's port queues by class, as last read.

Key: ``<prefix>:queues`` hash dpid (16 hex digits) → JSON
``{"updated_at": t, "queues": [QueueStats...]}``, rewritten by the
controller about once a second per switch (the latest reading wins).
"""

from __future__ import annotations

import json
import time

import redis

from controller.qos.telemetry import QueueStats
from controller.store.client import text, translate_errors


class QueueStore:
    def __init__(self, client: redis.Redis, prefix: str = "flowlane") -> None:
        self._redis = client
        self._queues = f"{prefix}:queues"

    @translate_errors
    def publish(self, dpid: int, queues: list[QueueStats], now: float | None = None) -> None:
        document = {
            "updated_at": now if now is not None else time.time(),
            "queues": [queue.to_dict() for queue in queues],
        }
        self._redis.hset(self._queues, f"{dpid:016x}", json.dumps(document))

    @translate_errors
    def remove(self, dpid: int) -> None:
        self._redis.hdel(self._queues, f"{dpid:016x}")

    @translate_errors
    def get(self, dpid_hex: str) -> tuple[float, list[QueueStats]] | None:
        """(when it was read, the queues) of one switch; None when none was published."""
        raw = self._redis.hget(self._queues, dpid_hex)
        if raw is None:
            return None
        document = json.loads(text(raw))
        return float(document["updated_at"]), [
            QueueStats.from_dict(queue) for queue in document["queues"]
        ]
