"""Everything one switch's step asks of the world, as frozen values the actor carries out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from controller.classify.records import ObservedFlow, Reclassification
from controller.openflow.fabric_events import (
    FlowsSeen,
    MasterConfirmed,
    MasterLeft,
    PortRates,
    SwitchPorts,
)
from controller.openflow.observer import SyncReport
from controller.qos.ovsdb import Bridge
from controller.qos.plan import PortQos
from controller.qos.telemetry import QueueStats
from controller.switch.events import Tick


@dataclass(frozen=True)
class Send:
    """Whole encoded OpenFlow messages, xids set (one write: a batch and its barrier)."""

    data: bytes


@dataclass(frozen=True)
class Timer:
    """Deliver ``event`` after ``delay_s`` (its ``now`` is the time it was due; the actor
    stamps the time it is handled)."""

    delay_s: float
    event: Tick


@dataclass(frozen=True)
class QosApply:
    """Queues of every planned port to ``plans`` (OVSDB, tc), and what goes with them."""

    plans: Mapping[str, PortQos]
    bridge: Bridge | None
    """The bridge found before (None: look it up first)."""
    count_limit: int | None = None
    """Cap the counting table at this many entries (None: already capped, or no detection)."""
    refresh_interval_s: float | None = None
    """Check the switch's counter refresh against this detection interval (None: checked)."""


@dataclass(frozen=True)
class QueueRead:
    """Read the HTB classes of every planned port (queue telemetry)."""

    plans: Mapping[str, PortQos]
    bridge: Bridge | None


@dataclass(frozen=True)
class QosWork:
    """Blocking OVSDB/tc work: run on the runtime's blocking pool keyed by the switch, one at
    a time; its result comes back as ``QosDone`` (apply) or ``QueuesRead`` (read)."""

    job: QosApply | QueueRead


@dataclass(frozen=True)
class Report:
    """The switch confirmed a plan (``SwitchObserver.switch_synced``)."""

    report: SyncReport


@dataclass(frozen=True)
class Reclassified:
    """Flows detection moved between classes (``SwitchObserver.flows_reclassified``)."""

    changes: tuple[Reclassification, ...]


@dataclass(frozen=True)
class FlowsObserved:
    """The live flow view for people (``SwitchObserver.flows_observed``)."""

    flows: tuple[ObservedFlow, ...]


@dataclass(frozen=True)
class QueuesObserved:
    """Queue telemetry: metrics (``totals.set_queues``), ``queues_observed`` and, when a
    latency class started dropping, ``queue_drops``."""

    queues: tuple[QueueStats, ...]
    drops: tuple[tuple[QueueStats, int], ...] = ()


@dataclass(frozen=True)
class ClassCounts:
    """Per-class packet and byte counters from the audit's read (``totals.set_classes``)."""

    totals: Mapping[str, tuple[int, int]]


@dataclass(frozen=True)
class Log:
    """One line on the ``flowlane.controller`` logger: ``msg % args``.

    ``exc_text`` (a traceback) is appended as ``LOG.exception`` would; ``once`` lines are
    logged once per process (one ovs-vswitchd serves every local switch).
    """

    level: int
    msg: str
    args: tuple[object, ...] = ()
    exc_text: str | None = None
    once: bool = False


MetricOp = Literal["inc", "set", "observe"]


@dataclass(frozen=True)
class Metric:
    """``settings.metrics.<name>[.labels(*labels)].<op>(value)``."""

    name: str
    op: MetricOp
    value: float = 1.0
    labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class FabricInput:
    """Something the fabric owner learns from this switch: the fabric's own event, told to
    it as it is (unstamped: the owner dates it when it handles it)."""

    item: SwitchPorts | FlowsSeen | PortRates | MasterConfirmed | MasterLeft


@dataclass(frozen=True)
class SteppedDown:
    """The switch refused this controller as its master: mastership must re-read Redis
    (and take a new generation if this instance still owns the switch)."""

    dpid: int
    generation: int
    reason: str


@dataclass(frozen=True)
class Gone:
    """The switch left: forget its report, views, metrics and place in the fabric. Sent
    by its own actor, so it comes after everything that actor published."""

    dpid: int


Command = (
    Gone
    | Send
    | Timer
    | QosWork
    | Report
    | Reclassified
    | FlowsObserved
    | QueuesObserved
    | ClassCounts
    | Log
    | Metric
    | FabricInput
    | SteppedDown
)
