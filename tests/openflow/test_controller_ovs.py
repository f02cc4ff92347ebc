"""The controller against a real Open vSwitch: install, reconcile, ports, drift, faults.

Each test starts ``flowlane controller`` as a process (stopped by PID) and a
userspace bridge (deleted after). Readiness is the observable state — the
planned cookies in ``ovs-ofctl dump-flows``, queues in OVSDB, filters in tc —
never a sleep.
"""

from __future__ import annotations

import os
import signal
import subprocess
import urllib.request
from pathlib import Path

import pytest
from flowlane_bench import harness

from controller.policy.load import load_policy_file
from controller.qos.tc import class_stats, htb_bursts
from tests.support.ovs_bridge import OvsBridge, owned_qos_ports, sh

pytestmark = pytest.mark.ovs

POLICY_A = """
classes:
  inference:   {priority: 0, dscp: 46, min_rate: 20%}
  training:    {priority: 1, dscp: 26, min_rate: 70%}
  best-effort: {priority: 2, dscp: 0,  min_rate: 10%}
default_class: inference
rules:
  - {name: rocev2, match: {udp_dst: 4791}, class: training}
  - {name: triton, match: {tcp_dst: [8000, 8001]}, class: inference}
ports:
  rate: 1Gbit
  overrides: {PORT1: 50Mbit}
"""

POLICY_B = """
classes:
  latency: {priority: 0, dscp: 40, min_rate: 30%}
  bulk:    {priority: 3, dscp: 10, min_rate: 70%}
default_class: bulk
rules:
  - {name: api, match: {tcp_dst: 9000}, class: latency}
ports:
  rate: 200Mbit
"""


def write_policy(tmp_path: Path, name: str, text: str, bridge: OvsBridge) -> Path:
    path = tmp_path / name
    path.write_text(text.replace("PORT1", bridge.ports[0]))
    return path


def tc_classes(device: str) -> str:
    return sh("tc", "class", "show", "dev", device)


def test_invalid_policy_refuses_to_start_and_installs_nothing(
    bridge: OvsBridge, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(POLICY_A.replace("dscp: 26", "dscp: 99").replace("4791", "70000"))
    done = subprocess.run(
        [
            harness.PYTHON,
            "-m",
            "controller",
            "controller",
            "--policy",
            str(bad),
            "--ofp-port",
            str(bridge.ofp_port),
            "--metrics-port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=harness.REPO,
    )
    assert done.returncode == 2
    assert "classes.training.dscp" in done.stderr
    assert "rules[0].match.udp_dst: port 70000 out of range" in done.stderr
    assert harness.ofctl_cookies(bridge.name) == []
    assert not owned_qos_ports() & set(bridge.ports)


def test_connect_installs_the_whole_plan_queues_and_filters(
    bridge: OvsBridge, tmp_path: Path
) -> None:
    policy_file = write_policy(tmp_path, "a.yaml", POLICY_A, bridge)
    metrics_port = harness.free_port()
    with harness.controller(
        policy_file, tmp_path / "ctl.log", bridge.ofp_port, metrics_port=metrics_port
    ) as ctl:
        harness.wait_in_sync(bridge.name, ctl.policy, bridge.ports)
        # the override port is shaped at 50 Mbit, the other at the policy's 1 Gbit
        assert "rate 50Mbit ceil 50Mbit" in tc_classes(bridge.ports[0])
        assert "rate 1Gbit ceil 1Gbit" in tc_classes(bridge.ports[1])
        # HTB bursts sized for each port's rate (2 ms), the root class's set through tc
        harness.wait_for(
            "the root classes' bursts",
            lambda: (
                "root rate 1Gbit ceil 1Gbit burst 250000b cburst 250000b"
                in tc_classes(bridge.ports[1])
            ),
            10,
        )
        for port, burst in ((bridge.ports[1], 250_000), (bridge.ports[0], 12_500)):
            bursts = htb_bursts(class_stats(port))  # netlink: kept as ticks, read back
            assert all(abs(b - burst) <= burst // 100 for b in bursts.values()), bursts
        # inference: HTB prio 0, 20 % of 50 Mbit guaranteed, over a queue of its own (leaf
        # b001:, a bfifo of 40 ms at the port's rate) rather than the kernel's 1000 frames
        harness.wait_for(
            "the inference class with its own queue",
            lambda: (
                "class htb 1:1 parent 1:fffe leaf b001: prio 0 rate 10Mbit ceil 50Mbit"
                in tc_classes(bridge.ports[0])
            ),
            10,
        )
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics").read()
        assert b"flowlane_switches_connected 1.0" in metrics
        assert ctl.problems() == []


def test_reconnect_reconciles_to_exactly_the_new_plan(bridge: OvsBridge, tmp_path: Path) -> None:
    first = write_policy(tmp_path, "a.yaml", POLICY_A, bridge)
    second = write_policy(tmp_path, "b.yaml", POLICY_B, bridge)
    with harness.controller(first, tmp_path / "a.log", bridge.ofp_port) as ctl:
        harness.wait_in_sync(bridge.name, ctl.policy, bridge.ports)
    # while no controller is connected, someone adds flows of their own
    sh("ovs-ofctl", "-O", "OpenFlow13", "add-flow", bridge.name, "table=0,priority=5,actions=drop")
    sh(
        "ovs-ofctl",
        "-O",
        "OpenFlow13",
        "add-flow",
        bridge.name,
        "table=1,priority=20,ip,actions=drop",
    )
    # one of them matches on a field flowlane does not model (a register)
    sh(
        "ovs-ofctl",
        "-O",
        "OpenFlow13",
        "add-flow",
        bridge.name,
        "table=0,priority=7,cookie=0x77,reg0=5,actions=drop",
    )
    with harness.controller(second, tmp_path / "b.log", bridge.ofp_port) as ctl:
        harness.wait_in_sync(bridge.name, ctl.policy, bridge.ports)
        cookies = harness.ofctl_cookies(bridge.name)
        assert len(cookies) == len(set(cookies)), "duplicate entries"
        assert "rate 200Mbit ceil 200Mbit" in tc_classes(bridge.ports[0])
        assert "1:3" not in tc_classes(bridge.ports[0]), "queue of a dropped class survived"
        assert ctl.problems() == []
    # a controller restarted on the same policy changes nothing
    with harness.controller(second, tmp_path / "c.log", bridge.ofp_port) as ctl:
        harness.wait_for("the resync", lambda: "in sync (connect)" in ctl.log(), 30)
        assert "+0 -0" in ctl.log()


def test_ports_added_and_deleted_at_run_time(bridge: OvsBridge, tmp_path: Path) -> None:
    policy_file = write_policy(tmp_path, "a.yaml", POLICY_A, bridge)
    with harness.controller(policy_file, tmp_path / "ctl.log", bridge.ofp_port) as ctl:
        harness.wait_in_sync(bridge.name, ctl.policy, bridge.ports)
        new_port = f"{bridge.name}p3"
        bridge.add_port(new_port)
        harness.wait_in_sync(bridge.name, ctl.policy, bridge.ports)
        assert new_port in owned_qos_ports()
        bridge.delete_port(new_port)
        harness.wait_for(
            "QoS rows of the deleted port to go", lambda: new_port not in owned_qos_ports(), 15
        )
        harness.wait_in_sync(bridge.name, ctl.policy, bridge.ports)
        assert ctl.problems() == []


def test_audit_repairs_flows_and_filters_removed_behind_its_back(
    bridge: OvsBridge, tmp_path: Path
) -> None:
    policy_file = write_policy(tmp_path, "a.yaml", POLICY_A, bridge)
    with harness.controller(policy_file, tmp_path / "ctl.log", bridge.ofp_port) as ctl:
        harness.wait_in_sync(bridge.name, ctl.policy, bridge.ports)
        sh("ovs-ofctl", "-O", "OpenFlow13", "del-flows", bridge.name, "table=1")
        sh("tc", "filter", "del", "dev", bridge.ports[1], "parent", "1:")
        assert not harness.in_sync(bridge.name, ctl.policy, bridge.ports)
        harness.wait_in_sync(bridge.name, ctl.policy, bridge.ports, timeout_s=15)


def test_a_qos_change_behind_its_back_is_repaired_on_the_ovsdb_event(
    bridge: OvsBridge, tmp_path: Path
) -> None:
    """OVSDB tells the controller a port's QoS changed (OVS dropped its qdisc and tc filters
    with it): queues and filters come back at once, with no audit due for an hour."""
    policy_file = write_policy(tmp_path, "a.yaml", POLICY_A, bridge)
    log = tmp_path / "ctl.log"
    with harness.controller(policy_file, log, bridge.ofp_port, audit_interval_s=3600) as ctl:
        harness.wait_in_sync(bridge.name, ctl.policy, bridge.ports)
        port = bridge.ports[1]
        seen = len(ctl.log())
        sh("ovs-vsctl", "clear", "port", port, "qos")
        repair = f"queues set on {port}; tc filters set on {port}"
        harness.wait_for("the repair", lambda: repair in ctl.log()[seen:], 5)
        harness.wait_in_sync(bridge.name, ctl.policy, bridge.ports, timeout_s=5)
        assert ctl.problems() == []


def test_sighup_applies_a_valid_file_and_keeps_the_policy_on_an_invalid_one(
    bridge: OvsBridge, tmp_path: Path
) -> None:
    policy_file = write_policy(tmp_path, "live.yaml", POLICY_A, bridge)
    with harness.controller(policy_file, tmp_path / "ctl.log", bridge.ofp_port) as ctl:
        harness.wait_in_sync(bridge.name, ctl.policy, bridge.ports)
        policy_file.write_text("classes: {}\n")
        os.kill(ctl.process.pid, signal.SIGHUP)
        harness.wait_for("the reload error", lambda: "keeping the current policy" in ctl.log(), 15)
        assert "classes: Dictionary should have at least 1 item" in ctl.log()
        harness.wait_in_sync(bridge.name, ctl.policy, bridge.ports)

        write_policy(tmp_path, "live.yaml", POLICY_B, bridge)
        os.kill(ctl.process.pid, signal.SIGHUP)
        harness.wait_in_sync(bridge.name, load_policy_file(policy_file), bridge.ports)


def test_ovsdb_failure_is_logged_with_the_port_and_retried(
    bridge: OvsBridge, tmp_path: Path
) -> None:
    """A failing OVSDB write for one port: logged by name, others provisioned, retried later.

    The fault is a real one: the failing port holds a QoS row marked as flowlane's that the
    bridge's own port (which flowlane does not provision) shares, so the transaction that
    replaces it, destroying the old row, breaks OVSDB's referential integrity.
    """
    failing = bridge.ports[0]
    sh("ovs-vsctl", "--", "--id=@q", "create", "qos", "type=linux-htb",
       f"external-ids:flowlane-port={failing}", "--", "set", "port", failing, "qos=@q",
       "--", "set", "port", bridge.name, "qos=@q")  # fmt: skip
    policy_file = write_policy(tmp_path, "a.yaml", POLICY_A, bridge)
    with harness.controller(policy_file, tmp_path / "ctl.log", bridge.ofp_port) as ctl:
        harness.wait_for(
            "the failure to be logged",
            lambda: f"port {failing}: QoS not applied" in ctl.log(),
            30,
        )
        assert "referential integrity violation" in ctl.log()
        healthy = bridge.ports[1]
        harness.wait_in_sync(bridge.name, ctl.policy, [healthy])
        assert ctl.process.poll() is None, "controller died on an OVSDB failure"
        sh("ovs-vsctl", "clear", "port", bridge.name, "qos")  # the fault goes
        harness.wait_in_sync(bridge.name, ctl.policy, bridge.ports, timeout_s=20)


DETECTION_POLICY = (
    POLICY_A
    + """
detection:
  interval: 200ms
  elephant: {bytes: 1MiB, class: training}
  release_after: 2s
  max_tracked: 5000
"""
)


def test_detection_learns_into_a_capped_counting_table(bridge: OvsBridge, tmp_path: Path) -> None:
    """Learning entries are planned, and OVS caps the counting table (evicting, not failing)."""
    policy_file = write_policy(tmp_path, "d.yaml", DETECTION_POLICY, bridge)
    with harness.controller(policy_file, tmp_path / "ctl.log", bridge.ofp_port) as ctl:
        harness.wait_in_sync(bridge.name, ctl.policy, bridge.ports)
        assert "learn(table=3" in sh("ovs-ofctl", "-O", "OpenFlow13", "dump-flows", bridge.name)

        def capped() -> bool:
            tables = sh("ovs-vsctl", "get", "bridge", bridge.name, "flow_tables").strip("{}\n ")
            if not tables.startswith("3="):
                return False
            limit = sh("ovs-vsctl", "get", "flow_table", tables[2:], "flow_limit").strip()
            return limit == "5000"

        harness.wait_for("the counting table limit", capped, 10)
        assert ctl.problems() == []
