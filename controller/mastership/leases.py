"""The Redis part of mastership: instance leases, owner records, fenced generation ids.

Keys (``{prefix}:mastership:…``):

- ``instances``: a set of instance ids (only to find the leases; a member whose
  lease expired is removed by the next renewal of anyone);
- ``lease:{id}``: a hash (``token``, ``switches``, ``ready``, ``since``, ``run``,
  ``renewed_us``) that expires after the lease's TTL unless renewed; ``ready`` are the
  switches the instance is ready to master (``controller.mastership.assign``);
  ``token`` is random per process, so a restarted process with the same
  ``--instance-id`` never renews another's lease;
  ``run`` is the Redis server's ``run_id`` and ``renewed_us`` its clock at the last
  renewal (what ``watch`` judges a lease by, see ``controller.mastership.presence``);
- ``generation:{dpid}``: the switch's generation counter (``INCR``), never deleted,
  so generation ids increase across the whole history of the switch;
- ``owners``: a hash dpid -> ``{"instance", "generation", "at"}``, who took it last;
- ``takeovers:{id}``: a hash dpid -> ``{"at", "from", "generation"}``, the last time
  instance ``id`` took the switch from another instance's owner record (a dead
  owner's: a live one is never robbed), for ``GET /v1/controllers``; it expires
  ``TAKEOVERS_TTL_S`` after its last write, so ids that never return leave nothing.

Every operation is one Lua script, so a take is fenced: the counter moves only if
the taker's lease is current (same token) and the switch's owner is none, the
taker, or an instance whose lease has expired (or was ended because its process is
gone: ``watch``).  A paused instance that wakes up
after its lease expired cannot take a generation; a live owner is never robbed
(it releases first).  The scripts build lease keys from the prefix, so they need
one Redis (or a Sentinel primary), not a Redis Cluster.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Set
from dataclasses import dataclass
from typing import Any, Literal

import redis

from controller.mastership.decide import Owner, Reading
from controller.mastership.presence import named_client, presence_name, present_tokens
from controller.store.client import durability_of, translate_errors

LOG = logging.getLogger("flowlane.controller")

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
  local now = redis.call('TIME')
  local info = redis.pcall('INFO', 'server')  -- refused by an ACL: never judged
  local run = type(info) == 'string' and string.match(info, 'run_id:(%w+)') or ''
  redis.call('HSET', lease, 'token', ARGV[3], 'switches', ARGV[4], 'since', ARGV[6],
    'run', run, 'renewed_us', string.format('%d', now[1] * 1000000 + now[2]),
    'ready', ARGV[7])
  if status == 'registered' then
    redis.call('HSET', lease, 'registered', ARGV[6])
  end
  redis.call('PEXPIRE', lease, ARGV[5])
  redis.call('SADD', ARGV[1] .. 'instances', ARGV[2])
end
local live = {}
for _, id in ipairs(redis.call('SMEMBERS', ARGV[1] .. 'instances')) do
  local switches, ready = unpack(redis.call('HMGET', ARGV[1] .. 'lease:' .. id, 'switches',
    'ready'))
  if switches == false then
    redis.call('SREM', ARGV[1] .. 'instances', id)
  else
    table.insert(live, id)
    table.insert(live, switches)
    table.insert(live, (ready == false or ready == '') and switches or ready)
  end
end
local counters = {}
for i = 8, #ARGV do
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
local counter = ARGV[1] .. 'generation:' .. ARGV[4]
local generation = tonumber(redis.call('GET', counter) or '0') + 1
if ARGV[7] == '1' then
  -- A floor of the server's clock in ms: a counter lost with Redis's data (or an INCR
  -- lost in a failover) restarts above every id the switch has seen, not below.
  local now = redis.call('TIME')
  generation = math.max(generation, now[1] * 1000 + math.floor(now[2] / 1000))
end
local text = string.format('%d', generation)
redis.call('SET', counter, text)
redis.call('HSET', ARGV[1] .. 'owners', ARGV[4],
  cjson.encode({instance = ARGV[2], generation = generation, at = tonumber(ARGV[5])}))
if previous ~= '' and previous ~= ARGV[2] then
  local takeovers = ARGV[1] .. 'takeovers:' .. ARGV[2]
  redis.call('HSET', takeovers, ARGV[4],
    cjson.encode({at = tonumber(ARGV[5]), from = previous, generation = generation}))
  redis.call('EXPIRE', takeovers, ARGV[6])
end
return {'taken', text, previous}
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


_WATCH = """
local info = redis.pcall('INFO', 'server')
local run = type(info) == 'string' and string.match(info, 'run_id:(%w+)') or ''
local present = {}
for i = 3, #ARGV do present[ARGV[i]] = true end
local live, ended = {}, {}
for _, id in ipairs(redis.call('SMEMBERS', ARGV[1] .. 'instances')) do
  local lease = ARGV[1] .. 'lease:' .. id
  local token, lease_run, renewed = unpack(redis.call('HMGET', lease, 'token', 'run', 'renewed_us'))
  if token == false then
    -- expired: the next renewal of anyone removes it from the set
  elseif run ~= '' and lease_run == run and renewed and tonumber(renewed) < tonumber(ARGV[2])
      and not present[token] then
    redis.call('DEL', lease)
    redis.call('SREM', ARGV[1] .. 'instances', id)
    table.insert(ended, id)
  else
    table.insert(live, id)
  end
end
return {live, ended}
"""


@dataclass(frozen=True)
class Watched:
    """One look at the instances' connections (``Leases.watch``)."""

    live: frozenset[str]
    """Instances whose lease is current after this look."""
    ended: tuple[str, ...]
    """Leases this look ended: their process's connection to Redis is gone."""


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
        time_floor: bool = False,
    ) -> None:
        """``client`` is not used itself: the leases go through a client of their own made
        from it, whose connections carry this process's name (``presence_name``), so that
        the other instances see when this process is gone (``watch``).

        ``time_floor``: a generation id is at least the Redis server's clock in ms (the
        controller's default): ids stay above every id a switch has seen even after Redis
        lost the counters.  Off, they count 1, 2, 3 (tests that read them)."""
        if ttl_s <= 0:
            raise ValueError(f"a lease TTL must be positive, not {ttl_s}")
        self.instance_id = instance_id
        self.ttl_s = ttl_s
        self.token = token or secrets.token_hex(16)
        self.time_floor = time_floor
        self._prefix = f"{prefix}:mastership:"
        client = named_client(client, presence_name(self.token))
        self._client = client
        self._renew = client.register_script(_RENEW)
        self._take = client.register_script(_TAKE)
        self._release = client.register_script(_RELEASE)
        self._resign = client.register_script(_RESIGN)
        self._watch = client.register_script(_WATCH)

    @property
    def client(self) -> redis.Redis:
        """This instance's named client (what else it fences by its lease uses it too)."""
        return self._client

    @property
    def keys(self) -> str:
        """The prefix of every mastership key (``{prefix}:mastership:``)."""
        return self._prefix

    def close(self) -> None:
        """Close this instance's connections (as its process's exit would)."""
        self._client.close()
        self._client.connection_pool.disconnect()  # a pool given to a client outlives it

    @translate_errors
    def renew(self, connected: Set[int], ready: Set[int] | None = None) -> Renewal:
        """Renew (or register) this instance's lease with the switches it is connected to,
        and read the live instances, the owners and the counters of those switches.

        ``ready``: the connected switches this instance could master without losing
        anything (None: all of them)."""
        ordered = sorted(connected)
        fields = [f"{dpid:016x}" for dpid in ordered]
        ready_fields = (
            None if ready is None else [f"{d:016x}" for d in sorted(ready) if d in connected]
        )
        args: list[Any] = [
            self._prefix,
            self.instance_id,
            self.token,
            json.dumps(fields),
            int(self.ttl_s * 1000),
            f"{time.time():.3f}",
            "" if ready_fields is None else json.dumps(ready_fields),
            *fields,
        ]
        status, live, owners, counters = self._renew(args=args)
        instances = {
            str(live[i]): frozenset(_dpid(f) for f in json.loads(live[i + 1]))
            for i in range(0, len(live), 3)
        }
        readiness = {
            str(live[i]): frozenset(_dpid(f) for f in json.loads(live[i + 2]))
            for i in range(0, len(live), 3)
        }
        owner_map: dict[int, Owner] = {}
        for i in range(0, len(owners), 2):
            record = json.loads(owners[i + 1])
            owner_map[_dpid(owners[i])] = Owner(str(record["instance"]), int(record["generation"]))
        generations = {dpid: int(value) for dpid, value in zip(ordered, counters, strict=True)}
        reading = Reading(instances, owner_map, generations, readiness)
        return Renewal(str(status), reading)  # type: ignore[arg-type]

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
            "1" if self.time_floor else "0",
        ]
        outcome, detail, *rest = self._taken(args)
        if outcome == "taken":
            previous = str(rest[0]) if rest and rest[0] else None
            return Taken(int(detail), previous=previous)
        if outcome == "held":
            return Taken(None, f"instance {detail} masters it")
        return Taken(None, "this instance's lease is not current")

    def _taken(self, args: list[str | int]) -> list[Any]:
        """Run the take; with a store URL that asks for replicas, ``WAIT`` for them in the
        same pipeline (one connection: ``WAIT`` counts what that connection wrote), so a
        failover right after a take does not bring back a counter below the id sent."""
        durability = durability_of(self._client)
        if not durability.waits:
            reply: list[Any] = self._take(args=args)
            return reply
        with self._client.pipeline(transaction=False) as pipe:
            pipe.eval(_TAKE, 0, *args)
            pipe.wait(durability.min_replicas, durability.wait_ms)
            reply, replicas = pipe.execute()
        if int(replicas) < durability.min_replicas and reply[0] == "taken":
            # Taken on the primary: used all the same.  Were it lost in a failover, the
            # time floor keeps the next take's id above it anyway.
            LOG.warning(
                "mastership: generation %s of switch %s on %d of %d replica(s) within %d ms",
                reply[1],
                args[3],
                int(replicas),
                durability.min_replicas,
                durability.wait_ms,
            )
        return list(reply)

    @translate_errors
    def watch(self) -> Watched:
        """End the leases of instances whose process is gone, and read who is live.

        A process that exits (killed or crashed) closes its connections, and Redis drops
        them at once: a lease whose process has no named connection left (``CLIENT
        LIST``) is ended now instead of after its TTL.  A paused or slow process keeps its
        connection and its lease.  See ``controller.mastership.presence`` for when a lease
        is judged (same Redis server run, renewed before the list was taken)."""
        with self._client.pipeline(transaction=False) as pipe:
            pipe.time()
            pipe.client_list(_type="normal")
            (seconds, micros), clients = pipe.execute()
        listed_us = int(seconds) * 1_000_000 + int(micros)
        tokens = sorted(present_tokens(clients))
        live, ended = self._watch(args=[self._prefix, listed_us, *tokens])
        return Watched(frozenset(str(i) for i in live), tuple(str(i) for i in ended))

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
