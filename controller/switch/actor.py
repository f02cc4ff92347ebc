"""``SwitchActor``: one switch's step run as an actor, its commands carried out.

The actor holds the only reference to its switch's state; the runtime hands
it one event at a time, so nothing here needs a lock.  Everything it does
beyond calling ``step`` is carrying out commands: bytes to the connection,
timers to the runtime's timer thread, OVSDB/tc work to the runtime's
blocking pool (its result told back as an event), reports to observers, log
lines, metrics, and what the fabric owner learns.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from controller.actors.runtime import ActorSystem, Ref
from controller.metrics import ControllerMetrics
from controller.openflow.observer import SwitchObserver
from controller.qos.ovsdb import Ovsdb
from controller.switch import qoswork
from controller.switch.commands import (
    ClassCounts,
    Command,
    FabricInput,
    FlowsObserved,
    Gone,
    Log,
    Metric,
    QosApply,
    QosWork,
    QueuesObserved,
    Reclassified,
    Report,
    Send,
    SteppedDown,
    Timer,
)
from controller.switch.events import (
    UNSTAMPED,
    Disconnected,
    Event,
    QosDone,
    QosResult,
    QueueReadResult,
    QueuesRead,
)
from controller.switch.fastreplace import replace
from controller.switch.state import SwitchConfig, SwitchState
from controller.switch.step import step

LOG = logging.getLogger("flowlane.controller")


class Link(Protocol):
    """What the actor needs of its switch's connection (the hub's ``Connection`` is one)."""

    def send(self, data: bytes) -> bool: ...


@dataclass(frozen=True)
class SayOnce:
    """A line to log once per process (one ovs-vswitchd serves every local switch)."""

    level: int
    text: str


class OnceLog:
    """The actor that owns the lines already said: every switch tells it, none shares a set."""

    def __init__(self) -> None:
        self._said: set[str] = set()

    def receive(self, event: SayOnce) -> None:
        if event.text not in self._said:
            self._said.add(event.text)
            LOG.log(event.level, "%s", event.text)


def _say(event: SayOnce) -> None:
    LOG.log(event.level, "%s", event.text)


@dataclass
class SwitchServices:
    """What every switch actor needs from the controller around it (the app builds one)."""

    runtime: ActorSystem
    """Blocking work (OVSDB, tc) runs on its pool, keyed by switch."""
    config: SwitchConfig = field(default_factory=SwitchConfig)
    metrics: ControllerMetrics = field(default_factory=ControllerMetrics)
    observers: Sequence[SwitchObserver] = ()
    ovsdb: Ovsdb | None = None
    """Needed when ``config.manage_qos``."""
    fabric: Callable[[FabricInput], None] = lambda _input: None
    """Ports, flows seen and port rates, for the fabric owner (called on the actor's thread:
    it must only tell)."""
    clock: Callable[[], float] = time.monotonic
    """Stamps events that arrive without a time (``events.UNSTAMPED``)."""
    say_once: Callable[[SayOnce], None] = _say
    stepped_down: Callable[[SteppedDown], None] = lambda _command: None
    may_write_qos: Callable[[int], bool] = lambda _dpid: True
    """Asked on the blocking pool just before a QoS write: with several controllers, whether
    this instance still holds the switch's lease (the switch fences a stale master's
    flow-mods, but nothing fences its OVSDB writes). Always yes for a lone controller."""
    gone: Callable[[int], None] = lambda _dpid: None
    """The switch left (its actor's last word): the app tells the fabric owner."""
    """The switch refused this controller as master: mastership re-reads Redis (called on
    the actor's thread: it must only tell)."""
    """Where ``once`` lines go: the app tells its ``OnceLog`` actor (alone, each is said)."""


class SwitchActor:
    """One switch: ``receive`` steps its state and carries out the commands.

    Spawn it with ``spawn_switch``, or spawn it and ``bind`` the ref yourself: timers and the
    results of blocking work come back through that ref.
    """

    def __init__(self, link: Link, state: SwitchState, services: SwitchServices) -> None:
        self.link = link
        self.state = state
        self.services = services
        self.tag = state.tag
        self._ref: Ref[Event] | None = None

    def bind(self, ref: Ref[Event]) -> None:
        self._ref = ref

    def receive(self, event: Event) -> None:
        now = getattr(event, "now", 0.0)
        if isinstance(now, float) and math.isnan(now):
            event = replace(event, now=self.services.clock())
        try:
            self.state, commands = step(self.state, event, self.services.config)
        except Exception:
            # A bug, not the switch: the state stays as it was, the next event goes on.
            LOG.exception("switch %s: step failed on %s", self.tag, type(event).__name__)
            return
        for command in commands:
            try:
                self._carry_out(command)
            except Exception:
                LOG.exception("switch %s: %r failed", self.tag, type(command).__name__)
        if isinstance(event, Disconnected) and self._ref is not None:
            self._ref.stop()  # its last event: nothing it says can follow its goodbye

    # ---- commands -------------------------------------------------------------------

    def _carry_out(self, command: Command) -> None:
        if isinstance(command, Send):
            self.link.send(command.data)  # False: closing; ``Disconnected`` follows
        elif isinstance(command, Log):
            self._log(command)
        elif isinstance(command, Metric):
            metric = getattr(self.services.metrics, command.name)
            if command.labels:
                metric = metric.labels(*command.labels)
            getattr(metric, command.op)(command.value)
        elif isinstance(command, Timer):
            # Stamped when handled: a late timer's work is dated when it is done.
            event = replace(command.event, now=UNSTAMPED)
            self._bound().tell_after(command.delay_s, event)
        elif isinstance(command, QosWork):
            self._qos(command)
        elif isinstance(command, FabricInput):
            self.services.fabric(command)
        elif isinstance(command, ClassCounts):
            self.services.metrics.totals.set_classes(self.tag, command.totals)
        elif isinstance(command, SteppedDown):
            self.services.stepped_down(command)
        elif isinstance(command, Gone):
            self._observe("switch_gone", command.dpid)
            self.services.metrics.totals.forget(self.tag)
            self.services.gone(command.dpid)
        elif isinstance(command, QueuesObserved):
            self.services.metrics.totals.set_queues(self.tag, command.queues)
            self._observe("queues_observed", self.state.dpid, list(command.queues))
            if command.drops:
                self._observe("queue_drops", self.state.dpid, list(command.drops))
        else:
            self._report(command)

    def _report(self, command: Report | Reclassified | FlowsObserved) -> None:
        if isinstance(command, Report):
            self._observe("switch_synced", command.report)
        elif isinstance(command, Reclassified):
            self._observe("flows_reclassified", list(command.changes))
        else:
            self._observe("flows_observed", self.state.dpid, list(command.flows))

    def _observe(self, method: str, *args: object) -> None:
        for observer in self.services.observers:
            try:
                getattr(observer, method)(*args)
            except Exception:
                LOG.exception("switch %s: observer %r failed", self.tag, observer)

    def _log(self, command: Log) -> None:
        if command.once:
            self.services.say_once(SayOnce(command.level, command.msg % command.args))
            return
        if command.exc_text is None:
            LOG.log(command.level, command.msg, *command.args)
        else:
            LOG.log(command.level, command.msg + "\n%s", *command.args, command.exc_text.rstrip())

    def _qos(self, command: QosWork) -> None:
        ovsdb = self.services.ovsdb
        ref = self._bound()
        job = command.job
        dpid = self.state.dpid
        if ovsdb is None:
            raise RuntimeError("QoS work asked for, but the actor was given no OVSDB")
        if isinstance(job, QosApply):
            apply = job

            def done_apply(result: QosResult | BaseException) -> None:
                if isinstance(result, BaseException):
                    result = QosResult(apply.plans, error=repr(result))
                ref.tell(QosDone(result))

            may_write = self.services.may_write_qos

            def fenced_apply() -> QosResult:
                if not may_write(dpid):
                    # Woken past its lease (or stepped down since): the queues are the new
                    # master's. Nothing is written; this instance no longer dispatches.
                    return QosResult(apply.plans, fenced=True)
                return qoswork.apply(ovsdb, dpid, apply)

            self.services.runtime.blocking(fenced_apply, done_apply, key=f"qos-{self.tag}")
            return
        read = job

        def done_read(result: QueueReadResult | BaseException) -> None:
            if isinstance(result, BaseException):
                result = QueueReadResult({}, error=repr(result))
            ref.tell(QueuesRead(result))

        self.services.runtime.blocking(
            lambda: qoswork.read_queues(ovsdb, dpid, read), done_read, key=f"qos-{self.tag}"
        )

    def _bound(self) -> Ref[Event]:
        if self._ref is None:
            raise RuntimeError("SwitchActor used before bind(ref)")
        return self._ref


def spawn_switch(
    name: str, link: Link, state: SwitchState, services: SwitchServices
) -> tuple[SwitchActor, Ref[Event]]:
    """Spawn a switch actor on ``services.runtime`` and bind it to its ref."""
    actor = SwitchActor(link, state, services)
    ref: Ref[Event] = services.runtime.spawn(name, actor)
    actor.bind(ref)
    return actor, ref
