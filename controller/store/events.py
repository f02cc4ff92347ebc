"""Reclassifications and policy changes as a Redis stream, readable from any point.

A stream (not pub/sub) so that ``GET /v1/events?since=`` and
``flowlane events --follow`` can resume where they left off, and so a
restarted API still shows what happened before.  The stream is capped
(approximately) at ``max_len`` entries, and, when ``max_data_bytes`` is set
(the audit log), each entry's ``data`` at that many bytes: the stream then
holds at most about ``max_len * max_data_bytes`` bytes of data whatever is
written to it. The caller shortens its entries to fit (``controller/api/audit.py``);
one that still does not is stored as a marker saying how large it was.

An entry has three fields: ``kind``, ``time`` (``repr`` of a unix time) and
``data`` (a JSON object).  ``append`` writes most of them; ``policy`` entries
are written by ``PolicyStore``'s Lua script with the same fields and cap.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import redis

from controller.store.client import text, translate_errors


@dataclass(frozen=True, slots=True)
class Event:
    id: str
    """Stream id (``<ms>-<seq>``): pass it back as ``since`` to read what came after."""
    kind: str
    time: float
    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "time": self.time, **self.data}


class EventStore:
    def __init__(
        self,
        client: redis.Redis,
        prefix: str = "flowlane",
        max_len: int = 10_000,
        name: str = "events",
        max_data_bytes: int | None = None,
    ):
        """``name`` picks the stream: ``events``, or ``audit`` for the API's audit log."""
        self._redis = client
        self.stream = f"{prefix}:{name}"
        """The stream key: public because ``PolicyStore`` writes its entries from the Lua
        script that stores the version (same fields, same cap), so both land or neither."""
        self.max_len = max_len
        self.max_data_bytes = max_data_bytes

    @translate_errors
    def append(self, kind: str, data: dict[str, Any], now: float | None = None) -> str:
        encoded = json.dumps(data)
        if self.max_data_bytes is not None and len(encoded) > self.max_data_bytes:
            encoded = json.dumps({"truncated": True, "size": len(encoded)})
        fields = {
            "kind": kind,
            "time": repr(now if now is not None else time.time()),
            "data": encoded,
        }
        event_id: Any = self._redis.xadd(
            self.stream,
            fields,  # type: ignore[arg-type]
            maxlen=self.max_len,
            approximate=True,
        )
        return text(event_id)

    @translate_errors
    def read(
        self, since: str | None = None, limit: int = 100, block_ms: int | None = None
    ) -> list[Event]:
        """Events after ``since`` (exclusive), oldest first; optionally wait for new ones."""
        entries: list[Any] = []
        if block_ms is not None:
            replies: Any = self._redis.xread(
                {self.stream: since or "$"}, count=limit, block=block_ms
            )
            for _stream, stream_entries in replies or []:
                entries.extend(stream_entries)
        else:
            start = f"({since}" if since else "-"
            ranged: Any = self._redis.xrange(self.stream, min=start, count=limit)
            entries = list(ranged or [])
        return [self._decode(entry_id, fields) for entry_id, fields in entries]

    @staticmethod
    def _decode(entry_id: Any, fields: dict[Any, Any]) -> Event:
        values = {text(k): text(v) for k, v in fields.items()}
        return Event(
            id=text(entry_id),
            kind=values.get("kind", "unknown"),
            time=float(values.get("time", "0")),
            data=json.loads(values.get("data", "{}")),
        )
