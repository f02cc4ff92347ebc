"""The registry decides which connection serves a datapath id, in-process.

No switch, no thread: connections record what is sent to them, switch
references record what they are told, and a probe's timer fires when the
test says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from controller.fabric.model import Topology
from controller.metrics import ControllerMetrics
from controller.openflow.settings import ActivePolicy, ControllerSettings
from controller.pipeline.desired import FabricInputs
from controller.pipeline.plan import PortState
from controller.policy.jobs import JobSpec
from controller.policy.load import load_policy_file
from controller.shell.registry import (
    Claim,
    FabricPublished,
    Gone,
    JobsArrived,
    PolicyArrived,
    PortsKnown,
    ProbeAnswered,
    ProbeExpired,
    QosChanged,
    Refused,
    Registry,
    RegistryEvent,
    probe_reply,
)
from controller.switch.events import PolicySnapshot

POLICY = load_policy_file(Path(__file__).parents[2] / "policies" / "default.yaml")


@dataclass(eq=False)
class FakeConn:
    dpid: int
    address: str
    sent: list[bytes] = field(default_factory=list)
    closed: bool = False

    def send(self, data: bytes) -> bool:
        self.sent.append(data)
        return not self.closed

    def close(self) -> None:
        self.closed = True


@dataclass(eq=False)
class FakeRef:
    told: list[Any] = field(default_factory=list)
    stopped: bool = False

    def tell(self, event: Any) -> None:
        self.told.append(event)

    def stop(self) -> None:
        self.stopped = True


class RecordingSwitches:
    def __init__(self) -> None:
        self.calls: list[tuple[str, FakeRef, Any]] = []

    def serve(self, ref: Any, dpid: int, snapshot: PolicySnapshot) -> None:
        self.calls.append(("serve", ref, (snapshot.version, snapshot.jobs)))

    def policy(self, ref: Any, snapshot: PolicySnapshot) -> None:
        self.calls.append(("policy", ref, (snapshot.version, snapshot.jobs)))

    def fabric(self, ref: Any, inputs: FabricInputs | None) -> None:
        self.calls.append(("fabric", ref, inputs))

    def qos_changed(self, ref: Any, ports: frozenset[str]) -> None:
        self.calls.append(("qos", ref, ports))

    def disconnected(self, ref: Any, gone: bool) -> None:
        self.calls.append(("disconnected", ref, gone))

    def of(self, ref: FakeRef) -> list[str]:
        return [kind for kind, target, _ in self.calls if target is ref]


class Observer:
    def __init__(self) -> None:
        self.refused: list[tuple[int, str, str]] = []
        self.gone: list[int] = []

    def switch_refused(self, dpid: int, address: str, reason: str) -> None:
        self.refused.append((dpid, address, reason))

    def switch_gone(self, dpid: int) -> None:
        self.gone.append(dpid)


@dataclass
class World:
    registry: Registry
    switches: RecordingSwitches
    timers: list[tuple[float, RegistryEvent, list[bool]]]
    observer: Observer
    policies: list[Any]

    def fire(self) -> None:
        """Every pending timer that was not cancelled, as the runtime would."""
        due, self.timers[:] = list(self.timers), []
        for _delay, event, cancelled in due:
            if not cancelled[0]:
                self.registry.receive(event)


@pytest.fixture
def world() -> World:
    settings = ControllerSettings(
        ActivePolicy(POLICY, 1), metrics=ControllerMetrics(CollectorRegistry())
    )
    observer = Observer()
    settings.observers.append(observer)  # type: ignore[arg-type]
    switches = RecordingSwitches()
    timers: list[tuple[float, RegistryEvent, list[bool]]] = []
    policies: list[Any] = []

    def schedule(delay: float, event: RegistryEvent) -> Callable[[], None]:
        cancelled = [False]
        timers.append((delay, event, cancelled))
        return lambda: cancelled.__setitem__(0, True)

    registry = Registry(settings, switches, schedule, policies.append)
    return World(registry, switches, timers, observer, policies)


def connect(world: World, dpid: int, address: str) -> tuple[FakeConn, FakeRef]:
    conn, ref = FakeConn(dpid, address), FakeRef()
    world.registry.receive(Claim(conn, ref))
    return conn, ref


def test_a_first_connection_is_served_with_the_active_policy(world: World) -> None:
    conn, ref = connect(world, 7, "10.0.0.1:1")
    assert world.registry.served[7].conn is conn
    assert world.switches.calls == [("serve", ref, (1, ()))]


def test_a_twin_whose_original_answers_is_refused(world: World) -> None:
    old, _ = connect(world, 7, "10.0.0.1:1")
    twin, twin_ref = connect(world, 7, "10.0.0.2:2")
    assert len(old.sent) == 1 and not twin.sent  # the probe goes to the served connection
    reply = bytearray(old.sent[0])
    reply[1] = 21  # the switch answers the barrier
    assert probe_reply(bytes(reply))
    world.registry.receive(ProbeAnswered(old))
    world.fire()  # the cancelled timer must not take over
    assert world.registry.served[7].conn is old
    assert twin.closed and twin_ref.stopped and not old.closed
    assert world.switches.of(twin_ref) == []
    assert world.observer.refused == [(7, "10.0.0.2:2", world.observer.refused[0][2])]
    assert "10.0.0.1:1" in world.observer.refused[0][2]


def test_a_switch_that_reconnected_takes_over_when_its_old_connection_is_silent(
    world: World,
) -> None:
    old, old_ref = connect(world, 7, "10.0.0.1:1")
    new, new_ref = connect(world, 7, "10.0.0.1:2")
    world.fire()
    assert world.registry.served[7].conn is new
    assert old.closed and not new.closed
    assert world.switches.of(old_ref) == ["serve", "disconnected"]
    # No goodbye from the retired actor: the switch is still served, by the new one.
    assert ("disconnected", old_ref, False) in world.switches.calls
    assert world.switches.of(new_ref) == ["serve"]
    assert world.observer.refused == []


def test_an_answer_after_the_takeover_changes_nothing(world: World) -> None:
    old, _ = connect(world, 7, "a:1")
    new, _ = connect(world, 7, "a:2")
    world.fire()
    world.registry.receive(ProbeAnswered(old))
    assert world.registry.served[7].conn is new and not new.closed


def test_the_probed_connection_closing_hands_the_id_to_the_newcomer(world: World) -> None:
    old, old_ref = connect(world, 7, "a:1")
    new, new_ref = connect(world, 7, "a:2")
    world.registry.receive(Gone(old, old_ref))
    assert world.registry.served[7].conn is new
    assert world.switches.of(new_ref) == ["serve"]
    world.fire()  # the probe's timer was cancelled
    assert world.switches.of(new_ref) == ["serve"]


def test_a_refused_newcomer_hanging_up_leaves_the_served_one_alone(world: World) -> None:
    old, _ = connect(world, 7, "a:1")
    new, new_ref = connect(world, 7, "b:1")
    world.registry.receive(ProbeAnswered(old))
    world.registry.receive(Gone(new, new_ref))
    assert world.registry.served[7].conn is old
    assert world.observer.gone == []


def test_disconnect_forgets_the_switch_and_tells_the_fabric(world: World) -> None:
    conn, ref = connect(world, 7, "a:1")
    world.registry.receive(Gone(conn, ref))
    assert 7 not in world.registry.served
    # The goodbye is the switch actor's (after its last report), not the registry's.
    assert world.switches.calls[-1] == ("disconnected", ref, True)
    assert not ref.stopped and world.observer.gone == []


def test_policy_and_jobs_reach_every_served_switch_as_one_pair(world: World) -> None:
    _, a = connect(world, 1, "a:1")
    _, b = connect(world, 2, "b:1")
    job = JobSpec.model_validate(
        {"name": "j", "class": "inference", "endpoints": [{"ipv4": "10.0.0.1"}]}
    )
    world.registry.receive(JobsArrived((job,)))
    world.registry.receive(PolicyArrived(POLICY, 2))
    for ref in (a, b):
        assert [c[2] for c in world.switches.calls if c[1] is ref] == [
            (1, ()),
            (1, (job,)),
            (2, (job,)),
        ]
    assert world.policies == [POLICY]
    _, c = connect(world, 3, "c:1")  # a later switch starts from the newest pair
    assert world.switches.calls[-1] == ("serve", c, (2, (job,)))


def test_fabric_inputs_go_to_their_switch_and_to_a_switch_served_later(world: World) -> None:
    _, a = connect(world, 1, "a:1")
    inputs = FabricInputs(Topology(switches=frozenset({1, 2})), frozenset({5}))
    world.registry.receive(FabricPublished({1: inputs, 2: inputs}))
    assert ("fabric", a, inputs) in world.switches.calls
    _, b = connect(world, 2, "b:1")
    assert world.switches.of(b) == ["serve", "fabric"]


def test_qos_changes_reach_only_the_switch_with_the_port(world: World) -> None:
    _, a = connect(world, 1, "a:1")
    _, b = connect(world, 2, "b:1")
    world.registry.receive(PortsKnown(1, (PortState(1, "s1-eth1", 10**9),)))
    world.registry.receive(PortsKnown(2, (PortState(1, "s2-eth1", 10**9),)))
    world.registry.receive(QosChanged(frozenset({"s2-eth1"})))
    assert "qos" not in world.switches.of(a) and "qos" in world.switches.of(b)


def test_a_refused_certificate_is_recorded_and_closed(world: World) -> None:
    conn = FakeConn(9, "c:1")
    world.registry.receive(Refused(conn, "certificate names 0000000000000008"))
    assert conn.closed and 9 not in world.registry.served
    assert world.observer.refused[0][2] == "certificate names 0000000000000008"
    assert not world.timers


def test_the_probe_timer_carries_the_probed_connection(world: World) -> None:
    old, _ = connect(world, 7, "a:1")
    connect(world, 7, "a:2")
    [(delay, event, _)] = world.timers
    assert event == ProbeExpired(7, old) and delay == pytest.approx(1.0)
