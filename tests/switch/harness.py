"""The switch step (or the whole actor) against the simulated switch, on a fake clock.

``StepHarness`` runs ``step`` itself: every ``Send`` goes to an ``OfSwitch``
(which consumes the encoded bytes), the switch's answers queue up as
``Received`` events, and ``Timer`` commands go on a heap of the fake clock.
Nothing is delivered until the test says so (``settle``, ``advance``), so a
test can put any event between a request and its answer.  QoS work is not
run: it is recorded (``qos_work``) and a test answers it if it wants to.

``ActorHarness`` runs ``SwitchActor`` itself on the runtime's ``ManualRuntime``:
its link hands the bytes to the simulated switch and tells the answers back,
timers run on the runtime's fake clock, blocking work waits for
``complete_blocking``; observers, metrics and the fabric callback are recorded.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

from controller.actors.manual import ManualRuntime
from controller.actors.runtime import Ref
from controller.metrics import ControllerMetrics
from controller.openflow.observer import SyncReport
from controller.pipeline.desired import FabricInputs
from controller.pipeline.plan import PortState, SwitchInputs, SwitchPlan, plan
from controller.policy.load import parse_policy
from controller.policy.model import Policy
from controller.qos.ovsdb import Ovsdb
from controller.switch.actor import SwitchServices, spawn_switch
from controller.switch.commands import Command, FabricInput, Log, Metric, QosWork, Send, Timer
from controller.switch.events import Connected, Event, PolicySnapshot, Received, Tick
from controller.switch.state import SwitchConfig, SwitchState, initial_state
from controller.switch.step import step
from tests.support.ofswitch import OfSwitch, PortLike, PortSpec

DPID = 0x1A

NO_QOS = SwitchConfig(manage_qos=False, audit_interval_s=5.0, reply_timeout_s=2.0)


def policy(
    rules: Sequence[dict[str, object]] = (),
    detection: bool = False,
    fabric: bool = False,
) -> Policy:
    """A small policy: three classes, the given rules; detection and fabric on demand."""
    document: dict[str, object] = {
        "classes": {
            "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
            "training": {"priority": 1, "dscp": 26, "min_rate": "70%"},
            "best-effort": {"priority": 2, "dscp": 0, "min_rate": "10%"},
        },
        "default_class": "inference",
        "rules": list(rules),
    }
    if detection:
        document["detection"] = {
            "interval": "500ms",
            "elephant": {"rate": "10%", "for": "1s", "bytes": "32MiB", "class": "training"},
            "release_after": "5s",
        }
    if fabric:
        document["forwarding"] = {"mode": "fabric"}
    return parse_policy(document)


def rule(name: str, port: int, traffic_class: str = "training") -> dict[str, object]:
    return {"name": name, "match": {"ip_proto": "tcp", "tcp_dst": port}, "class": traffic_class}


def ports(*numbers: int) -> list[PortLike]:
    return [PortSpec(n, f"s{DPID:x}-eth{n}") for n in numbers]


class StepHarness:
    def __init__(
        self,
        snapshot: PolicySnapshot,
        switch_ports: Sequence[PortLike] = (),
        config: SwitchConfig = NO_QOS,
        dpid: int = DPID,
        switch: OfSwitch | None = None,
        conn: int = 0,
    ) -> None:
        self.switch = switch or OfSwitch(dpid, switch_ports or ports(1, 2))
        self.conn = conn
        """The connection it is to the switch (several controllers: one each)."""
        self.config = config
        self.state: SwitchState = initial_state(dpid, snapshot)
        self.now = 0.0
        self.inbox: deque[bytes] = deque()
        self.timers: list[tuple[float, int, Tick]] = []
        self._seq = itertools.count()
        self.commands: list[Command] = []
        self.sent: list[bytes] = []
        self.qos_work: list[QosWork] = []
        self.steps = 0

    # ---- driving --------------------------------------------------------------------

    def tell(self, event: Event) -> list[Command]:
        """Step one event (stamped with the fake clock if it carries ``now``)."""
        event = replace(event, now=self.now)
        self.switch.clock = self.now  # entries' ages are on the same clock
        self.state, commands = step(self.state, event, self.config)
        self.steps += 1
        self.commands += commands
        for command in commands:
            if isinstance(command, Send):
                self.sent.append(command.data)
                self.inbox.extend(self.switch.receive(command.data, self.conn))
            elif isinstance(command, Timer):
                due = self.now + command.delay_s
                heapq.heappush(self.timers, (due, next(self._seq), command.event))
            elif isinstance(command, QosWork):
                self.qos_work.append(command)
        return commands

    def connect(self, phase: float | None = None) -> None:
        self.tell(Connected(wall=1_000_000.0, audit_phase_s=phase))

    def deliver_one(self) -> bool:
        if not self.inbox:
            return False
        self.tell(Received(self.inbox.popleft()))
        return True

    def settle(self) -> None:
        """Deliver every queued answer (and the answers to what those provoke)."""
        while self.deliver_one():
            pass

    def release(self) -> None:
        """The switch's held answers, queued for delivery."""
        self.inbox.extend(self.switch.release())

    def advance(self, seconds: float) -> None:
        """Move the clock, firing due timers in order, settling after each."""
        target = self.now + seconds
        self.settle()
        while self.timers and self.timers[0][0] <= target:
            due, _, tick = heapq.heappop(self.timers)
            self.now = max(self.now, due)
            self.tell(tick)
            self.settle()
        self.now = target

    # ---- looking ----------------------------------------------------------------------

    def logs(self, level: int | None = None) -> list[str]:
        return [
            c.msg % c.args
            for c in self.commands
            if isinstance(c, Log) and (level is None or c.level == level)
        ]

    def metrics(self, name: str) -> list[Metric]:
        return [c for c in self.commands if isinstance(c, Metric) and c.name == name]

    def inputs(self) -> SwitchInputs:
        """The switch's inputs as the step sees them now (ports as the switch has them)."""
        state = self.state
        snapshot = state.snapshot
        live = self.switch.live_ports()
        ports = tuple(
            PortState(p.number, p.name, p.curr_speed_kbps * 1000, p.number in live, p.hw_addr)
            for p in self.switch.ports()
        )
        return SwitchInputs(
            state.dpid,
            ports,
            state.overrides,
            state.fabric,
            snapshot.version,
            snapshot.jobs_version,
        )

    def expected(self, fabric: FabricInputs | None = None) -> SwitchPlan:
        snapshot = self.state.snapshot
        inputs = self.inputs()
        if fabric is not None:
            inputs = replace(inputs, fabric=fabric)
        return plan(snapshot.policy, snapshot.jobs, inputs, snapshot.base_plans)

    def holds_plan(self) -> bool:
        """The simulated switch's tables are exactly the plan of the newest inputs."""
        want = self.expected().desired
        have = sorted((f.key, f.cookie) for f in self.switch.flows() if f.key.table_id != 3)
        wanted = sorted((f.key, f.cookie) for f in want.flows)
        groups = {gid: g for gid, g in self.switch.groups().items()}
        meters = {mid: m for mid, m in self.switch.meters().items()}
        return (
            have == wanted
            and groups == {g.group_id: g for g in want.groups}
            and all(meters.get(m.meter_id) == m for m in want.meters)
        )

    def mods(self) -> int:
        return len(self.switch.mods_received)


# ---- the actor on the deterministic runtime ---------------------------------------------------


class SimLink:
    """The connection: bytes to the simulated switch, its answers told back to the actor."""

    def __init__(self, switch: OfSwitch) -> None:
        self.switch = switch
        self.ref: Ref[Event] | None = None
        self.open = True

    def send(self, data: bytes) -> bool:
        if not self.open:
            return False
        assert self.ref is not None
        for reply in self.switch.receive(data):
            self.ref.tell(Received(reply))
        return True


class Recorder:
    """An observer that keeps the reports and ignores the rest."""

    def __init__(self) -> None:
        self.reports: list[SyncReport] = []
        self.said: list[str] = []
        """``synced`` and ``gone``, in the order the actor said them."""

    def switch_synced(self, report: SyncReport) -> None:
        self.reports.append(report)
        self.said.append("synced")

    def switch_gone(self, dpid: int) -> None:
        self.said.append("gone")

    def __getattr__(self, name: str) -> Any:
        return lambda *args: None


class ActorHarness:
    def __init__(
        self,
        snapshot: PolicySnapshot,
        config: SwitchConfig = NO_QOS,
        ovsdb: object = None,
        dpid: int = DPID,
        switch: OfSwitch | None = None,
    ) -> None:
        self.runtime = ManualRuntime(raise_errors=True)
        self.link = SimLink(switch or OfSwitch(dpid, ports(1, 2)))
        self.recorder = Recorder()
        self.told: list[FabricInput] = []
        self.gone: list[int] = []
        self.metrics = ControllerMetrics()
        services = SwitchServices(
            self.runtime,
            config,
            self.metrics,
            [cast(Any, self.recorder)],
            cast(Ovsdb, ovsdb),
            self.told.append,
            self.runtime.now,
            gone=self.gone.append,
        )
        self.actor, self.ref = spawn_switch(
            f"switch-{dpid:016x}", self.link, initial_state(dpid, snapshot), services
        )
        self.link.ref = self.ref

    @property
    def switch(self) -> OfSwitch:
        return self.link.switch
