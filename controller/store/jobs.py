"""Registered jobs (a scheduler's "these hosts run training") with an expiry time.

Keys: ``<prefix>:jobs`` hash name → JSON record; channel ``<prefix>:jobs:events``
gets ``{"job": name}`` on every change, so controllers re-plan at once.
A job past its expiry is invisible to readers even before anyone purges it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import redis

from controller.store.client import text, translate_errors


@dataclass(frozen=True, slots=True)
class JobRecord:
    name: str
    document: dict[str, Any]
    """The job as registered (validated by the API): class, endpoints, ttl."""
    created_at: float
    expires_at: float

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.document,
            "name": self.name,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
        }


class JobStore:
    def __init__(self, client: redis.Redis, prefix: str = "flowlane") -> None:
        self._redis = client
        self._jobs = f"{prefix}:jobs"
        self.channel = f"{prefix}:jobs:events"

    @translate_errors
    def put(
        self, name: str, document: dict[str, Any], ttl_s: float, now: float | None = None
    ) -> JobRecord:
        """Register or replace a job; its expiry restarts from now."""
        created = now if now is not None else time.time()
        record = JobRecord(name, document, created, created + ttl_s)
        pipe = self._redis.pipeline(transaction=True)
        pipe.hset(
            self._jobs,
            name,
            json.dumps(
                {"document": document, "created_at": created, "expires_at": created + ttl_s}
            ),
        )
        pipe.publish(self.channel, json.dumps({"job": name}))
        pipe.execute()
        return record

    @translate_errors
    def delete(self, name: str) -> bool:
        pipe = self._redis.pipeline(transaction=True)
        pipe.hdel(self._jobs, name)
        pipe.publish(self.channel, json.dumps({"job": name}))
        removed, _ = pipe.execute()
        return bool(removed)

    @translate_errors
    def all(self, now: float | None = None) -> list[JobRecord]:
        """Live jobs, by name."""
        moment = now if now is not None else time.time()
        records = []
        for name, raw in self._redis.hgetall(self._jobs).items():
            data = json.loads(text(raw))
            record = JobRecord(text(name), data["document"], data["created_at"], data["expires_at"])
            if record.expires_at > moment:
                records.append(record)
        return sorted(records, key=lambda r: r.name)

    def get(self, name: str, now: float | None = None) -> JobRecord | None:
        return next((job for job in self.all(now) if job.name == name), None)

    @translate_errors
    def purge(self, now: float | None = None) -> list[str]:
        """Delete expired jobs; returns their names (for the events stream)."""
        moment = now if now is not None else time.time()
        expired = []
        for name, raw in self._redis.hgetall(self._jobs).items():
            if json.loads(text(raw))["expires_at"] <= moment:
                expired.append(text(name))
        for name in expired:
            self.delete(name)
        return expired
