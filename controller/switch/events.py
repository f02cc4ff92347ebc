"""Everything that reaches one switch's actor, as frozen values.

Every event carries the monotonic time it is handled at (``now``): the step
reads no clock.  Code outside the switch (the hub, the policy owner, the
fabric owner) may leave ``now`` unset (``UNSTAMPED``); the actor stamps it
with its clock when the event is handled, so a test with a fake clock and
the live controller run the same step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from controller.pipeline.desired import FabricInputs
from controller.pipeline.planner import BasePlans
from controller.policy.jobs import JobSpec
from controller.policy.model import Policy
from controller.qos.ovsdb import Bridge
from controller.qos.plan import PortQos
from controller.qos.provision import QosOutcome
from controller.qos.telemetry import ClassCounters

UNSTAMPED: Final = math.nan
"""``now`` of an event not yet stamped by the actor (NaN: never equal, never due)."""


@dataclass(frozen=True)
class PolicySnapshot:
    """A policy and the job set it is applied with: they always travel together, so one sync
    never pairs policy version N with the jobs of a later moment."""

    policy: Policy
    version: int | None = None
    jobs: tuple[JobSpec, ...] = ()
    jobs_version: int = 0
    base_plans: BasePlans | None = field(default=None, compare=False, repr=False)
    """Plans shared by every switch of this policy (``ActivePolicy.plans``); None: plan alone."""
    since: float = 0.0
    """Monotonic time the policy became active (``apply_seconds`` counts from here)."""


@dataclass(frozen=True)
class Connected:
    """The switch finished its handshake (FEATURES_REPLY): read it and bring it to its plan."""

    now: float = UNSTAMPED
    wall: float = 0.0
    """Wall-clock time at ``now`` (``connected_at`` in reports, the flow view's times)."""
    audit_phase_s: float | None = None
    """Delay to this switch's first audit (switches spread over the interval); None: one
    whole interval."""


@dataclass(frozen=True)
class Received:
    """One whole OpenFlow message from the switch (reply, error, barrier, port status)."""

    data: bytes
    now: float = UNSTAMPED


@dataclass(frozen=True)
class PolicyChanged:
    snapshot: PolicySnapshot
    now: float = UNSTAMPED


@dataclass(frozen=True)
class FabricChanged:
    """The fabric owner's inputs for this switch (None: not fabric forwarding)."""

    inputs: FabricInputs | None
    reason: str = "fabric"
    now: float = UNSTAMPED


TickKind = Literal["audit", "detect", "ports", "queues", "retry", "deadline"]


@dataclass(frozen=True)
class Tick:
    """A timer the step asked for (``commands.Timer``) came due.

    ``epoch`` is the connection it was set for: a tick of an earlier
    connection is ignored, so a reused actor never runs two chains of one timer.
    """

    kind: TickKind
    epoch: int
    now: float = UNSTAMPED


@dataclass(frozen=True)
class QosResult:
    """What one ``QosApply`` did (see ``qoswork.apply``)."""

    plans: Mapping[str, PortQos]
    """The plans it applied (the very mapping the step sent: compared by identity)."""
    bridge: Bridge | None = None
    bridge_error: str | None = None
    outcome: QosOutcome | None = None
    count_limited: int | None = None
    """The counting table's cap now set (None: not asked, or it failed)."""
    count_error: str | None = None
    refresh_warning: str | None = None
    refresh_error: str | None = None
    error: str | None = None
    """An unexpected failure, with its traceback."""
    fenced: bool = False
    """Nothing written: this instance no longer held the switch's lease when the work ran."""


@dataclass(frozen=True)
class QueueReadResult:
    """The HTB classes of every planned port (see ``qoswork.read_queues``)."""

    counters: Mapping[str, Mapping[str, ClassCounters]]
    """Port name -> class id -> counters, for the ports that could be read."""
    burst_short: frozenset[str] = frozenset()
    """Ports whose root class lost its burst (OVS reconfigured them) or whose classes lack
    their bounded queue (a class OVS made after the reconcile that asked for it)."""
    errors: Mapping[str, str] = field(default_factory=dict)
    wall: float = 0.0
    bridge: Bridge | None = None
    bridge_error: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class QosDone:
    result: QosResult
    now: float = UNSTAMPED


@dataclass(frozen=True)
class QueuesRead:
    result: QueueReadResult
    now: float = UNSTAMPED


@dataclass(frozen=True)
class QosChanged:
    """OVSDB says a port of this switch changed QoS: OVS dropped its tc filters with the old
    qdisc, so queues and filters are checked now, not at the next audit."""

    now: float = UNSTAMPED


@dataclass(frozen=True)
class Disconnected:
    """The connection is gone; the actor stops after this event.

    ``gone``: the switch is no longer served here, so what was published about it is
    forgotten (by this actor, after its last report: one sender, in order). False: a
    new connection of the same switch took over, and its actor publishes from now on."""

    gone: bool = True
    now: float = UNSTAMPED


@dataclass(frozen=True)
class RoleChanged:
    """Mastership's word for this switch: be its master with this generation id (taken,
    fenced, from the switch's counter in Redis), or its slave (the newest generation)."""

    role: Literal["master", "slave"]
    generation_id: int
    now: float = UNSTAMPED


Event = (
    Connected
    | Received
    | PolicyChanged
    | FabricChanged
    | Tick
    | QosDone
    | QueuesRead
    | QosChanged
    | Disconnected
    | RoleChanged
)
"""Open for more: ``step`` ignores what it does not know."""
