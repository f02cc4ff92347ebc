"""The mastership keys as an operator reads them (``GET /v1/controllers``): read-only.

One Lua script reads every instance's lease (never its token), the owner records
and each instance's last takeovers at one moment, so an answer never shows a
switch mastered twice because a take happened between two reads.  Instances
come from the live set, from owner records (a dead instance still named as a
switch's owner) and from the controllers' heartbeats the caller passes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import redis

from controller.store.client import translate_errors

_READ = """
local p = ARGV[1]
local ids, seen = {}, {}
local function add(id)
  if not seen[id] then
    seen[id] = true
    table.insert(ids, id)
  end
end
for _, id in ipairs(redis.call('SMEMBERS', p .. 'instances')) do add(id) end
local owners = redis.call('HGETALL', p .. 'owners')
for i = 1, #owners, 2 do add(cjson.decode(owners[i + 1])['instance']) end
for i = 2, #ARGV do add(ARGV[i]) end
local out = {}
for _, id in ipairs(ids) do
  local lease = p .. 'lease:' .. id
  table.insert(out, {
    id,
    redis.call('HMGET', lease, 'switches', 'since', 'registered'),
    redis.call('PTTL', lease),
    redis.call('HGETALL', p .. 'takeovers:' .. id),
  })
end
return {out, owners}
"""


@dataclass(frozen=True)
class Takeover:
    """The last time an instance took a switch from another (dead) instance."""

    dpid: int
    at: float
    previous: str
    generation: int


@dataclass(frozen=True)
class Mastered:
    """A switch's owner record: its instance masters it with ``generation`` since ``since``."""

    dpid: int
    generation: int
    since: float | None
    takeover: Takeover | None
    """This instance's last takeover of this switch, if any."""


@dataclass(frozen=True)
class InstanceView:
    id: str
    alive: bool
    """Its lease is current."""
    renewed_at: float | None
    registered_at: float | None
    expires_in_s: float | None
    connected: tuple[int, ...]
    """Switches connected to it as of its last renewal."""
    masters: tuple[Mastered, ...]
    takeovers: tuple[Takeover, ...]
    """Its last takeover of every switch it ever took over, newest first."""


def _number(value: Any) -> float | None:
    try:
        return float(value) if value not in (None, False, "") else None
    except (TypeError, ValueError):
        return None


def _pairs(flat: list[Any]) -> Iterable[tuple[str, str]]:
    return ((str(flat[i]), str(flat[i + 1])) for i in range(0, len(flat), 2))


class MastershipView:
    def __init__(self, client: redis.Redis, prefix: str = "flowlane") -> None:
        self._prefix = f"{prefix}:mastership:"
        self._read = client.register_script(_READ)

    @translate_errors
    def instances(self, also: Iterable[str] = ()) -> list[InstanceView]:
        """Every instance the keys name, and those of ``also`` (heartbeating controllers),
        by id."""
        rows, owners = self._read(args=[self._prefix, *sorted(set(also))])
        owned: dict[str, list[tuple[int, Mapping[str, Any]]]] = {}
        for field, raw in _pairs(owners):
            record = json.loads(raw)
            owned.setdefault(str(record["instance"]), []).append((int(field, 16), record))
        found = []
        for instance, (switches, since, registered), pttl, takeover_flat in rows:
            instance = str(instance)
            takeovers = {}
            for field, raw in _pairs(takeover_flat):
                record = json.loads(raw)
                dpid = int(field, 16)
                takeovers[dpid] = Takeover(
                    dpid, float(record["at"]), str(record["from"]), int(record["generation"])
                )
            masters = tuple(
                Mastered(
                    dpid, int(record["generation"]), _number(record.get("at")), takeovers.get(dpid)
                )
                for dpid, record in sorted(owned.get(instance, []), key=lambda pair: pair[0])
            )
            alive = switches is not None and int(pttl) > 0
            found.append(
                InstanceView(
                    id=instance,
                    alive=alive,
                    renewed_at=_number(since),
                    registered_at=_number(registered),
                    expires_in_s=int(pttl) / 1000 if alive else None,
                    connected=tuple(sorted(int(f, 16) for f in json.loads(switches)))
                    if switches
                    else (),
                    masters=masters,
                    takeovers=tuple(sorted(takeovers.values(), key=lambda t: -t.at)),
                )
            )
        return sorted(found, key=lambda view: view.id)
