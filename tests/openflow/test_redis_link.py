"""The controller's Redis follower against a real redis-server (no switch needed)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import harness
import pytest
import yaml
from redis_server import RedisServer

from controller.openflow.observer import PortState, SyncReport
from controller.openflow.redis_link import RedisLink, switch_report
from controller.pipeline.planner import plan_switch
from controller.policy.load import parse_policy
from controller.policy.model import Policy
from controller.qos.plan import plan_port_qos
from controller.store.client import connect
from controller.store.policies import PolicyStore
from controller.store.switches import SwitchReport, SwitchStore

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


@pytest.fixture
def follower(server: RedisServer) -> Iterator[tuple[RedisLink, queue.Queue[tuple[Policy, int]]]]:
    link = RedisLink(server.url, "test-controller", heartbeat_s=0.2, max_backoff_s=0.2)
    applied: queue.Queue[tuple[Policy, int]] = queue.Queue()
    link.bootstrap(POLICY, DOCUMENT)
    thread = threading.Thread(target=link.run, args=(lambda p, v: applied.put((p, v)),))
    thread.start()
    try:
        yield link, applied
    finally:
        link.stop()
        thread.join(5)
        assert not thread.is_alive()


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
    server: RedisServer, follower: tuple[RedisLink, queue.Queue[tuple[Policy, int]]]
) -> None:
    link, applied = follower
    link.switch_synced(sync_report(1))
    switches = SwitchStore(connect(server.url))
    harness.wait_for("the first report", lambda: switches.applied() == {"0000000000000001": 1}, 5)
    server.stop()
    link.switch_synced(sync_report(1))  # produced during the outage: must not be lost
    server.start()  # an empty Redis, as after losing its data
    harness.wait_for("the report to be re-sent", lambda: switches.applied() != {}, 10)
    PolicyStore(connect(server.url)).put(other_document(), author="op")
    policy, version = applied.get(timeout=10)
    assert version == 1 and policy.default_class == "training"  # numbers restart; still applied
