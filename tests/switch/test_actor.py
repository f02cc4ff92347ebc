"""``SwitchActor`` on the deterministic runtime, against the simulated switch: the commands
carried out (bytes, timers, blocking work, logs, metrics, observers, the fabric callback)."""

from __future__ import annotations

import logging
import threading
from typing import Any, cast

import pytest

from controller.actors.manual import ManualRuntime
from controller.actors.runtime import Runtime
from controller.metrics import ControllerMetrics
from controller.openflow.fabric_events import SwitchPorts
from controller.openflow.observer import SyncReport
from controller.qos.ovsdb import Bridge, OvsdbError
from controller.switch.actor import OnceLog, SwitchActor, SwitchServices, spawn_switch
from controller.switch.commands import Log
from controller.switch.events import (
    Connected,
    Disconnected,
    PolicyChanged,
    PolicySnapshot,
    QosChanged,
)
from controller.switch.state import SwitchConfig, initial_state
from tests.support.ofswitch import OfSwitch
from tests.switch.harness import DPID, ActorHarness, Recorder, SimLink, policy, ports, rule

TAG = f"{DPID:016x}"
ONE = PolicySnapshot(policy([rule("a", 5001)]), 1)
TWO = PolicySnapshot(policy([rule("a", 5001), rule("b", 5002)]), 2)


class NoBridgeOvsdb:
    """An OVSDB that knows no bridge of this datapath (a remote switch), or cannot be read."""

    def __init__(self, error: bool = False) -> None:
        self.lookups = 0
        self.error = error

    def bridge_for(self, datapath_id: int) -> Bridge | None:
        self.lookups += 1
        if self.error:
            raise OvsdbError([], "connection refused")
        return None


def spawned(config: SwitchConfig, ovsdb: object = None) -> ActorHarness:
    return ActorHarness(ONE, config, ovsdb)


def _sample(metrics: ControllerMetrics, name: str, labels: dict[str, str]) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_an_actor_brings_its_switch_to_the_plan_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = SwitchConfig(manage_qos=False)
    rig = spawned(config)
    runtime, ref = rig.runtime, rig.ref
    caplog.set_level(logging.INFO, logger="flowlane.controller")
    ref.tell(Connected(wall=1000.0))
    runtime.run_until_idle()
    mods = len(rig.switch.mods_received)
    assert mods > 0
    assert f"switch {TAG} in sync (connect): +{mods} -0 =0 flows" in caplog.messages
    (report,) = rig.recorder.reports
    assert report.connected_at == 1000.0 and report.policy_version == 1
    assert report.inputs is not None and report.inputs.ports == report.ports
    assert [t.item for t in rig.told] == [SwitchPorts(DPID, report.ports)]
    metrics = rig.metrics
    assert _sample(metrics, "flowlane_switch_policy_version", {"dpid": TAG}) == 1
    ref.tell(PolicyChanged(TWO))
    runtime.run_until_idle()
    assert any(
        line.startswith(f"switch {TAG} in sync (policy version 2): +") for line in caplog.messages
    )
    assert len(rig.recorder.reports) == 2


def test_timers_run_on_the_runtime_clock() -> None:
    config = SwitchConfig(manage_qos=False, audit_interval_s=5.0)
    rig = spawned(config)
    runtime, ref = rig.runtime, rig.ref
    ref.tell(Connected(wall=1000.0, audit_phase_s=1.0))
    runtime.run_until_idle()
    reads = len(rig.switch.messages_received)
    runtime.advance(1.0)  # the audit re-reads ports and tables
    assert len(rig.switch.messages_received) == reads + 4
    runtime.advance(5.0)
    assert len(rig.switch.messages_received) == reads + 8


def test_a_disconnected_actor_sends_nothing_more() -> None:
    config = SwitchConfig(manage_qos=False)
    rig = spawned(config)
    runtime, ref = rig.runtime, rig.ref
    ref.tell(Connected(wall=1000.0, audit_phase_s=1.0))
    runtime.run_until_idle()
    received = len(rig.switch.messages_received)
    ref.tell(Disconnected())
    runtime.advance(30.0)
    ref.tell(PolicyChanged(TWO))
    runtime.run_until_idle()
    assert len(rig.switch.messages_received) == received


def test_queue_work_runs_on_the_blocking_pool_one_item_at_a_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ovsdb = NoBridgeOvsdb()
    config = SwitchConfig(manage_qos=True)
    rig = spawned(config, ovsdb)
    runtime, ref = rig.runtime, rig.ref
    caplog.set_level(logging.DEBUG, logger="flowlane.controller")
    ref.tell(Connected(wall=1000.0))
    runtime.run_until_idle()
    assert runtime.pending_blocking(f"qos-{TAG}") == 1
    ref.tell(QosChanged())
    ref.tell(QosChanged())
    runtime.run_until_idle()
    assert runtime.pending_blocking() == 1  # the asks wait for the item out, as one
    runtime.complete_blocking()
    assert ovsdb.lookups == 1
    assert (
        f"switch {TAG}: QoS skipped (bridge not in the local OVSDB, or OVSDB unreachable)"
        in caplog.messages
    )
    assert runtime.pending_blocking() == 1  # the coalesced ask
    runtime.complete_blocking()
    assert runtime.pending_blocking() == 0


def test_an_unreadable_ovsdb_is_logged_as_before(caplog: pytest.LogCaptureFixture) -> None:
    config = SwitchConfig(manage_qos=True)
    rig = spawned(config, NoBridgeOvsdb(error=True))
    runtime, ref = rig.runtime, rig.ref
    ref.tell(Connected(wall=1000.0))
    runtime.settle()
    assert any(
        line.startswith(f"switch {TAG}: cannot read OVSDB bridges: ")
        and line.endswith("will retry")
        for line in caplog.messages
    )


def test_a_line_said_once_is_said_once_across_switches(caplog: pytest.LogCaptureFixture) -> None:
    config = SwitchConfig(manage_qos=False)
    runtime = ManualRuntime()
    once = runtime.spawn("once", OnceLog())
    services = SwitchServices(runtime, config, ControllerMetrics(), say_once=once.tell)
    actors = [SwitchActor(SimLink(OfSwitch(d)), initial_state(d, ONE), services) for d in (1, 2)]
    for actor in actors:
        actor._carry_out(Log(logging.WARNING, "%s", ("refresh too slow",), once=True))
    runtime.run_until_idle()
    assert caplog.messages.count("refresh too slow") == 1


def test_a_log_with_a_traceback_keeps_it() -> None:
    runtime = ManualRuntime()
    services = SwitchServices(runtime, SwitchConfig(manage_qos=False))
    actor = SwitchActor(SimLink(OfSwitch(1)), initial_state(1, ONE), services)
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    logging.getLogger("flowlane.controller").addHandler(handler)
    try:
        actor._carry_out(
            Log(
                logging.ERROR, "switch %s: sync (%s) failed; will retry", ("x", "y"), "Traceback…\n"
            )
        )
    finally:
        logging.getLogger("flowlane.controller").removeHandler(handler)
    assert records[0].getMessage() == "switch x: sync (y) failed; will retry\nTraceback…"


def test_many_switch_actors_on_the_threaded_runtime_all_reach_their_plan() -> None:
    """The real runtime (pool threads, timer thread): each actor owns its state, so twenty
    switches synced at once on two threads all end holding their plan."""
    runtime = Runtime(threads=2, name="switch-test")
    switches = [OfSwitch(dpid, ports(1, 2)) for dpid in range(1, 21)]
    done = threading.Semaphore(0)

    class Synced(Recorder):
        def switch_synced(self, report: SyncReport) -> None:
            done.release()

    try:
        services = SwitchServices(
            runtime, SwitchConfig(manage_qos=False), observers=[cast(Any, Synced())]
        )
        for switch in switches:
            link = SimLink(switch)
            _, link.ref = spawn_switch(
                f"switch-{switch.dpid:016x}", link, initial_state(switch.dpid, ONE), services
            )
            link.ref.tell(Connected(wall=1000.0))
        for _ in switches:
            assert done.acquire(timeout=10.0)
        threads = runtime.thread_count()
    finally:
        runtime.stop()
    wanted = len(switches[0].flows())
    assert wanted > 0 and all(len(s.flows()) == wanted for s in switches)
    assert threads <= 2 + 1 + 2  # pool, timer, blocking: not one per switch


def test_the_goodbye_follows_the_last_report_and_ends_the_actor() -> None:
    harness = ActorHarness(ONE)
    harness.ref.tell(Connected(wall=1000.0))
    harness.runtime.settle()
    assert harness.recorder.said == ["synced"]
    harness.ref.tell(PolicyChanged(TWO))  # its report is still to come when the switch goes
    harness.ref.tell(Disconnected())
    harness.ref.tell(PolicyChanged(ONE))  # after the goodbye: never handled
    harness.runtime.settle()
    assert harness.recorder.said[-1] == "gone" and harness.gone == [DPID]
    assert harness.actor.state.snapshot is TWO


def test_a_connection_taken_over_ends_its_actor_without_a_goodbye() -> None:
    harness = ActorHarness(ONE)
    harness.ref.tell(Connected(wall=1000.0))
    harness.runtime.settle()
    harness.ref.tell(Disconnected(gone=False))
    harness.ref.tell(PolicyChanged(TWO))
    harness.runtime.settle()
    assert "gone" not in harness.recorder.said and harness.gone == []
    assert harness.actor.state.snapshot is ONE
