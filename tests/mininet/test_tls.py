"""OpenFlow over mutual TLS end to end: a Mininet switch with an ``ssl:`` controller target
gets its policy from a TLS-only controller, and its hosts reach each other through it.

The refusals (a switch of another CA, a plain TCP client) are in
``tests/openflow/test_switch_identity.py``; here the point is the whole path with hosts.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from flowlane_bench import faults, harness
from flowlane_bench.topologies import SWITCH, SingleSwitchTopo

from controller.policy.load import load_policy_file

pytestmark = pytest.mark.mininet

PORTS = [f"{SWITCH}-eth{n}" for n in (1, 2, 3)]


def test_a_switch_over_mutual_tls_gets_its_policy_and_forwards(tmp_path: Path) -> None:
    harness.check_prerequisites()
    ofp_port = harness.free_port()
    tls = harness.make_pki(tmp_path / "pki")
    policy_file = faults.write_policy(tmp_path / "policy.yaml")
    policy = load_policy_file(policy_file)
    try:
        harness.set_switch_ssl(tmp_path / "pki")
        with (
            harness.network(
                SingleSwitchTopo(training_senders=1, inference_clients=1), ofp_port
            ) as net,
            harness.controller(policy_file, tmp_path / "ctl.log", ofp_port, extra_args=tls) as ctl,
        ):
            subprocess.run(
                ["ovs-vsctl", "set-controller", SWITCH, f"ssl:127.0.0.1:{ofp_port}"], check=True
            )
            harness.wait_in_sync(SWITCH, policy, PORTS)
            [version] = harness.negotiated_tls(ctl.log())
            print(f"\nMininet switch over OpenFlow TLS: {version}")
            sender, server = net.get("infer1"), net.get("server")
            assert net.ping([sender, server], timeout=2) == 0
            assert ctl.problems() == []
    finally:
        subprocess.run(["ovs-vsctl", "del-ssl"], check=False)
