"""Registered jobs (a scheduler's "these hosts run training") with an expiry time.

Keys: ``<prefix>:jobs`` hash name → JSON record; channel ``<prefix>:jobs:events``
gets ``{"job": name}`` on every change, so controllers re-plan at once.
A job past its expiry is invisible to readers even before anyone purges it.

``put`` may take an ``admit`` check of the live jobs (the API's quotas): it
runs on the jobs as they are when the record is written: the write carries a
fingerprint of the jobs it judged and is refused if they changed since, so two
registrations at once cannot both take the last place of a quota.  (A check in
the script rather than ``WATCH``: the write is then one command, which can be
pipelined with the ``WAIT`` that puts it on the replicas, see ``acknowledged``.)
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import redis

from controller.store.client import acknowledged, text, translate_errors
from controller.store.errors import StoreUnavailableError

MAX_ATTEMPTS = 16
"""Tries of a checked ``put`` whose jobs changed between its read and its write."""


@dataclass(frozen=True, slots=True)
class JobRecord:
    name: str
    document: dict[str, Any]
    """The job as registered (validated by the API): class, endpoints, ttl, weight (absent
    from records written before weights: readers take 1)."""
    created_at: float
    expires_at: float
    tenant: str | None = None
    """The tenant of the token that registered it; None: an unscoped token did."""
    entries: int | None = None
    """Classification entries it costs per switch, as counted when it was registered
    (None: not recorded, as by versions before quotas)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.document,
            "name": self.name,
            "tenant": self.tenant,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
        }

    @staticmethod
    def decode(name: str, raw: str) -> JobRecord:
        data = json.loads(raw)
        entries = data.get("entries")
        return JobRecord(
            name,
            data["document"],
            data["created_at"],
            data["expires_at"],
            data.get("tenant"),
            entries if isinstance(entries, int) else None,
        )


class JobOwnedError(Exception):
    """A live job of that name belongs to another tenant."""


# A tenant may replace only its own jobs (or an expired one); an unscoped caller ('' here)
# any. KEYS: jobs hash, channel. ARGV: name, record, tenant, now, channel message, the
# fingerprint of the jobs the caller judged ('': none).
# Returns 1 when stored, 0 when another tenant's live job holds the name, -1 when the jobs
# are no longer the ones judged.  The fingerprint is ``jobs_fingerprint``'s: the SHA-1 of the
# sorted SHA-1s of each "<len(name)>:<name><record>" (sorted digests: hex sorts the same in
# every collation, names might not).
_PUT = """
if ARGV[6] ~= '' then
  local all = redis.call('HGETALL', KEYS[1])
  local digests = {}
  for i = 1, #all, 2 do
    digests[#digests + 1] = redis.sha1hex(#all[i] .. ':' .. all[i] .. all[i + 1])
  end
  table.sort(digests)
  if redis.sha1hex(table.concat(digests)) ~= ARGV[6] then return -1 end
end
if ARGV[3] ~= '' then
  local old = redis.call('HGET', KEYS[1], ARGV[1])
  if old then
    local record = cjson.decode(old)
    if record['tenant'] ~= ARGV[3] and tonumber(record['expires_at']) > tonumber(ARGV[4]) then
      return 0
    end
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PUBLISH', KEYS[2], ARGV[5])
return 1
"""

# KEYS: jobs hash, channel. ARGV: name, tenant ('' for any), now, channel message.
# Returns the deleted record (its tenant goes into the event), or 0.
_DELETE = """
local old = redis.call('HGET', KEYS[1], ARGV[1])
if not old then return 0 end
local record = cjson.decode(old)
if tonumber(record['expires_at']) <= tonumber(ARGV[3]) then return 0 end
if ARGV[2] ~= '' and record['tenant'] ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('PUBLISH', KEYS[2], ARGV[4])
return old
"""

_CHANGED = -1


def jobs_fingerprint(raw: Mapping[Any, Any]) -> str:
    """What ``_PUT`` computes from the jobs hash, from the same hash as read here."""
    digests = sorted(
        hashlib.sha1(
            b"%d:%s%s" % (len(text(name).encode()), text(name).encode(), text(value).encode()),
            usedforsecurity=False,
        ).hexdigest()
        for name, value in raw.items()
    )
    return hashlib.sha1("".join(digests).encode(), usedforsecurity=False).hexdigest()


Admit = Callable[[list[JobRecord]], None]
"""Judges the live jobs a ``put`` would join (its own name's included); raises to refuse."""


class JobStore:
    def __init__(self, client: redis.Redis, prefix: str = "flowlane") -> None:
        self._redis = client
        self._jobs = f"{prefix}:jobs"
        self.channel = f"{prefix}:jobs:events"
        self._put = client.register_script(_PUT)
        self._delete = client.register_script(_DELETE)
        self._delete_if_same = client.register_script(
            "if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then"
            " return redis.call('HDEL', KEYS[1], ARGV[1]) end return 0"
        )

    @translate_errors
    def put(
        self,
        name: str,
        document: dict[str, Any],
        ttl_s: float,
        now: float | None = None,
        tenant: str | None = None,
        entries: int | None = None,
        admit: Admit | None = None,
    ) -> JobRecord:
        """Register or replace a job; its expiry restarts from now.

        With a ``tenant``, a live job of that name registered by anyone else is
        left alone (``JobOwnedError``): a team cannot take over another's job.
        With ``admit``, it is called with the live jobs first, and whatever it
        raises leaves the store as it was.
        """
        created = now if now is not None else time.time()
        record = JobRecord(name, document, created, created + ttl_s, tenant, entries)
        stored = {
            "document": document,
            "created_at": created,
            "expires_at": created + ttl_s,
            "tenant": tenant,
            "entries": entries,
        }
        keys = [self._jobs, self.channel]
        args: list[str | float] = [
            name,
            json.dumps(stored),
            tenant or "",
            created,
            json.dumps({"job": name}),
        ]
        done = (
            acknowledged(self._redis, self._put, keys, [*args, ""])
            if admit is None
            else self._checked_put(keys, args, admit, created)
        )
        if not done:
            raise JobOwnedError(f"job {name!r} belongs to another tenant; pick another name")
        return record

    def _checked_put(
        self, keys: list[str], args: list[str | float], admit: Admit, now: float
    ) -> Any:
        """``_PUT`` once ``admit`` passed the live jobs, unless they changed meanwhile: then
        read and judge again."""
        for _ in range(MAX_ATTEMPTS):
            raw = self._redis.hgetall(self._jobs)
            admit(self._live(raw, now))
            done = acknowledged(self._redis, self._put, keys, [*args, jobs_fingerprint(raw)])
            if done != _CHANGED:
                return done
        raise StoreUnavailableError(
            f"jobs changed under {MAX_ATTEMPTS} attempts to register one: too many"
            " registrations at once; retry"
        )

    @staticmethod
    def _live(raw: Mapping[Any, Any], now: float) -> list[JobRecord]:
        records = (JobRecord.decode(text(name), text(value)) for name, value in raw.items())
        return sorted(
            (record for record in records if record.expires_at > now), key=lambda r: r.name
        )

    def delete(self, name: str, tenant: str | None = None, now: float | None = None) -> bool:
        """Delete a live job; with a ``tenant``, only one that tenant registered."""
        return self.remove(name, tenant, now) is not None

    @translate_errors
    def remove(
        self, name: str, tenant: str | None = None, now: float | None = None
    ) -> JobRecord | None:
        """``delete``, answering with the record deleted (None: nothing was)."""
        moment = now if now is not None else time.time()
        old = acknowledged(
            self._redis,
            self._delete,
            [self._jobs, self.channel],
            [name, tenant or "", moment, json.dumps({"job": name})],
        )
        return JobRecord.decode(name, text(old)) if isinstance(old, bytes | str) else None

    @translate_errors
    def all(self, now: float | None = None) -> list[JobRecord]:
        """Live jobs, by name."""
        moment = now if now is not None else time.time()
        return self._live(self._redis.hgetall(self._jobs), moment)

    def get(self, name: str, now: float | None = None) -> JobRecord | None:
        return next((job for job in self.all(now) if job.name == name), None)

    def purge(self, now: float | None = None) -> list[str]:
        """Delete expired jobs; returns their names."""
        return [record.name for record in self.purge_records(now)]

    @translate_errors
    def purge_records(self, now: float | None = None) -> list[JobRecord]:
        """Delete expired jobs; returns their records (for the events stream, which says
        whose job each was)."""
        moment = now if now is not None else time.time()
        removed = []
        for name, raw in self._redis.hgetall(self._jobs).items():
            record = JobRecord.decode(text(name), text(raw))
            if record.expires_at > moment:
                continue
            # Delete only the record we read: a job registered again meanwhile stays,
            # and of two purgers racing, one reports it.
            if self._delete_if_same(keys=[self._jobs], args=[text(name), text(raw)]):
                self._redis.publish(self.channel, json.dumps({"job": text(name)}))
                removed.append(record)
        return removed
