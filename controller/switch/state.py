"""What one switch's actor remembers, as one frozen value replaced by each step.

Mappings held here are never mutated once the state holds them: a step builds
new ones, so any earlier state stays as it was.  The one exception is the
``Detector``: it keeps per-flow state for up to ``max_tracked`` flows and is
updated in place at each detection poll (copying it every poll would cost
more than the poll).  Only the step touches it, and only the newest state is
ever stepped, so no one sees it change under them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from controller.classify.detector import Detector
from controller.flowid import FlowId
from controller.openflow.stats import FlowCounters
from controller.pipeline.desired import FabricInputs
from controller.pipeline.diff import FlowDiff
from controller.pipeline.flows import FlowEntry, InstalledFlow
from controller.pipeline.groups import GroupDiff, GroupEntry, MeterEntry
from controller.pipeline.plan import PortState, SwitchInputs, SwitchPlan
from controller.policy.detection import DetectionSpec
from controller.qos.ovsdb import Bridge
from controller.qos.plan import PortQos
from controller.qos.telemetry import QueueStats
from controller.switch.events import PolicySnapshot
from controller.switch.fastreplace import replace

MAX_XID = 0xF1A0_0000
"""A switch's own xids stay below this; the ones above are the controller's probes (the
registry asks a served connection whether it is alive when a twin claims its id)."""


@dataclass(frozen=True)
class SwitchConfig:
    """The controller's settings every switch shares (immutable)."""

    audit_interval_s: float = 5.0
    """How often every switch is re-read and repaired (flows, queues, tc filters)."""
    reply_timeout_s: float = 10.0
    """A request with no (complete) reply by then has failed."""
    manage_qos: bool = True
    retry_s: float = 1.0
    """Wait before a failed sync is tried again (with a fresh read)."""
    queue_read_interval_s: float = 1.0
    """How often each port's HTB classes are read for the queue telemetry."""
    roles: bool = False
    """Several controllers share the switches (mastership): write only as the master the
    switch confirmed (ROLE_REPLY).  False: the only controller, writing as today (EQUAL)."""


class Ask(enum.Enum):
    """What a request asked the switch."""

    PORTS = "port descriptions"
    FLOWS = "flow tables"
    GROUPS = "groups"
    METERS = "meters"
    BARRIER = "barrier"
    DETECT = "detection"
    PORT_STATS = "port counters"
    ROLE = "role"


SYNC_ASKS = frozenset({Ask.PORTS, Ask.FLOWS, Ask.GROUPS, Ask.METERS, Ask.BARRIER})
"""Requests a sync waits for: their failure is the sync's."""


@dataclass(frozen=True)
class Request:
    """A request sent and not yet (completely) answered."""

    ask: Ask
    sent_at: float
    deadline: float
    parts: tuple[Any, ...] = ()
    """Multipart bodies received so far (raw bytes for flow stats, os-ken entries else)."""


@dataclass(frozen=True)
class Installed:
    """What the switch holds as of the last confirmed sync (barrier passed)."""

    flows: tuple[InstalledFlow | FlowEntry, ...]
    """As read back, or the confirmed plan's own entries (their key and cookie are the same)."""
    groups: Mapping[int, GroupEntry]
    meters: Mapping[int, MeterEntry]


@dataclass(frozen=True)
class Wanted:
    """Sync requests not started yet, coalesced: a burst of them is one sync."""

    reasons: tuple[str, ...] = ()
    fresh: bool = False
    """Re-read ports and tables (connect, audit, retry) rather than trust the last sync."""
    ports: Mapping[int, PortState | None] = field(default_factory=dict)
    """Port-status updates (None: deleted), adopted at the start of the next sync."""


@dataclass(frozen=True)
class Applying:
    """A sync's batch is out: what it will confirm at the barrier."""

    barrier: int
    first_xid: int
    last_xid: int
    """The batch's messages have xids first..last (never wrapping)."""
    plan: SwitchPlan
    inputs: SwitchInputs
    snapshot: PolicySnapshot
    flow_diff: FlowDiff
    group_diff: GroupDiff
    base_meters: Mapping[int, MeterEntry]
    errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class Sync:
    """The one sync in flight: reading the switch, then (if anything changed) applying."""

    reason: str
    fresh: bool
    started: float
    read_ports: bool
    read_tables: bool
    ports: tuple[PortState, ...] | None = None
    flows: tuple[FlowCounters, ...] | None = None
    groups: Mapping[int, GroupEntry] | None = None
    meters: Mapping[int, MeterEntry] | None = None
    tables_asked_at: float = 0.0
    applying: Applying | None = None

    @property
    def read_done(self) -> bool:
        return (not self.read_ports or self.ports is not None) and (
            not self.read_tables
            or (self.flows is not None and self.groups is not None and self.meters is not None)
        )


@dataclass(frozen=True)
class RoleState:
    """This controller's role for the switch, as mastership assigned it."""

    name: Literal["master", "slave"]
    generation: int
    confirmed: bool = False
    """The switch answered the role request with this role and generation."""
    stepped_down: bool = False
    """The switch refused this controller as master (stale generation, or a write refused
    as from a slave): it waits for mastership's next word, writing nothing."""
    xid: int = 0
    """The request that asked for it: answers to older role requests are ignored."""


@dataclass(frozen=True)
class SwitchState:
    dpid: int
    snapshot: PolicySnapshot
    """The newest policy and jobs (the next sync plans with them)."""
    fabric: FabricInputs | None = None
    """The fabric owner's newest inputs for this switch."""
    epoch: int = 0
    """Connections so far: timers of an earlier one are ignored."""
    connected: bool = False
    connected_at: float = 0.0
    """Wall-clock time of the connection (reports)."""
    wall_offset: float = 0.0
    """Wall-clock minus monotonic time (the flow view's times are for people)."""
    next_xid: int = 1
    pending: Mapping[int, Request] = field(default_factory=dict)
    deadline_tick: float | None = None
    """When the one ``deadline`` tick asked for (``requests.expect``) is due; None: none is
    out.  One per switch, not one per request: at a hundred switches and a change every
    50 ms, a timer per barrier kept some 20 000 timers (and their events) alive for their
    10 s, and the collector's full passes over them grew to 70 ms."""
    role: RoleState | None = None
    """None: not told yet (with ``SwitchConfig.roles``: nothing is written until it is)."""
    adopt: bool = False
    """Became master: the next read's overrides are adopted, as on a first connection."""
    # ---- sync
    ports: tuple[PortState, ...] | None = None
    installed: Installed | None = None
    """None: unknown (never read, or a sync failed); the next sync re-reads."""
    sync: Sync | None = None
    wanted: Wanted | None = None
    retries: tuple[str, ...] = ()
    """Reasons of failed syncs waiting for the retry timer."""
    synced_once: bool = False
    applied: PolicySnapshot | None = None
    last_plan: Applying | None = None
    """The last confirmed plan with its inputs (a report is sent again once the bridge is known)."""
    reported: tuple[SwitchInputs, bool] | None = None
    """Inputs of the last report, and whether it knew the bridge (a report carries every
    flow: one is sent only when something changed)."""
    # ---- detection
    overrides: Mapping[FlowId, str] = field(default_factory=dict)
    detector: Detector | None = None
    detector_spec: DetectionSpec | None = None
    claimed_bytes: Mapping[FlowId, tuple[int, float]] = field(default_factory=dict)
    views_published: float = float("-inf")
    tx_bytes: Mapping[int, tuple[int, float]] = field(default_factory=dict)
    # ---- queues
    qos_plans: Mapping[str, PortQos] = field(default_factory=dict)
    qos_applied: Mapping[str, PortQos] | None = None
    qos_wanted: bool = False
    qos_busy: bool = False
    """A ``QosWork`` is out (one at a time per switch)."""
    queue_read_due: bool = False
    count_limit: int | None = None
    refresh_checked: float | None = None
    bridge: Bridge | None = None
    queue_stats: Mapping[tuple[str, str], QueueStats] = field(default_factory=dict)
    dropping: frozenset[tuple[str, str]] = frozenset()

    @property
    def tag(self) -> str:
        return f"{self.dpid:016x}"


def initial_state(
    dpid: int, snapshot: PolicySnapshot, fabric: FabricInputs | None = None
) -> SwitchState:
    """A switch not connected yet, to be planned with ``snapshot`` and ``fabric``."""
    return SwitchState(dpid=dpid, snapshot=snapshot, fabric=fabric)


def may_write(state: SwitchState, config: SwitchConfig) -> bool:
    """Whether flow, group, meter mods and QoS writes may go out: always for the only
    controller; with roles, only as the master the switch confirmed."""
    if not config.roles:
        return True
    role = state.role
    return role is not None and role.name == "master" and role.confirmed


def want(
    state: SwitchState,
    reason: str,
    fresh: bool = False,
    port: tuple[int, PortState | None] | None = None,
) -> SwitchState:
    """Ask for a sync; asks made before the next sync starts become one."""
    wanted = state.wanted or Wanted()
    reasons = wanted.reasons if reason in wanted.reasons else (*wanted.reasons, reason)
    ports = wanted.ports if port is None else {**wanted.ports, port[0]: port[1]}
    return replace(state, wanted=Wanted(reasons, wanted.fresh or fresh, ports))


def updated_ports(
    ports: tuple[PortState, ...], updates: Mapping[int, PortState | None]
) -> tuple[PortState, ...]:
    """``ports`` with the port-status updates applied (``None``: the port is gone), by number:
    how a master's sync and a slave's observation both adopt what the switch said."""
    by_number = {port.number: port for port in ports}
    for number, port in updates.items():
        if port is None:
            by_number.pop(number, None)
        else:
            by_number[number] = port
    return tuple(sorted(by_number.values(), key=lambda p: p.number))
