"""The Redis part of mastership: instance leases, owner records, fenced generation ids.

Keys (``{prefix}:mastership:…``):

- ``instances``: a set of instance ids (only to find the leases; a member whose
  lease expired is removed by the next renewal of anyone);
- ``lease:{id}``: a hash (``token``, ``switches``, ``since``) that expires after
  the lease's TTL unless renewed; ``token`` is random per process, so a restarted
  process with the same ``--instance-id`` never renews another's lease;
- ``generation:{dpid}``: the switch's generation counter (``INCR``), never deleted,
  so generation ids increase across the whole history of the switch;
- ``owners``: a hash dpid -> ``{"instance", "generation", "at"}``, who took it last;
- ``takeovers:{id}``: a hash dpid -> ``{"at", "from", "generation"}``, the last time
  instance ``id`` took the switch from another instance's owner record (a dead
  owner's: a live one is never robbed), for ``GET /v1/controllers``; it expires
  ``TAKEOVERS_TTL_S`` after its last write, so ids that never return leave nothing.

Every operation is one Lua script, so a take is fenced: the counter moves only if
the taker's lease is current (same token) and the switch's owner is none, the
taker, or an instance whose lease has expired.  A paused instance that wakes up
after its lease expired cannot take a generation; a live owner is never robbed
(it releases first).  The scripts build lease keys from the prefix, so they need
one Redis (or a Sentinel primary), not a Redis Cluster.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Set
from dataclasses import dataclass
from typing import Any, Literal

import redis

from controller.mastership.decide import Owner, Reading
from controller.store.client import translate_errors

LEASE_TTL_S = 3.0
"""A lease not renewed for this long has expired: its instance's switches are taken."""

TAKEOVERS_TTL_S = 7 * 24 * 3600
"""How long an instance's takeover records outlive its last takeover."""

RenewStatus = Literal["renewed", "registered", "conflict"]

_RENEW = """
local lease = ARGV[1] .. 'lease:' .. ARGV[2]
local held = redis.call('HGET', lease, 'token')
local status = 'renewed'
if held == false then
  status = 'registered'
elseif held ~= ARGV[3] then
  status = 'conflict'
end
if status ~= 'conflict' then
  redis.call('HSET', lease, 'token', ARGV[3], 'switches', ARGV[4], 'since', ARGV[6])
  if status == 'registered' then
    redis.call('HSET', lease, 'registered', ARGV[6])
  end
  redis.call('PEXPIRE', lease, ARGV[5])
  redis.call('SADD', ARGV[1] .. 'instances', ARGV[2])
end
local live = {}
for _, id in ipairs(redis.call('SMEMBERS', ARGV[1] .. 'instances')) do
  local switches = redis.call('HGET', ARGV[1] .. 'lease:' .. id, 'switches')
  if switches == false then
    redis.call('SREM', ARGV[1] .. 'instances', id)
  else
    table.insert(live, id)
    table.insert(live, switches)
  end
end
local counters = {}
for i = 7, #ARGV do
  local value = redis.call('GET', ARGV[1] .. 'generation:' .. ARGV[i])
  table.insert(counters, value or '0')
end
return {status, live, redis.call('HGETALL', ARGV[1] .. 'owners'), counters}
"""

_TAKE = """
local held = redis.call('HGET', ARGV[1] .. 'lease:' .. ARGV[2], 'token')
if held ~= ARGV[3] then
  return {'fenced', ''}
end
local record = redis.call('HGET', ARGV[1] .. 'owners', ARGV[4])
local previous = ''
if record then
  previous = cjson.decode(record)['instance']
  if previous ~= ARGV[2] and redis.call('EXISTS', ARGV[1] .. 'lease:' .. previous) == 1 then
    return {'held', previous}
  end
end
local generation = redis.call('INCR', ARGV[1] .. 'generation:' .. ARGV[4])
redis.call('HSET', ARGV[1] .. 'owners', ARGV[4],
  cjson.encode({instance = ARGV[2], generation = generation, at = tonumber(ARGV[5])}))
if previous ~= '' and previous ~= ARGV[2] then
  local takeovers = ARGV[1] .. 'takeovers:' .. ARGV[2]
  redis.call('HSET', takeovers, ARGV[4],
    cjson.encode({at = tonumber(ARGV[5]), from = previous, generation = generation}))
  redis.call('EXPIRE', takeovers, ARGV[6])
end
return {'taken', tostring(generation), previous}
"""

_RELEASE = """
local record = redis.call('HGET', ARGV[1] .. 'owners', ARGV[3])
if record and cjson.decode(record)['instance'] == ARGV[2] then
  redis.call('HDEL', ARGV[1] .. 'owners', ARGV[3])
  return 1
end
return 0
"""

_RESIGN = """
local lease = ARGV[1] .. 'lease:' .. ARGV[2]
if redis.call('HGET', lease, 'token') ~= ARGV[3] then
  return 0
end
local owners = redis.call('HGETALL', ARGV[1] .. 'owners')
for i = 1, #owners, 2 do
  if cjson.decode(owners[i + 1])['instance'] == ARGV[2] then
    redis.call('HDEL', ARGV[1] .. 'owners', owners[i])
  end
end
redis.call('DEL', lease)
redis.call('SREM', ARGV[1] .. 'instances', ARGV[2])
return 1
"""


@dataclass(frozen=True)
class Renewal:
    status: RenewStatus
    """``registered``: the lease did not exist (first renewal, or it expired meanwhile);
    ``conflict``: another process holds a lease under this instance id."""
    reading: Reading


@dataclass(frozen=True)
class Taken:
    generation: int | None
    """The new generation id; None: refused (``why``)."""
    why: str = ""
    previous: str | None = None
    """Taken: the instance whose owner record it replaced (a dead one's, or this one's
    own when taken again); None: the switch had no owner record."""


def _dpid(field: str) -> int:
    return int(field, 16)


class Leases:
    """One instance's view of the mastership keys (every call is one round trip)."""

    def __init__(
        self,
        client: redis.Redis,
        instance_id: str,
        prefix: str = "flowlane",
        ttl_s: float = LEASE_TTL_S,
        token: str | None = None,
    ) -> None:
        if ttl_s <= 0:
            raise ValueError(f"a lease TTL must be positive, not {ttl_s}")
        self.instance_id = instance_id
        self.ttl_s = ttl_s
        self.token = token or secrets.token_hex(16)
        self._prefix = f"{prefix}:mastership:"
        self._client = client
        self._renew = client.register_script(_RENEW)
        self._take = client.register_script(_TAKE)
        self._release = client.register_script(_RELEASE)
        self._resign = client.register_script(_RESIGN)

    @translate_errors
    def renew(self, connected: Set[int]) -> Renewal:
        """Renew (or register) this instance's lease with the switches it is connected to,
        and read the live instances, the owners and the counters of those switches."""
        ordered = sorted(connected)
        fields = [f"{dpid:016x}" for dpid in ordered]
        args: list[Any] = [
            self._prefix,
            self.instance_id,
            self.token,
            json.dumps(fields),
            int(self.ttl_s * 1000),
            f"{time.time():.3f}",
            *fields,
        ]
        status, live, owners, counters = self._renew(args=args)
        instances = {
            str(live[i]): frozenset(_dpid(f) for f in json.loads(live[i + 1]))
            for i in range(0, len(live), 2)
        }
        owner_map: dict[int, Owner] = {}
        for i in range(0, len(owners), 2):
            record = json.loads(owners[i + 1])
            owner_map[_dpid(owners[i])] = Owner(str(record["instance"]), int(record["generation"]))
        generations = {dpid: int(value) for dpid, value in zip(ordered, counters, strict=True)}
        return Renewal(str(status), Reading(instances, owner_map, generations))  # type: ignore[arg-type]

    @translate_errors
    def take(self, dpid: int) -> Taken:
        """A new generation id for ``dpid``, if this lease is current and no live instance
        owns the switch."""
        args: list[str | int] = [
            self._prefix,
            self.instance_id,
            self.token,
            f"{dpid:016x}",
            f"{time.time():.3f}",
            TAKEOVERS_TTL_S,
        ]
        outcome, detail, *rest = self._take(args=args)
        if outcome == "taken":
            previous = str(rest[0]) if rest and rest[0] else None
            return Taken(int(detail), previous=previous)
        if outcome == "held":
            return Taken(None, f"instance {detail} masters it")
        return Taken(None, "this instance's lease is not current")

    @translate_errors
    def release(self, dpid: int) -> bool:
        """Delete this instance's owner record of ``dpid`` (True if it was ours)."""
        return bool(self._release(args=[self._prefix, self.instance_id, f"{dpid:016x}"]))

    @translate_errors
    def resign(self) -> bool:
        """A clean stop: release every switch and end the lease now, so the others take
        over at their next renewal instead of after the TTL."""
        return bool(self._resign(args=[self._prefix, self.instance_id, self.token]))

    @translate_errors
    def generation(self, dpid: int) -> int:
        value = self._client.get(f"{self._prefix}generation:{dpid:016x}")
        return int(value) if value is not None else 0
