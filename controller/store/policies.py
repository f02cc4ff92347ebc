"""Versioned policy documents in Redis.

Keys (``<prefix>`` defaults to ``flowlane``):

- ``<prefix>:policy:seq``           last version number handed out
- ``<prefix>:policy:active``        the active version
- ``<prefix>:policy:active-digest`` SHA-256 of the active document's canonical JSON
- ``<prefix>:policy:versions``      hash: version → JSON record (author, time, comment, document)
- ``<prefix>:policy:trimmed``       the newest version trimmed from the history (0: none yet)
- channel ``<prefix>:policy:events`` gets ``{"version": N}`` when N becomes active
- stream ``<prefix>:events`` (``EventStore``) gets a ``policy`` entry per new version

A write is one Lua script, so it is atomic: it compares the active version
with the one the writer read (compare-and-set), then compares the document
with the active one (a write that changes nothing stores nothing), and only
then numbers, stores, activates, records the event, trims the history and
announces the new version.  Two concurrent writers cannot both win, a
refused or unchanged write leaves nothing behind, and a version never exists
without its event (nor the other way round).  When the store URL asks for
replicas (``min_replicas``), ``write`` returns only once the write is on them
(``acknowledged`` in ``controller/store/client.py``).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from typing import Any, Final

import redis

from controller.store.client import acknowledged, text, translate_errors
from controller.store.errors import UnknownVersionError, VersionConflictError
from controller.store.events import EventStore

ANY_VERSION: Final = -1
"""``expected_version`` meaning "whatever is active" (the write is still atomic)."""

HISTORY_LIMIT: Final = 1000
"""Versions kept by default; older ones are trimmed by the write that makes room."""

POLICY_EVENT: Final = "policy"
"""The ``kind`` of the events-stream entry that records a new version."""

# The script's first reply element: 0 conflict, 1 stored, 2 unchanged.
_CONFLICT, _UNCHANGED = 0, 2

# The event entry is the one EventStore.append writes (fields kind, time, data;
# MAXLEN ~ the store's cap).  Its ``data`` is ``json.dumps`` of
# {"version", "author", "comment", "rollback_of"}: the version is only known
# here, so Python encodes the rest and the script puts the version in front,
# byte for byte what json.dumps would have written.
#
# The XADD comes first, before any other write: a script that fails half-way
# is not rolled back by Redis, and the stream is the one key here that is
# not the policy store's own (a wrong type there must not leave a version
# without its event).  The version number is therefore read, not INCRed,
# until the event is in.
_WRITE = """
local active = redis.call('GET', KEYS[2])
local expected = tonumber(ARGV[1])
if expected ~= -1 then
  local current = tonumber(active) or 0
  if current ~= expected then
    return {0, active or false}
  end
end
if active and redis.call('GET', KEYS[4]) == ARGV[4] then
  return {2, active, redis.call('HGET', KEYS[3], active)}
end
local version = (tonumber(redis.call('GET', KEYS[1])) or 0) + 1
redis.call('XADD', KEYS[6], 'MAXLEN', '~', ARGV[8], '*',
  'kind', ARGV[6], 'time', ARGV[7], 'data', '{"version": ' .. version .. ', ' .. ARGV[9])
redis.call('SET', KEYS[1], version)
redis.call('HSET', KEYS[3], version, ARGV[2])
redis.call('SET', KEYS[2], version)
redis.call('SET', KEYS[4], ARGV[4])
-- Trim from the oldest not yet trimmed up to the limit: a lowered limit trims the
-- surplus at once.  The limit is at least 1, so the new (active) version stays.
local trimmed = tonumber(redis.call('GET', KEYS[5])) or 0
local oldest_kept = version - tonumber(ARGV[5]) + 1
if oldest_kept > trimmed + 1 then
  for old = trimmed + 1, oldest_kept - 1 do
    redis.call('HDEL', KEYS[3], old)
  end
  redis.call('SET', KEYS[5], oldest_kept - 1)
end
redis.call('PUBLISH', ARGV[3], cjson.encode({version = version}))
return {1, version}
"""

# A store that lost data (see controller/store/epoch.py): the next version number must be
# above the one a controller enforces, and the next write must be stored even when it equals
# the store's active document, which is not what the switches run.
# KEYS: seq, active-digest.  ARGV: the enforced version.  Returns the sequence now.
_RESERVE = """
local seq = tonumber(redis.call('GET', KEYS[1])) or 0
local floor = tonumber(ARGV[1])
redis.call('DEL', KEYS[2])
if seq < floor then
  redis.call('SET', KEYS[1], floor)
  return floor
end
return seq
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


@dataclass(frozen=True, slots=True)
class PolicyWrite:
    """What a write left active: the new version, or the active one it matched."""

    policy: PolicyVersion
    unchanged: bool
    """True when the document was the active one's: nothing stored, nothing announced."""


def document_digest(document: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of ``document``: equal exactly when the documents are.

    Canonical means sorted keys and no spaces, so the key order or spacing a
    client happened to send does not make a "new" version; every value
    (``"10Gbit"`` versus ``10000000000``) still counts as written.
    """
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


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
    def __init__(
        self,
        client: redis.Redis,
        prefix: str = "flowlane",
        *,
        history_limit: int = HISTORY_LIMIT,
        events: EventStore | None = None,
    ) -> None:
        """``history_limit`` versions are kept (at least 1: the active one is never trimmed);
        ``events`` is the stream each new version is recorded on (the prefix's by default)."""
        if history_limit < 1:
            raise ValueError(f"history_limit must be at least 1, got {history_limit}")
        self._redis = client
        self._seq = f"{prefix}:policy:seq"
        self._active = f"{prefix}:policy:active"
        self._digest = f"{prefix}:policy:active-digest"
        self._versions = f"{prefix}:policy:versions"
        self._trimmed = f"{prefix}:policy:trimmed"
        self.channel = f"{prefix}:policy:events"
        self.history_limit = history_limit
        self._events = events if events is not None else EventStore(client, prefix)
        self._write = client.register_script(_WRITE)
        self._reserve = client.register_script(_RESERVE)

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
    def reserve_through(self, version: int) -> int:
        """Number the next write above ``version``, and store it even if it matches the active
        document; returns the sequence now.  What a controller whose store lost data calls,
        so that the operator's next write is one it can adopt (numbers never go backwards)."""
        seq: Any = acknowledged(self._redis, self._reserve, [self._seq, self._digest], [version])
        return int(seq)

    @translate_errors
    def history(self, limit: int = 50) -> list[PolicyVersion]:
        """Newest first; trimmed versions are simply absent."""
        newest = self._redis.get(self._seq)
        if newest is None or limit <= 0:
            return []
        wanted = list(range(int(newest), max(int(newest) - limit, 0), -1))
        raws = self._redis.hmget(self._versions, [str(v) for v in wanted])
        return [_decode(v, text(raw)) for v, raw in zip(wanted, raws, strict=True) if raw]

    @translate_errors
    def write(
        self,
        document: dict[str, Any],
        *,
        author: str,
        comment: str = "",
        expected_version: int | None = ANY_VERSION,
        rollback_of: int | None = None,
    ) -> PolicyWrite:
        """Store ``document`` (already validated) as the next version and make it active,
        unless it is the active document already: then the active version is returned,
        ``unchanged``, and nothing is stored, recorded or announced.

        ``expected_version`` is the active version the writer based its change
        on (``None`` when it saw no policy); a mismatch raises
        ``VersionConflictError`` and writes nothing, whatever the document.
        """
        now = time.time()
        record = {
            "author": author,
            "created_at": now,
            "comment": comment,
            "document": document,
            "rollback_of": rollback_of,
        }
        event_rest = json.dumps({"author": author, "comment": comment, "rollback_of": rollback_of})
        encoded = json.dumps(record)
        expected = 0 if expected_version is None else expected_version
        code, value, *active_record = acknowledged(
            self._redis,
            self._write,
            [
                self._seq,
                self._active,
                self._versions,
                self._digest,
                self._trimmed,
                self._events.stream,
            ],
            [
                expected,
                encoded,
                self.channel,
                document_digest(document),
                self.history_limit,
                POLICY_EVENT,
                repr(now),
                self._events.max_len,
                event_rest[1:],  # without its "{": the script writes '{"version": N, '
            ],
        )
        if code == _CONFLICT:
            active = int(value) if value else None
            raise VersionConflictError(expected_version, active)
        # The answer is built from what the script saw, not read back: a concurrent
        # write with a short history could already have trimmed this version.
        if code == _UNCHANGED:
            raw = active_record[0] if active_record else None
            if raw is None:  # a digest without its record: only a hand-edited store
                raise UnknownVersionError(int(value))
            return PolicyWrite(_decode(int(value), text(raw)), unchanged=True)
        return PolicyWrite(_decode(int(value), encoded), unchanged=False)

    def put(
        self,
        document: dict[str, Any],
        *,
        author: str,
        comment: str = "",
        expected_version: int | None = ANY_VERSION,
        rollback_of: int | None = None,
    ) -> PolicyVersion:
        """``write``, for a caller that needs only the version now active."""
        return self.write(
            document,
            author=author,
            comment=comment,
            expected_version=expected_version,
            rollback_of=rollback_of,
        ).policy

    def rollback(
        self,
        version: int,
        *,
        author: str,
        comment: str = "",
        expected_version: int | None = ANY_VERSION,
    ) -> PolicyWrite:
        """Re-activate an old document as a new version: history only moves forward.

        A version trimmed from the history is as unknown as one never written.
        Rolling back to the active document changes nothing (``unchanged``).
        """
        old = self.get(version)
        if old is None:
            raise UnknownVersionError(version)
        return self.write(
            old.document,
            author=author,
            comment=comment or f"rollback to version {version}",
            expected_version=expected_version,
            rollback_of=version,
        )
