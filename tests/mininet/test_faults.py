"""Faults with live traffic: what a probe stream in every class saw, and how the switch ended up.

The tests share one network (one switch): each runs three probe streams
(inference, training, best-effort; 500 datagrams/s each) from one host to a
server, breaks one part of the stack while they run, asserts what the
receivers saw and that the switch holds exactly its plan afterwards, and
leaves the network as it found it, less the switch's flows (each test starts
from an empty table).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from flowlane_bench import faults, harness
from flowlane_bench.topologies import SWITCH, SingleSwitchTopo

from controller.pipeline.flows import Owner, cookie_owner
from controller.policy.load import load_policy_document, load_policy_file
from controller.store.jobs import JobStore
from controller.store.policies import PolicyStore

pytestmark = pytest.mark.mininet

PORTS = [f"{SWITCH}-eth{n}" for n in (1, 2, 3)]
OUTAGE_S = 10.0
"""How long Redis stays down: past the point where every retry loop waits its longest. The
controller's follower doubles its wait from 0.1 s to its 5 s cap (reached 6.3 s into the
outage), the store writer from 0.25 s to 5 s (7.75 s in), so the recovery starts from the
capped state, as after any longer outage; longer ones only repeat 5 s waits. (30 s before: it
tested nothing more, and cost 20 s of every run.)"""
CLASS_DSCP = {"inference": 46, "training": 26, "best-effort": 0}


@pytest.fixture(scope="module")
def network() -> Iterator[tuple[object, int]]:
    """One network for the module: every test restores what it broke (its controllers and
    Redis are stopped, ovs-vswitchd is running again), so none needs a fresh one."""
    harness.check_prerequisites()
    ofp_port = harness.free_port()
    with harness.network(SingleSwitchTopo(training_senders=1, inference_clients=1), ofp_port) as n:
        yield n, ofp_port


@pytest.fixture
def net(network: tuple[object, int]) -> Iterator[tuple[object, int]]:
    """The module's network with an empty flow table, as a new network's switch has: no
    entry (a detector override, a learned counter) of an earlier test is adopted. The
    ports' queues stay: every test's first controller reconciles them to its policy."""
    harness.reset_switches([SWITCH])
    yield network


def kill(process: harness.ControllerProcess) -> None:
    os.killpg(process.process.pid, signal.SIGKILL)
    process.process.wait(5)


def job_cookies() -> set[int]:
    return {c for c in harness.ofctl_cookies(SWITCH) if cookie_owner(c) is Owner.JOB}


def planned_cookies() -> list[int]:
    """The switch's entries less the counting entries OVS learns from the traffic itself."""
    return sorted(c for c in harness.ofctl_cookies(SWITCH) if cookie_owner(c) is not Owner.LEARNED)


def assert_nothing_lost(lost: dict[str, int]) -> None:
    assert set(lost) == set(faults.PROBE_PORTS)
    assert lost == dict.fromkeys(faults.PROBE_PORTS, 0), f"probe datagrams lost: {lost}"


def test_controller_killed_and_restarted(net: tuple[object, int], tmp_path: Path) -> None:
    """SIGKILL, restart: no probe lost, in sync within 2 s of the reconnect with no flow mod,
    and the elephant the first controller demoted keeps its override (the same entry)."""
    mininet, ofp_port = net
    policy_file = faults.write_policy(tmp_path / "faults.yaml")
    policy = load_policy_file(policy_file)
    sender, server = mininet.get("infer1"), mininet.get("server")  # type: ignore[attr-defined]
    with harness.controller(policy_file, tmp_path / "first.log", ofp_port) as first:
        harness.wait_in_sync(SWITCH, policy, PORTS)
        with faults.streams(sender, server, 12) as running:
            harness.wait_for(
                "the bulk flow's override", lambda: bool(faults.detector_cookies(SWITCH)), 10
            )
            overrides = faults.detector_cookies(SWITCH)
            time.sleep(1.0)
            kill(first)
            time.sleep(1.5)  # the switch runs on its own (fail-mode secure)
            before = faults.flow_durations(SWITCH, overrides)
            metrics_port = harness.free_port()
            with harness.controller(
                policy_file, tmp_path / "second.log", ofp_port, metrics_port=metrics_port
            ) as second:
                harness.wait_for(
                    "the second controller's sync", lambda: "in sync" in second.log(), 15
                )
                time.sleep(1.0)  # a few detection polls on the adopted override
                adds = faults.metric(metrics_port, "flowlane_flow_mods_total", command="add")
                deletes = faults.metric(metrics_port, "flowlane_flow_mods_total", command="delete")
                after = faults.flow_durations(SWITCH, overrides)
                running.stop_sending()  # seen through the restart: no need to wait out 12 s
                lost = running.lost(30)
                log = second.log()
                assert not second.problems(), second.problems()
    connected = faults.first_line(log, "connected from")
    synced = faults.first_line(log, "in sync")
    assert connected is not None and synced is not None, log
    sync_s = faults.log_time(synced) - faults.log_time(connected)
    print(
        f"controller restart: in sync {sync_s:.2f} s after the reconnect; flow mods +{adds:.0f}"
        f" -{deletes:.0f}; lost {lost}"
    )
    assert sync_s <= 2.0, log
    assert (adds, deletes) == (0, 0), log
    assert "+0 -0" in synced
    assert "kept 1 elephant override(s)" in log
    assert "-> training" not in log, "the elephant was demoted again instead of kept"
    assert set(after) == overrides, "the override was removed"
    assert all(after[c] >= before[c] for c in overrides), "the override was re-installed"
    assert_nothing_lost(lost)


def test_policy_changed_while_the_controller_is_down(
    net: tuple[object, int], tmp_path: Path
) -> None:
    """A version stored while no controller runs is applied on reconnect without a gap:
    every probe datagram arrives, and each with its class's DSCP."""
    mininet, ofp_port = net
    first_file = faults.write_policy(tmp_path / "v1.yaml")
    # A rule ahead of the probe rules moves them all: new entries replace every one of them.
    second_file = faults.write_policy(
        tmp_path / "v2.yaml",
        "  - {name: ssh, match: {ip_proto: tcp, tcp_dst: 22}, class: best-effort}\n",
    )
    sender, server = mininet.get("infer1"), mininet.get("server")  # type: ignore[attr-defined]
    with (
        faults.persistent_redis(tmp_path) as store,
        harness.controller(
            first_file, tmp_path / "first.log", ofp_port, redis_url=store.url
        ) as first,
    ):
        harness.wait_in_sync(SWITCH, load_policy_file(first_file), PORTS)
        with faults.streams(sender, server, 8, bulk=False) as running:
            time.sleep(1.0)
            kill(first)
            _, document = load_policy_document(second_file)
            stored = PolicyStore(redis.Redis.from_url(store.url)).put(document, author="test")
            with harness.controller(
                first_file, tmp_path / "second.log", ofp_port, redis_url=store.url
            ) as second:
                harness.wait_in_sync(SWITCH, load_policy_file(second_file), PORTS, 15)
                time.sleep(1.0)  # 500 datagrams a class through the new version's entries
                running.stop_sending()  # no need to wait out the streams' length
                reports = {
                    name: faults.probe.report(name, process, 30)
                    for name, process in running.receivers.items()
                }
                sent = {
                    name: int(faults.probe.report(name, process, 30)["sent"])
                    for name, process in running.senders.items()
                }
                log = second.log()
                assert not second.problems(), second.problems()
    assert f"policy version {stored.version}: " in log
    connected = faults.first_line(log, "connected from")
    synced = faults.first_line(log, "in sync")
    assert connected is not None and synced is not None and "+0 -0" not in synced, log
    lost = {name: sent[name] - int(report["received"]) for name, report in reports.items()}
    applied_s = faults.log_time(synced) - faults.log_time(connected)
    print(
        f"policy changed while down: applied {applied_s:.2f} s after the reconnect"
        f" ({synced.split('in sync', 1)[1].strip()}); lost {lost}"
    )
    for name, report in reports.items():
        assert report["received"] == sent[name], f"{name}: {sent[name] - report['received']} lost"
        assert report["dscp"] == {str(CLASS_DSCP[name]): sent[name]}, (name, report["dscp"])


def test_redis_outage_past_every_retry_cap(net: tuple[object, int], tmp_path: Path) -> None:
    """Enforcement does not change, the API says 503 with Retry-After, and afterwards every
    version, history entry and job is back, and the controller beats again."""
    mininet, ofp_port = net
    policy_file = faults.write_policy(tmp_path / "faults.yaml")
    sender, server = mininet.get("infer1"), mininet.get("server")  # type: ignore[attr-defined]
    with (
        faults.persistent_redis(tmp_path) as store,
        harness.controller(policy_file, tmp_path / "controller.log", ofp_port, redis_url=store.url),
        faults.api(store.url, tmp_path / "api.log") as endpoint,
    ):
        api, auth = endpoint.url, endpoint.headers
        harness.wait_in_sync(SWITCH, load_policy_file(policy_file), PORTS)
        harness.wait_for(
            "the API to be ready",
            lambda: httpx.get(f"{api}/readyz", timeout=2).status_code == 200,
            15,
        )
        job = {
            "name": "allreduce",
            "class": "training",
            "endpoints": [{"ipv4": f"{sender.IP()}/32"}, {"ipv4": f"{server.IP()}/32"}],
            "ttl": "1h",
        }
        assert httpx.post(f"{api}/v1/jobs", json=job, timeout=10, headers=auth).status_code == 201
        history = httpx.get(f"{api}/v1/policy/history", timeout=10, headers=auth).json()
        jobs = JobStore(redis.Redis.from_url(store.url)).all()
        harness.wait_for("the job's entries", lambda: bool(job_cookies()), 15)
        cookies = planned_cookies()
        with faults.streams(sender, server, OUTAGE_S + 8, bulk=False) as running:
            time.sleep(1.0)
            store.stop()
            outage_started = time.monotonic()
            refused = httpx.get(f"{api}/v1/policy", timeout=10, headers=auth)
            held = []
            while time.monotonic() - outage_started < OUTAGE_S:
                held.append(planned_cookies() == cookies)
                time.sleep(2.0)
            store.start()
            restarted = time.monotonic()
            harness.wait_for(
                "readiness after the outage",
                lambda: httpx.get(f"{api}/readyz", timeout=2).status_code == 200,
                15,
            )
            ready_s = time.monotonic() - restarted
            recovered = httpx.get(f"{api}/v1/policy/history", timeout=10, headers=auth).json()
            jobs_after = JobStore(redis.Redis.from_url(store.url)).all()
            running.stop_sending()  # seen through the outage and back
            lost = running.lost(30)
    print(
        f"Redis outage of {OUTAGE_S:g} s: ready {ready_s:.2f} s after Redis answered again;"
        f" lost {lost}"
    )
    assert refused.status_code == 503 and "retry-after" in refused.headers, refused
    assert held and all(held), "the switch's entries changed while Redis was down"
    assert recovered == history
    assert [j.name for j in jobs_after] == [j.name for j in jobs] == ["allreduce"]
    assert_nothing_lost(lost)


def test_vswitchd_restarted(net: tuple[object, int], tmp_path: Path) -> None:
    """ovs-vswitchd restarts (its userspace datapath, flows and qdiscs with it): flows,
    queues and tc filters are back within 5 s, and traffic flows again."""
    mininet, ofp_port = net
    policy_file = faults.write_policy(tmp_path / "faults.yaml")
    policy = load_policy_file(policy_file)
    sender, server = mininet.get("infer1"), mininet.get("server")  # type: ignore[attr-defined]
    with harness.controller(policy_file, tmp_path / "controller.log", ofp_port) as handle:
        harness.wait_in_sync(SWITCH, policy, PORTS)
        answered = faults.restart_vswitchd()
        harness.wait_in_sync(SWITCH, policy, PORTS, 10)
        back_after = time.monotonic() - answered
        for host in (sender, server):  # the host side of each veth kept its settings
            assert host.cmd("true") == ""
        with faults.streams(sender, server, 3, bulk=False) as running:
            lost = running.lost(30)
        assert not handle.problems(), handle.problems()
    print(f"ovs-vswitchd restart: in sync {back_after:.2f} s after it answered; lost {lost}")
    assert back_after <= 5.0, f"in sync {back_after:.1f} s after ovs-vswitchd answered"
    assert_nothing_lost(lost)
