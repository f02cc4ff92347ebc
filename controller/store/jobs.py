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
        self._delete_if_same = client.register_script(
            "if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then"
            " return redis.call('HDEL', KEYS[1], ARGV[1]) end return 0"
        )

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
        removed = bool(self._redis.hdel(self._jobs, name))
        if removed:
            self._redis.publish(self.channel, json.dumps({"job": name}))
        return removed

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
        removed = []
        for name, raw in self._redis.hgetall(self._jobs).items():
            if json.loads(text(raw))["expires_at"] > moment:
                continue
            # Delete only the record we read: a job registered again meanwhile stays,
            # and of two purgers racing, one reports it.
            if self._delete_if_same(keys=[self._jobs], args=[text(name), text(raw)]):
                self._redis.publish(self.channel, json.dumps({"job": text(name)}))
                removed.append(text(name))
        return removed
