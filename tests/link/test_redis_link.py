"""The controller's Redis follower against a real redis-server (no switch needed).

Besides following versions: heartbeats that nothing delays, and a store that
comes back empty or older (FLUSHALL, or versions removed by hand) flagged,
counted and never followed backwards.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import yaml
from flowlane_bench import harness
from prometheus_client import CollectorRegistry

from controller.fabric.model import Host, Link, PortRef, Topology
from controller.flowid import FlowId
from controller.link.redis_link import RedisLink, switch_report
from controller.metrics import ControllerMetrics
from controller.openflow.observer import PortState, SyncReport
from controller.pipeline.desired import FabricInputs
from controller.pipeline.plan import SwitchInputs, plan
from controller.pipeline.planner import plan_switch
from controller.policy.load import parse_policy
from controller.policy.model import Policy
from controller.qos.plan import plan_port_qos
from controller.store.client import connect
from controller.store.epoch import EpochStore, Regression
from controller.store.events import EventStore
from controller.store.policies import PolicyStore
from controller.store.switches import SwitchReport, SwitchStore
from tests.support.redis_server import RedisServer

DOCUMENT = yaml.safe_load(
    """
classes:
  inference: {priority: 0, dscp: 46, min_rate: 20%}
  training:  {priority: 1, dscp: 26, min_rate: 80%}
default_class: inference
rules: [{name: iperf, match: {tcp_dst: 5201}, class: training}]
"""
)
POLICY = parse_policy(DOCUMENT)


def other_document() -> dict[str, object]:
    document = yaml.safe_load(yaml.safe_dump(DOCUMENT))
    document["default_class"] = "training"
    return document


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    redis_server = RedisServer(harness.free_port(), tmp_path)
    redis_server.start()
    try:
        yield redis_server
    finally:
        redis_server.stop()


Applied = queue.Queue[tuple[Policy, int]]


class Follower:
    """A RedisLink following the test server on its own thread, and what it handed the app."""

    def __init__(self, url: str, *, check_s: float = 0.2, apply_delay_s: float = 0.0) -> None:
        self.metrics = ControllerMetrics(CollectorRegistry())
        self.link = RedisLink(
            url,
            "test-controller",
            heartbeat_s=0.2,
            check_s=check_s,
            max_backoff_s=0.2,
            metrics=self.metrics,
        )
        self.applied: Applied = queue.Queue()
        self._apply_delay_s = apply_delay_s
        self.link.bootstrap(POLICY, DOCUMENT)
        self._thread = threading.Thread(target=self.link.run, args=(self._apply,))
        self._thread.start()

    def _apply(self, policy: Policy, version: int) -> None:
        time.sleep(self._apply_delay_s)  # a slow app: a sync, a large policy
        self.applied.put((policy, version))

    def sample(self, name: str, **labels: str) -> float:
        value = self.metrics.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value

    def stop(self) -> None:
        self.link.stop()
        self._thread.join(5)
        assert not self._thread.is_alive()


@pytest.fixture
def follower(server: RedisServer) -> Iterator[tuple[RedisLink, Applied]]:
    started = Follower(server.url)
    try:
        yield started.link, started.applied
    finally:
        started.stop()


@pytest.fixture
def start_follower(server: RedisServer) -> Iterator[type[Follower]]:
    """``start_follower(**options)``: a Follower on the test server, stopped after the test."""
    started: list[Follower] = []

    class Started(Follower):
        def __init__(self, **options: float) -> None:
            super().__init__(server.url, **options)
            started.append(self)

    try:
        yield Started
    finally:
        for each in started:
            each.stop()


@pytest.fixture
def client(server: RedisServer) -> redis.Redis:
    return connect(server.url)


def sync_report(version: int | None) -> SyncReport:
    ports = (PortState(1, "s1-eth1", 10_000_000_000), PortState(2, "s1-eth2", None))
    return SyncReport(
        dpid=0x1,
        policy_version=version,
        connected_at=time.time(),
        ports=ports,
        flows=plan_switch(POLICY, {}).flows,
        queues=tuple(plan_port_qos(POLICY, p.name, p.link_bps) for p in ports),
        datapath_type="netdev",
    )


def test_report_survives_the_json_round_trip() -> None:
    report = switch_report(sync_report(4), "c1")
    assert SwitchReport.from_json(report.to_json()) == report
    assert report.applied_version == 4
    assert [len(p.queues) for p in report.ports] == [2, 2]
    assert len(report.flows) == len(plan_switch(POLICY, {}).flows)


def test_a_report_carries_the_switch_plan_inputs_groups_and_meters() -> None:
    """What the switch's plan came from, and the groups and meters it holds, reach the store
    record as they were (the API's dry run plans from them)."""
    fabric_policy = parse_policy({**DOCUMENT, "forwarding": "fabric"})
    a, b = PortRef(1, 1), PortRef(2, 1)
    c, d = PortRef(1, 2), PortRef(3, 1)
    topology = Topology(
        switches=frozenset({1, 2, 3, 4}),
        links=frozenset(
            Link(x, y)
            for x, y in [
                (a, b),
                (b, a),
                (c, d),
                (d, c),
                (PortRef(2, 2), PortRef(4, 1)),
                (PortRef(4, 1), PortRef(2, 2)),
                (PortRef(3, 2), PortRef(4, 2)),
                (PortRef(4, 2), PortRef(3, 2)),
            ]
        ),
        hosts=(Host(0xB, PortRef(4, 3), 0x0A000002),),
    )
    base = sync_report(4)
    inputs = SwitchInputs(
        1,
        base.ports,
        {FlowId(0x800, 6, 1, 2, 3, 4): "bulk"},
        FabricInputs(topology, frozenset()),
        policy_version=4,
        jobs_version=3,
    )
    desired = plan(fabric_policy, (), inputs).desired
    assert desired.groups and desired.meters
    synced = dataclasses.replace(
        base, flows=desired.flows, groups=desired.groups, meters=desired.meters, inputs=inputs
    )
    stored = SwitchReport.from_json(switch_report(synced, "c1").to_json())
    assert stored.inputs is not None and stored.inputs.inputs() == inputs
    assert tuple(record.entry() for record in stored.groups) == desired.groups
    assert stored.meters == desired.meters
    # a report without them (a switch not yet planned) stores none
    bare = switch_report(base, "c1")
    assert (bare.inputs, bare.groups, bare.meters) == (None, (), ())


def test_bootstrap_stores_the_file_once_and_then_follows_redis(server: RedisServer) -> None:
    first = RedisLink(server.url, "a")
    assert first.bootstrap(POLICY, DOCUMENT) == (POLICY, 1)
    PolicyStore(connect(server.url)).put(other_document(), author="op")
    second = RedisLink(server.url, "b")
    policy, version = second.bootstrap(POLICY, DOCUMENT)
    assert version == 2 and policy.default_class == "training"
    assert len(PolicyStore(connect(server.url)).history()) == 2


def test_bootstrap_without_redis_uses_the_file(tmp_path: Path) -> None:
    link = RedisLink(f"redis://127.0.0.1:{harness.free_port()}/0", "c")
    assert link.bootstrap(POLICY, DOCUMENT) == (POLICY, None)


def test_new_versions_are_applied_and_invalid_ones_refused(
    server: RedisServer, follower: tuple[RedisLink, queue.Queue[tuple[Policy, int]]]
) -> None:
    _, applied = follower
    store = PolicyStore(connect(server.url))
    store.put(other_document(), author="op")
    policy, version = applied.get(timeout=5)
    assert version == 2 and policy.default_class == "training"
    broken = other_document()
    broken["default_class"] = "nope"
    store.put(broken, author="someone bypassing the API")
    time.sleep(0.6)  # three heartbeats: the catch-up runs too, and must refuse it as well
    assert applied.empty()
    assert SwitchStore(connect(server.url)).live_controllers(max_age_s=5) == ["test-controller"]


def test_outage_keeps_reports_and_catches_up(
    server: RedisServer, follower: tuple[RedisLink, Applied]
) -> None:
    link, applied = follower
    link.switch_synced(sync_report(1))
    switches = SwitchStore(connect(server.url))
    harness.wait_for("the first report", lambda: switches.applied() == {"0000000000000001": 1}, 5)
    server.stop()
    link.switch_synced(sync_report(1))  # produced during the outage: must not be lost
    server.start()  # an empty Redis, as after losing its data
    harness.wait_for("the report to be re-sent", lambda: switches.applied() != {}, 10)
    # The empty store is flagged, and its numbering moved past the version enforced...
    harness.wait_for("the regression flag", lambda: link.regression is not None, 10)
    assert applied.empty()
    # ... so the operator's next write is numbered above it, and adopted.
    stored = PolicyStore(connect(server.url)).put(other_document(), author="op")
    assert stored.version == 2
    policy, version = applied.get(timeout=10)
    assert version == 2 and policy.default_class == "training"
    harness.wait_for("the flag to clear", lambda: link.regression is None, 5)


def test_confirmations_of_many_switches_all_reach_the_store(
    server: RedisServer, follower: tuple[RedisLink, Applied]
) -> None:
    link, _ = follower
    for dpid in range(1, 11):
        link.switch_synced(dataclasses.replace(sync_report(4), dpid=dpid))
    assert link.drain(5)
    switches = SwitchStore(connect(server.url))
    assert switches.applied() == {f"{dpid:016x}": 4 for dpid in range(1, 11)}


def test_a_switch_gone_before_its_confirmation_is_written_is_not_confirmed(
    server: RedisServer, follower: tuple[RedisLink, Applied]
) -> None:
    link, _ = follower
    link.switch_synced(dataclasses.replace(sync_report(4), dpid=7))
    link.switch_gone(7)
    assert link.drain(5)
    assert SwitchStore(connect(server.url)).applied() == {}


# ---- heartbeats -------------------------------------------------------------------------


def test_heartbeats_are_not_delayed_by_a_slow_app(
    start_follower: type[Follower], client: redis.Redis
) -> None:
    """The app takes 1.5 s to take a policy; the controller must stay live all along."""
    follower = start_follower(apply_delay_s=1.5)
    switches = SwitchStore(client)
    harness.wait_for("a heartbeat", lambda: switches.live_controllers(0.5) != [], 5)
    PolicyStore(client).put(other_document(), author="op")
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        assert switches.live_controllers(max_age_s=0.5) == ["test-controller"]
        time.sleep(0.05)
    _, version = follower.applied.get(timeout=5)
    assert version == 2


def test_stop_says_goodbye(start_follower: type[Follower], client: redis.Redis) -> None:
    follower = start_follower()
    switches = SwitchStore(client)
    harness.wait_for("a heartbeat", lambda: switches.live_controllers(5) != [], 5)
    client.delete("flowlane:policy:active")  # flagged: the policy is gone
    harness.wait_for("the flag", lambda: EpochStore(client).flags() != [], 5)
    follower.stop()
    assert switches.live_controllers(max_age_s=60) == []
    assert EpochStore(client).flags() == []


# ---- a store that lost data -----------------------------------------------------------------


def regression_of(link: RedisLink) -> Regression | None:
    flag = link.regression
    return flag.regression if flag is not None else None


def events_of(client: redis.Redis, kind: str) -> list[dict[str, object]]:
    return [event.data for event in EventStore(client).read(limit=1000) if event.kind == kind]


def test_a_flushed_store_is_flagged_and_never_followed_backwards(
    start_follower: type[Follower], client: redis.Redis
) -> None:
    follower = start_follower()
    link = follower.link
    policies = PolicyStore(client)
    policies.put(other_document(), author="op")
    assert follower.applied.get(timeout=5)[1] == 2
    link.switch_synced(sync_report(2))
    switches = SwitchStore(client)
    harness.wait_for("the report", lambda: switches.applied() == {"0000000000000001": 2}, 5)
    epoch = EpochStore(client).current()

    client.flushall()  # Redis restarted without its data

    harness.wait_for("the regression flag", lambda: EpochStore(client).flags() != [], 5)
    [flag] = EpochStore(client).flags()
    assert flag.controller == "test-controller"
    assert flag.regression == Regression("gone", 2, None)
    assert flag.message() == (
        "controller test-controller enforces version 2; the store has no active version: the"
        " store lost data; PUT a policy to recover (it gets a version above 2)"
    )
    assert link.enforced_version == 2 and follower.applied.empty()
    assert EpochStore(client).current() != epoch  # the controller gave the store a new epoch
    assert int(client.get("flowlane:policy:seq") or 0) == 2
    assert follower.sample("flowlane_store_regressions_total", kind="gone") == 1
    assert follower.sample("flowlane_store_regressed") == 1
    assert [e["reason"] for e in events_of(client, "store-regression")] == ["gone"]
    # The switch reports are re-sent to the new dataset, though the follower saw no outage.
    harness.wait_for("the re-sent report", lambda: switches.applied() != {}, 5)
    time.sleep(0.6)  # three checks: logged, counted and recorded once, not per check
    assert follower.sample("flowlane_store_regressions_total", kind="gone") == 1
    assert len(events_of(client, "store-regression")) == 1

    stored = policies.put(DOCUMENT, author="op")  # the operator's recovery
    assert stored.version == 3
    _, version = follower.applied.get(timeout=5)
    assert version == 3 and link.enforced_version == 3
    harness.wait_for("the flag to clear", lambda: EpochStore(client).flags() == [], 5)
    assert follower.sample("flowlane_store_regressed") == 0
    assert [e["reason"] for e in events_of(client, "store-recovered")] == ["gone"]


def test_a_write_into_the_emptied_store_before_the_check_is_not_adopted(
    start_follower: type[Follower], client: redis.Redis
) -> None:
    """FLUSHALL, then a write numbered 1 again: the announcement must not move the switches.

    The periodic check is off (an hour), so only announcements wake the
    follower and the order of events is exactly the one written here.
    """
    follower = start_follower(check_s=3600)
    policies = PolicyStore(client)
    policies.put(other_document(), author="op")
    assert follower.applied.get(timeout=5)[1] == 2
    client.flushall()
    assert policies.put(DOCUMENT, author="op").version == 1  # the numbers restarted
    # The follower may look while the test is half way (store emptied, nothing written yet)
    # and flag that first; what counts is the verdict once the write is in.
    wanted = Regression("new-epoch", 2, 1)
    harness.wait_for("the regression flag", lambda: regression_of(follower.link) == wanted, 5)
    assert follower.applied.empty()
    assert follower.sample("flowlane_store_regressions_total", kind="new-epoch") >= 1
    assert policies.put(other_document(), author="op").version == 3
    assert follower.applied.get(timeout=5)[1] == 3


def test_an_older_store_is_flagged(start_follower: type[Follower], client: redis.Redis) -> None:
    """A restore from an older snapshot: same epoch, active version below the enforced one."""
    follower = start_follower()
    policies = PolicyStore(client)
    policies.put(other_document(), author="op")
    assert follower.applied.get(timeout=5)[1] == 2
    # What a snapshot taken at version 1 holds, written at once as a restore is: a check
    # between separate writes could raise the sequence back to 2 before it is lowered.
    restore = client.pipeline(transaction=True)
    restore.hdel("flowlane:policy:versions", "2")
    restore.set("flowlane:policy:active", 1)
    restore.set("flowlane:policy:seq", 1)
    restore.execute()
    wanted = Regression("older", 2, 1)
    harness.wait_for("the regression flag", lambda: regression_of(follower.link) == wanted, 5)
    assert follower.applied.empty() and follower.link.enforced_version == 2
    assert policies.put(DOCUMENT, author="op").version == 3
    assert follower.applied.get(timeout=5)[1] == 3
