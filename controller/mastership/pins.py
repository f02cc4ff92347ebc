"""Pinned elephants shared between controllers, fenced by each switch's generation.

Only the master of a flow's source switch sees the flow's counters, so it alone
places the flow; every instance plans every switch with every instance's pins, and
the instance that takes a switch over starts from the pins its previous master
published (``controller.openflow.fabric_owner``).  One hash,
``{prefix}:mastership:pins``: source switch -> ``{"instance", "generation",
"pins"}``.  A write is one Lua script that keeps a switch's record only if the
switch's owner record names this instance *with this generation*: a stale master
(paused past its lease, then woken) cannot overwrite its successor's pins, as the
switch itself refuses its flow-mods.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from controller.flowid import FlowId
from controller.mastership.leases import Leases
from controller.openflow.fabric_events import SharedPin
from controller.store.client import translate_errors

WRITE_FENCED = """
local written = 0
local hash = ARGV[1] .. ARGV[3]
for i = 4, #ARGV, 3 do
  local record = redis.call('HGET', ARGV[1] .. 'owners', ARGV[i])
  if record then
    local owner = cjson.decode(record)
    if owner['instance'] == ARGV[2] and tostring(owner['generation']) == ARGV[i + 1] then
      if ARGV[i + 2] == '' then
        redis.call('HDEL', hash, ARGV[i])
      else
        redis.call('HSET', hash, ARGV[i], ARGV[i + 2])
      end
      written = written + 1
    end
  end
end
return written
"""
"""Write switch -> record in the hash ``ARGV[3]`` for the switches this instance masters
with the generation given (``''``: delete); the others are skipped.  Pins and hosts."""


def encode(instance: str, generation: int, pins: tuple[SharedPin, ...]) -> str:
    """A switch's record ('' for none: the record is deleted)."""
    if not pins:
        return ""
    return json.dumps(
        {
            "instance": instance,
            "generation": generation,
            "pins": [
                [
                    list(pin.flow),
                    [list(hop) for hop in pin.path],
                    pin.since_wall,
                    pin.quiet_since_wall,
                ]
                for pin in pins
            ],
        },
        separators=(",", ":"),
    )


def decode(raw: str) -> tuple[SharedPin, ...]:
    """A record's pins; a record that does not parse counts as none (it is only a hint)."""
    try:
        record: dict[str, Any] = json.loads(raw)
        return tuple(
            SharedPin(
                FlowId(*(int(x) for x in flow)),
                tuple((int(dpid), int(port)) for dpid, port in path),
                float(since),
                None if quiet is None else float(quiet),
            )
            for flow, path, since, quiet in record["pins"]
        )
    except (ValueError, TypeError, KeyError):
        return ()


class PinStore:
    """The shared pins, through the instance's lease client (one round trip each)."""

    def __init__(self, leases: Leases) -> None:
        self._leases = leases
        self._key = f"{leases.keys}pins"
        self._write = leases.client.register_script(WRITE_FENCED)

    @translate_errors
    def write(self, pins: Mapping[int, tuple[int, tuple[SharedPin, ...]]]) -> int:
        """Publish (switch -> (generation it is mastered with, its pins)); the number of
        switches whose record was written (the others are no longer this instance's)."""
        args: list[Any] = [self._leases.keys, self._leases.instance_id, "pins"]
        for dpid, (generation, shared) in sorted(pins.items()):
            args += [
                f"{dpid:016x}",
                str(generation),
                encode(self._leases.instance_id, generation, shared),
            ]
        return int(self._write(args=args))

    @translate_errors
    def read(self) -> dict[int, tuple[SharedPin, ...]]:
        """Every switch's published pins."""
        raw: Mapping[str, str] = self._leases.client.hgetall(self._key)  # type: ignore[assignment]
        return {int(dpid, 16): decode(record) for dpid, record in raw.items()}
