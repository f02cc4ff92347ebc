"""What the controller reports about switches, and its heartbeat.

Keys (``<prefix>`` defaults to ``flowlane``):

- ``<prefix>:switches``     hash: dpid (16 hex digits) → JSON snapshot (ports, queues, flows,
  groups, meters, and the inputs its plan was computed from)
- ``<prefix>:applied``      hash: dpid → policy version confirmed by a barrier
- ``<prefix>:controllers``  sorted set: controller id scored by its last heartbeat (unix time)
- ``<prefix>:switch-owners`` hash: dpid → the controller that reports it
- channel ``<prefix>:applied:events`` gets a dpid each time its applied version is written

The applied versions sit apart from the snapshots so that a client waiting
for a version reads a few bytes instead of every flow table, when the
channel says something changed.

A controller that crashes never says goodbye, so every heartbeat also prunes
the controllers silent for longer than ``prune_after_s`` (far longer than
any readiness bound) and the switches they still own.  A switch that
another controller has taken over since (its ``switch-owners`` entry names
the new one) is kept.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Final

import redis
from pydantic import ConfigDict, Field, TypeAdapter
from redis.typing import EncodableT

from controller.pipeline.groups import MeterEntry
from controller.qos.plan import QueueSpec
from controller.records import RECORD_CONFIG
from controller.store.client import text, translate_errors
from controller.store.groups import GroupRecord
from controller.store.inputs import InputsRecord


@dataclass(frozen=True, slots=True)
class PortReport:
    """One port of a switch, and the queues its controller gave it."""

    __pydantic_config__: ClassVar[ConfigDict] = RECORD_CONFIG

    name: str
    number: int
    link_bps: Annotated[int | None, Field(description="Link speed OVS reports; null: unknown")]
    rate_bps: Annotated[
        int | None, Field(description="The port's HTB ceiling; null: no queues on it")
    ] = None
    queues: tuple[QueueSpec, ...] = ()


ReportedFlow = tuple[int, int, tuple[tuple[str, int, int | None], ...], int]
"""An installed entry as a report lists it: (table, priority, match fields (name, value,
mask), cookie), enough to diff against.  Not a tracked flow (``FlowRecord``)."""


@functools.lru_cache(maxsize=65_536)
def _record_json(record: ReportedFlow) -> str:
    """One flow's JSON text, kept by content: a policy change alters a few entries of a
    switch's hundreds, and encoding all of them again for every switch was the largest
    part of the controller's CPU time per change."""
    return json.dumps(record)


_FLOWS_TEXT: dict[int, tuple[tuple[ReportedFlow, ...], str]] = {}


def _flows_json(flows: tuple[ReportedFlow, ...]) -> str:
    """The flows' JSON texts joined, kept for the last few tuples by identity: switches
    alike report one plan's entries as one tuple (``_reported_flows`` in the Redis link),
    and a hundred of them report after every change."""
    known = _FLOWS_TEXT.get(id(flows))
    if known is not None and known[0] is flows:
        return known[1]
    text = ", ".join(_record_json(record) for record in flows)
    if len(_FLOWS_TEXT) >= 16:
        _FLOWS_TEXT.clear()
    _FLOWS_TEXT[id(flows)] = (flows, text)
    return text


@dataclass(frozen=True, slots=True)
class SwitchReport:
    __pydantic_config__: ClassVar[ConfigDict] = RECORD_CONFIG

    dpid: int
    controller: str
    connected_at: float
    applied_version: int | None
    ports: tuple[PortReport, ...] = ()
    flows: tuple[ReportedFlow, ...] = ()
    datapath_type: str | None = None
    updated_at: float = field(default_factory=time.time)
    groups: tuple[GroupRecord, ...] = ()
    """The groups the switch holds, confirmed with the flows (fabric forwarding's multipath)."""
    meters: tuple[MeterEntry, ...] = ()
    inputs: InputsRecord | None = None
    """What the switch's plan was computed from, besides the policy and jobs; None: a report
    of a controller that did not publish them (older than the records that carry them)."""

    @property
    def dpid_hex(self) -> str:
        return f"{self.dpid:016x}"

    def to_json(self) -> str:
        # Everything but the flows through pydantic; the flows joined from each one's cached
        # text: encoding every entry of every switch again (pydantic or json.dumps) after
        # each change was most of a policy change's CPU time on ten switches.
        head = SWITCH_REPORT.dump_json(self, exclude=_FLOWS, by_alias=True).decode()
        return f'{head[:-1]}, "flows": [{_flows_json(self.flows)}]}}'

    @staticmethod
    def from_json(raw: str | bytes) -> SwitchReport:
        """A report as ``to_json`` (or any earlier version of it) wrote it."""
        return SWITCH_REPORT.validate_json(raw)


SWITCH_REPORT: TypeAdapter[SwitchReport] = TypeAdapter(SwitchReport)
_FLOWS: Final = {"flows"}


PRUNE_AFTER_S: Final = 300.0
"""Heartbeat age after which a controller is forgotten: five minutes, far beyond the few
seconds after which the API counts it as gone (``--controller-max-age``), so a controller
that is merely late, or a Redis hiccup, never costs a live controller its switches."""

# Forget the controllers in ``gone`` and every switch whose owner is one of them.
# KEYS: controllers, switch-owners, switches, applied.
_FORGET = """
local function forget(gone)
  if #gone == 0 then
    return
  end
  local dead = {}
  for _, controller in ipairs(gone) do
    dead[controller] = true
    redis.call('ZREM', KEYS[1], controller)
  end
  local owners = redis.call('HGETALL', KEYS[2])
  for i = 1, #owners, 2 do
    if dead[owners[i + 1]] then
      redis.call('HDEL', KEYS[2], owners[i])
      redis.call('HDEL', KEYS[3], owners[i])
      redis.call('HDEL', KEYS[4], owners[i])
    end
  end
end
"""

# ARGV: the controller that beats, its time, the cutoff (scores below it are pruned).
# Returns the pruned controllers.
_HEARTBEAT = (
    _FORGET
    + """
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
local stale = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[3])
forget(stale)
return stale
"""
)

# ARGV: the controllers to forget.
_REMOVE_CONTROLLERS = _FORGET + "\nforget(ARGV)\n"

_REMOVE_OWNED = """
local owner = redis.call('HGET', KEYS[2], ARGV[1])
if owner and owner ~= ARGV[2] then
  return 0
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
"""


class SwitchStore:
    def __init__(
        self, client: redis.Redis, prefix: str = "flowlane", prune_after_s: float = PRUNE_AFTER_S
    ) -> None:
        if prune_after_s <= 0:
            raise ValueError(f"prune_after_s must be positive, got {prune_after_s}")
        self._redis = client
        self._switches = f"{prefix}:switches"
        self._applied = f"{prefix}:applied"
        self.applied_channel = f"{prefix}:applied:events"
        """Gets a switch's dpid each time its applied version is written (``?wait=applied``
        waits on it instead of polling)."""
        self._controllers = f"{prefix}:controllers"
        self._owners = f"{prefix}:switch-owners"
        self.prune_after_s = prune_after_s
        self._heartbeat = client.register_script(_HEARTBEAT)
        self._remove_controllers = client.register_script(_REMOVE_CONTROLLERS)
        self._remove_owned = client.register_script(_REMOVE_OWNED)

    @property
    def _forget_keys(self) -> list[str]:
        return [self._controllers, self._owners, self._switches, self._applied]

    @translate_errors
    def report(self, report: SwitchReport) -> None:
        pipe = self._redis.pipeline(transaction=True)
        pipe.hset(self._switches, report.dpid_hex, report.to_json())
        pipe.hset(self._owners, report.dpid_hex, report.controller)
        if report.applied_version is not None:
            pipe.hset(self._applied, report.dpid_hex, report.applied_version)
        else:
            pipe.hdel(self._applied, report.dpid_hex)
        pipe.publish(self.applied_channel, report.dpid_hex)
        pipe.execute()

    def set_applied(self, dpid: int, version: int | None, controller: str) -> None:
        """Just the confirmed version (a few bytes): what ``?wait=applied`` reads, written
        before the full snapshot so a waiting client does not wait for its serialization."""
        self.set_applied_many({dpid: version}, controller)

    @translate_errors
    def set_applied_many(self, versions: Mapping[int, int | None], controller: str) -> None:
        """The confirmed versions of several switches in one transaction: ten switches
        confirming a change within a few milliseconds make one round trip, not ten."""
        if not versions:
            return
        confirmed: dict[EncodableT, EncodableT] = {
            f"{d:016x}": v for d, v in versions.items() if v is not None
        }
        unknown = [f"{d:016x}" for d, v in versions.items() if v is None]
        pipe = self._redis.pipeline(transaction=True)
        if confirmed:
            pipe.hset(self._applied, mapping=confirmed)
        if unknown:
            pipe.hdel(self._applied, *unknown)
        owners: dict[EncodableT, EncodableT] = {f"{d:016x}": controller for d in versions}
        pipe.hset(self._owners, mapping=owners)
        for dpid in versions:
            pipe.publish(self.applied_channel, f"{dpid:016x}")
        pipe.execute()

    @translate_errors
    def remove(self, dpid: int, controller: str | None = None) -> None:
        """Forget a switch's report; with ``controller``, only if that controller wrote it
        (several controllers: a slave's connection going away leaves the master's report)."""
        if controller is not None:
            keys = [self._switches, self._owners, self._applied]
            self._remove_owned(keys=keys, args=[f"{dpid:016x}", controller])
            return
        pipe = self._redis.pipeline(transaction=True)
        pipe.hdel(self._switches, f"{dpid:016x}")
        pipe.hdel(self._applied, f"{dpid:016x}")
        pipe.hdel(self._owners, f"{dpid:016x}")
        pipe.execute()

    @translate_errors
    def remove_controller(self, controller: str) -> None:
        """Forget a controller and every switch it still owns (it is shutting down);
        in one script, so a switch another controller takes over meanwhile is kept."""
        self._remove_controllers(keys=self._forget_keys, args=[controller])

    @translate_errors
    def all(self) -> list[SwitchReport]:
        raw = self._redis.hgetall(self._switches)
        return sorted((SwitchReport.from_json(text(v)) for v in raw.values()), key=lambda r: r.dpid)

    @translate_errors
    def applied(self) -> dict[str, int]:
        """dpid (hex) → the policy version its flows run, as confirmed by a barrier."""
        raw = self._redis.hgetall(self._applied)
        return {text(dpid): int(version) for dpid, version in raw.items()}

    @translate_errors
    def heartbeat(self, controller: str, now: float | None = None) -> list[str]:
        """Record that ``controller`` is alive, and prune those silent for ``prune_after_s``
        (with the switches they still own); returns the pruned controllers."""
        beat = now if now is not None else time.time()
        pruned: Any = self._heartbeat(
            keys=self._forget_keys, args=[controller, repr(beat), repr(beat - self.prune_after_s)]
        )
        return [text(member) for member in pruned]

    @translate_errors
    def live_controllers(self, max_age_s: float, now: float | None = None) -> list[str]:
        cutoff = (now if now is not None else time.time()) - max_age_s
        members = self._redis.zrangebyscore(self._controllers, cutoff, "+inf")
        return [text(member) for member in members if isinstance(member, bytes | str)]

    @translate_errors
    def heartbeats(self) -> dict[str, float]:
        """Every controller the store knows, with its last heartbeat (unix time)."""
        pairs: Any = self._redis.zrange(self._controllers, 0, -1, withscores=True)
        return {text(member): float(score) for member, score in pairs}

    @translate_errors
    def last_heartbeat(self) -> tuple[str, float] | None:
        """The controller that beat last and when (unix time): what ``/readyz`` names
        when no controller is live."""
        newest: Any = self._redis.zrevrange(self._controllers, 0, 0, withscores=True)
        return (text(newest[0][0]), float(newest[0][1])) if newest else None

    @translate_errors
    def live_switches(self, max_age_s: float) -> list[str]:
        """dpids (hex) of switches whose controller still beats, without reading any report:
        what a client waiting for a version polls."""
        alive = set(self.live_controllers(max_age_s))
        owners = self._redis.hgetall(self._owners)
        return sorted(text(dpid) for dpid, owner in owners.items() if text(owner) in alive)

    def live_reports(self, max_age_s: float) -> list[SwitchReport]:
        """Switches whose controller still beats; a crashed controller's switches drop out."""
        alive = set(self.live_controllers(max_age_s))
        return [report for report in self.all() if report.controller in alive]
