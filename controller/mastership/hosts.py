"""Hosts shared between controllers, fenced by each switch's generation, as pins are.

A host is learned from its packet-ins, and a host whose routes are installed sends
none: an instance that starts (or whose connection to a switch dropped) would not
know it for as long as it stays silent, and the switches it masters would lose
their routes to it.  So the master of each switch publishes the hosts at it, and
every instance adds those it does not know (``controller.openflow.fabric_owner``).
One hash, ``{prefix}:mastership:hosts``: switch -> ``{"instance", "generation",
"hosts"}``, written by the ``WRITE_FENCED`` script of ``pins`` (only the switch's
current owner with its current generation writes).  A master writes a record
even when no host is at its switch: no record means nobody published yet.

A record's life: its master rewrites it whole whenever the hosts at its switch change,
so a host its master forgot (its port went down or was deleted, it moved, its switch
left this instance) leaves the record with the next write; a switch handed over keeps
its record for the next master to start from.  A record goes when its switch has left
the fabric: no owner record (every master released it) and listed by no live lease (no
instance is connected to it).  Every read deletes such records on the way (one script:
judged and deleted at one moment), so nothing outlives the switches it describes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from controller.mastership.leases import Leases
from controller.mastership.pins import WRITE_FENCED
from controller.openflow.fabric_events import SharedHost
from controller.store.client import translate_errors


def encode(instance: str, generation: int, hosts: tuple[SharedHost, ...]) -> str:
    return json.dumps(
        {
            "instance": instance,
            "generation": generation,
            "hosts": [[host.mac, host.port, host.ipv4] for host in hosts],
        },
        separators=(",", ":"),
    )


def decode(raw: str) -> tuple[SharedHost, ...] | None:
    """A record's hosts; None when it does not parse (no record: nothing is known)."""
    try:
        record: dict[str, Any] = json.loads(raw)
        return tuple(
            SharedHost(int(mac), int(port), None if ipv4 is None else int(ipv4))
            for mac, port, ipv4 in record["hosts"]
        )
    except (ValueError, TypeError, KeyError):
        return None


READ_AND_SWEEP = """
local hash = ARGV[1] .. 'hosts'
local listed = {}
for _, id in ipairs(redis.call('SMEMBERS', ARGV[1] .. 'instances')) do
  local switches = redis.call('HGET', ARGV[1] .. 'lease:' .. id, 'switches')
  if switches then
    for _, dpid in ipairs(cjson.decode(switches)) do listed[dpid] = true end
  end
end
local found = redis.call('HGETALL', hash)
local kept = {}
for i = 1, #found, 2 do
  local dpid = found[i]
  if listed[dpid] or redis.call('HEXISTS', ARGV[1] .. 'owners', dpid) == 1 then
    table.insert(kept, dpid)
    table.insert(kept, found[i + 1])
  else
    redis.call('HDEL', hash, dpid)
  end
end
return kept
"""
"""Every record of ``{prefix}:mastership:hosts`` whose switch has an owner or is listed by a
live lease; the others (their switch left the fabric) are deleted."""


class HostStore:
    """The shared hosts, through the instance's lease client (one round trip each)."""

    def __init__(self, leases: Leases) -> None:
        self._leases = leases
        self._write = leases.client.register_script(WRITE_FENCED)
        self._read = leases.client.register_script(READ_AND_SWEEP)

    @translate_errors
    def write(self, hosts: Mapping[int, tuple[int, tuple[SharedHost, ...]]]) -> int:
        """Publish (switch -> (generation it is mastered with, the hosts at it)); the number
        of switches whose record was written (the others are no longer this instance's)."""
        instance = self._leases.instance_id
        args: list[Any] = [self._leases.keys, instance, "hosts"]
        for dpid, (generation, shared) in sorted(hosts.items()):
            args += [f"{dpid:016x}", str(generation), encode(instance, generation, shared)]
        return int(self._write(args=args))

    @translate_errors
    def read(self) -> dict[int, tuple[SharedHost, ...]]:
        """Every switch's published hosts (records that do not parse are left out), the
        records of switches that left the fabric deleted (see the module's docstring)."""
        flat: list[Any] = self._read(args=[self._leases.keys])
        raw = {_text(flat[i]): _text(flat[i + 1]) for i in range(0, len(flat), 2)}
        found = {int(dpid, 16): decode(record) for dpid, record in raw.items()}
        return {dpid: hosts for dpid, hosts in found.items() if hosts is not None}


def _text(value: str | bytes) -> str:
    """A script's reply as text, whatever the client's ``decode_responses``."""
    return value.decode() if isinstance(value, bytes) else value
