"""Versioned policy documents in Redis.

Keys (``<prefix>`` defaults to ``flowlane``):

- ``<prefix>:policy:seq``      last version number handed out
- ``<prefix>:policy:active``   the active version
- ``<prefix>:policy:versions`` hash: version → JSON record (author, time, comment, document)
- channel ``<prefix>:policy:events`` gets ``{"version": N}`` when N becomes active

A write is one Lua script, so it is atomic: it compares the active version
with the one the writer read (compare-and-set), and only then numbers,
stores, activates and announces the new version.  Two concurrent writers
cannot both win, and a refused write leaves nothing behind.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Any, Final

import redis

from controller.store.client import text, translate_errors
from controller.store.errors import UnknownVersionError, VersionConflictError

ANY_VERSION: Final = -1
"""``expected_version`` meaning "whatever is active" (the write is still atomic)."""

_WRITE = """
local active = redis.call('GET', KEYS[2])
local expected = tonumber(ARGV[1])
if expected ~= -1 then
  local current = tonumber(active) or 0
  if current ~= expected then
    return {0, active or false}
  end
end
local version = redis.call('INCR', KEYS[1])
redis.call('HSET', KEYS[3], version, ARGV[2])
redis.call('SET', KEYS[2], version)
redis.call('PUBLISH', ARGV[3], cjson.encode({version = version}))
return {1, version}
"""


@dataclass(frozen=True, slots=True)
class PolicyVersion:
    version: int
    author: str
    created_at: float
    comment: str
    document: dict[str, Any]
    rollback_of: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _decode(version: int, raw: str) -> PolicyVersion:
    # The record is stored as the writer encoded it; the version is its hash
    # field, so the Lua script never re-encodes the document (cjson would
    # turn an empty list into an object).
    record = json.loads(raw)
    return PolicyVersion(
        version=version,
        author=str(record["author"]),
        created_at=float(record["created_at"]),
        comment=str(record.get("comment", "")),
        document=record["document"],
        rollback_of=record.get("rollback_of"),
    )


class PolicyStore:
    def __init__(self, client: redis.Redis, prefix: str = "flowlane") -> None:
        self._redis = client
        self._seq = f"{prefix}:policy:seq"
        self._active = f"{prefix}:policy:active"
        self._versions = f"{prefix}:policy:versions"
        self.channel = f"{prefix}:policy:events"
        self._write = client.register_script(_WRITE)

    @translate_errors
    def active_version(self) -> int | None:
        value = self._redis.get(self._active)
        return int(value) if value is not None else None

    @translate_errors
    def get(self, version: int) -> PolicyVersion | None:
        raw = self._redis.hget(self._versions, str(version))
        return _decode(version, text(raw)) if raw is not None else None

    def active(self) -> PolicyVersion | None:
        version = self.active_version()
        return self.get(version) if version is not None else None

    @translate_errors
    def history(self, limit: int = 50) -> list[PolicyVersion]:
        """Newest first."""
        newest = self._redis.get(self._seq)
        if newest is None or limit <= 0:
            return []
        wanted = list(range(int(newest), max(int(newest) - limit, 0), -1))
        raws = self._redis.hmget(self._versions, [str(v) for v in wanted])
        return [_decode(v, text(raw)) for v, raw in zip(wanted, raws, strict=True) if raw]

    @translate_errors
    def put(
        self,
        document: dict[str, Any],
        *,
        author: str,
        comment: str = "",
        expected_version: int | None = ANY_VERSION,
        rollback_of: int | None = None,
    ) -> PolicyVersion:
        """Store ``document`` (already validated) as the next version and make it active.

        ``expected_version`` is the active version the writer based its change
        on (``None`` when it saw no policy); a mismatch raises
        ``VersionConflictError`` and writes nothing.
        """
        record = {
            "author": author,
            "created_at": time.time(),
            "comment": comment,
            "document": document,
            "rollback_of": rollback_of,
        }
        expected = 0 if expected_version is None else expected_version
        ok, value = self._write(
            keys=[self._seq, self._active, self._versions],
            args=[expected, json.dumps(record), self.channel],
        )
        if not ok:
            active = int(value) if value else None
            raise VersionConflictError(expected_version, active)
        stored = self.get(int(value))
        assert stored is not None
        return stored

    def rollback(
        self,
        version: int,
        *,
        author: str,
        comment: str = "",
        expected_version: int | None = ANY_VERSION,
    ) -> PolicyVersion:
        """Re-activate an old document as a new version: history only ever grows."""
        old = self.get(version)
        if old is None:
            raise UnknownVersionError(version)
        return self.put(
            old.document,
            author=author,
            comment=comment or f"rollback to version {version}",
            expected_version=expected_version,
            rollback_of=version,
        )
