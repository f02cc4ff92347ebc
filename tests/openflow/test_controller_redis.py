"""The controller following policy versions in a real Redis, on a real OVS bridge."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from flowlane_bench import harness

from controller.pipeline.flows import Owner, cookie_owner
from controller.policy.jobs import JobSpec
from controller.policy.load import parse_policy
from controller.store.client import connect
from controller.store.epoch import EpochStore
from controller.store.jobs import JobStore
from controller.store.policies import PolicyStore
from controller.store.switches import SwitchStore
from tests.support.ovs_bridge import OvsBridge
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.ovs

FILE_POLICY = """
classes:
  inference: {priority: 0, dscp: 46, min_rate: 20%}
  training:  {priority: 1, dscp: 26, min_rate: 80%}
default_class: inference
rules:
  - {name: iperf, match: {tcp_dst: 5201}, class: training}
ports: {rate: 1Gbit}
"""


def moved(document: dict[str, object], class_name: str) -> dict[str, object]:
    """The same policy with the iperf rule sending its flows to ``class_name``."""
    changed = yaml.safe_load(yaml.safe_dump(document))
    changed["rules"][0]["class"] = class_name
    return changed


def test_empty_redis_gets_the_file_and_switches_report_it(
    bridge: OvsBridge, tmp_path: Path, redis_server: RedisServer
) -> None:
    policy_file = tmp_path / "file.yaml"
    policy_file.write_text(FILE_POLICY)
    with harness.controller(
        policy_file, tmp_path / "ctl.log", bridge.ofp_port, redis_url=redis_server.url
    ) as ctl:
        client = connect(redis_server.url)
        store, switches = PolicyStore(client), SwitchStore(client)
        active = store.active()
        assert active is not None and active.version == 1
        assert active.document == yaml.safe_load(FILE_POLICY)
        harness.wait_in_sync(bridge.name, ctl.policy, bridge.ports)
        dpid = harness.datapath_id(bridge.name)
        harness.wait_for("the applied report", lambda: switches.applied() == {dpid: 1}, 15)
        (report,) = switches.live_reports(max_age_s=10)
        assert {port.name for port in report.ports} == set(bridge.ports)
        assert len(report.flows) == len(harness.ofctl_cookies(bridge.name))
        assert all(len(port.queues) == 2 for port in report.ports)
        assert ctl.problems() == []


def test_a_new_version_reaches_the_switch_and_is_confirmed(
    bridge: OvsBridge, tmp_path: Path, redis_server: RedisServer
) -> None:
    policy_file = tmp_path / "file.yaml"
    policy_file.write_text(FILE_POLICY)
    with harness.controller(
        policy_file, tmp_path / "ctl.log", bridge.ofp_port, redis_url=redis_server.url
    ) as ctl:
        client = connect(redis_server.url)
        store, switches = PolicyStore(client), SwitchStore(client)
        harness.wait_in_sync(bridge.name, ctl.policy, bridge.ports)
        dpid = harness.datapath_id(bridge.name)
        first = store.active()
        assert first is not None
        second = store.put(moved(first.document, "inference"), author="test", expected_version=1)
        started = time.monotonic()
        harness.wait_for("version 2 applied", lambda: switches.applied().get(dpid) == 2, 15, 0.005)
        print(f"policy change confirmed after {1000 * (time.monotonic() - started):.1f} ms")
        harness.wait_in_sync(bridge.name, parse_policy(second.document), bridge.ports)
        store.rollback(1, author="test")
        harness.wait_for("rollback applied", lambda: switches.applied().get(dpid) == 3, 15)
        harness.wait_in_sync(bridge.name, ctl.policy, bridge.ports)
        assert ctl.problems() == []


def test_redis_outage_keeps_the_policy_and_catches_up(
    bridge: OvsBridge, tmp_path: Path, redis_server: RedisServer
) -> None:
    policy_file = tmp_path / "file.yaml"
    policy_file.write_text(FILE_POLICY)
    with harness.controller(
        policy_file, tmp_path / "ctl.log", bridge.ofp_port, redis_url=redis_server.url
    ) as ctl:
        harness.wait_in_sync(bridge.name, ctl.policy, bridge.ports)
        redis_server.stop()
        harness.wait_for("the outage to be noticed", lambda: "Redis unavailable" in ctl.log(), 15)
        assert ctl.process.poll() is None
        assert harness.in_sync(bridge.name, ctl.policy, bridge.ports), "policy lost in the outage"
        redis_server.start()  # empty: as after a failover to a fresh replica
        client = connect(redis_server.url)
        # The controller flags the empty store (it keeps version 1) and numbers the
        # next write above it; a write before that would be "version 1" again, refused.
        harness.wait_for("the store to be flagged", lambda: EpochStore(client).flags() != [], 20)
        assert harness.in_sync(bridge.name, ctl.policy, bridge.ports)
        newer = moved(yaml.safe_load(FILE_POLICY), "inference")
        assert PolicyStore(client).put(newer, author="test").version == 2
        harness.wait_in_sync(bridge.name, parse_policy(newer), bridge.ports, timeout_s=20)
        dpid = harness.datapath_id(bridge.name)
        harness.wait_for(
            "the switch report to be re-sent",
            lambda: dpid in SwitchStore(client).applied(),
            15,
        )
        assert "Redis is back" in ctl.log()


def test_jobs_in_redis_are_installed_at_start_and_leave_when_deleted(
    bridge: OvsBridge, tmp_path: Path, redis_server: RedisServer
) -> None:
    """Jobs live in Redis, so a controller (re)started later installs them too."""
    client = connect(redis_server.url)
    PolicyStore(client).put(yaml.safe_load(FILE_POLICY), author="test")
    job = JobSpec.model_validate(
        {"name": "bert", "class": "training", "endpoints": [{"ipv4": "10.9.0.0/24"}]}
    )
    JobStore(client).put(job.name, job.document(), ttl_s=600)

    def job_entries() -> int:
        return sum(cookie_owner(c) is Owner.JOB for c in harness.ofctl_cookies(bridge.name))

    policy_file = tmp_path / "file.yaml"
    policy_file.write_text(FILE_POLICY)
    with harness.controller(
        policy_file, tmp_path / "ctl.log", bridge.ofp_port, redis_url=redis_server.url
    ) as ctl:
        harness.wait_for("the stored job's entries", lambda: job_entries() > 0, 15)
        JobStore(client).delete(job.name)
        harness.wait_for("the job's entries to go", lambda: job_entries() == 0, 15)
        assert ctl.problems() == []
