"""Who may be a switch: a twin claiming a live switch's datapath id is refused, and with
mutual TLS only a switch certified by the controller's CA connects at all.

Real OVS bridges and a real controller process. ``ovs-vsctl set-ssl`` is one setting for
the whole OVS instance, so the TLS test clears it (``del-ssl``) whatever happens.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from flowlane_bench import harness

from controller.store.client import connect
from controller.store.events import EventStore
from tests.support.ovs_bridge import OvsBridge, sh
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.ovs

POLICY = """
classes:
  inference: {priority: 0, dscp: 46, min_rate: 20%}
  training:  {priority: 1, dscp: 26, min_rate: 80%}
default_class: inference
rules:
  - {name: iperf, match: {tcp_dst: 5201}, class: training}
ports: {rate: 1Gbit}
"""


@pytest.fixture
def twin(bridge: OvsBridge) -> Iterator[str]:
    """A second bridge presenting ``bridge``'s datapath id to the same controller port."""
    name = f"{bridge.name}t"
    try:
        yield name
    finally:
        sh("ovs-vsctl", "--if-exists", "del-br", name, check=False)


def add_twin(name: str, dpid: str, target: str) -> None:
    sh(
        "ovs-vsctl",
        "add-br",
        name,
        "--",
        "set",
        "bridge",
        name,
        "datapath_type=netdev",
        "protocols=OpenFlow13",
        "fail-mode=secure",
        f"other-config:datapath-id={dpid}",
        "--",
        "set-controller",
        name,
        target,
    )


def controller_of(bridge: str) -> str:
    return sh("ovs-vsctl", "get", "bridge", bridge, "controller").strip("[]\n ")


def test_a_twin_claiming_a_live_switchs_datapath_id_is_refused(
    bridge: OvsBridge, twin: str, tmp_path: Path, redis_server: RedisServer
) -> None:
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(POLICY)
    with harness.controller(
        policy_file,
        tmp_path / "ctl.log",
        bridge.ofp_port,
        redis_url=redis_server.url,
        audit_interval_s=1.0,
    ) as ctl:
        harness.wait_in_sync(bridge.name, ctl.policy, bridge.ports)
        dpid = harness.datapath_id(bridge.name)
        add_twin(twin, dpid, f"tcp:127.0.0.1:{bridge.ofp_port}")
        assert harness.datapath_id(twin) == dpid
        harness.wait_for(
            "the twin's refusal", lambda: "refused a switch connection" in ctl.log(), 20
        )
        events = EventStore(connect(redis_server.url))
        harness.wait_for(
            "the switch-refused event",
            lambda: any(e.kind == "switch-refused" for e in events.read(limit=1000)),
            10,
        )
        [refused, *_] = [e.data for e in events.read(limit=1000) if e.kind == "switch-refused"]
        assert refused["switch"] == dpid and "live connection" in refused["reason"]
        # The twin got nothing; the real switch is still served: a table deleted behind
        # the controller's back is repaired by the next audit.
        assert harness.ofctl_cookies(twin) == []
        sh("ovs-ofctl", "-O", "OpenFlow13", "del-flows", bridge.name)
        harness.wait_in_sync(bridge.name, ctl.policy, bridge.ports, timeout_s=15)
        assert harness.ofctl_cookies(twin) == []
        assert "takes over" not in ctl.log()
        assert ctl.problems() == []


def test_openflow_over_mutual_tls_serves_certified_switches_only(
    bridge: OvsBridge, tmp_path: Path
) -> None:
    ours, foreign = tmp_path / "pki", tmp_path / "other-pki"
    tls = harness.make_pki(ours)
    harness.make_pki(foreign)
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(POLICY)
    try:
        harness.set_switch_ssl(ours)
        sh("ovs-vsctl", "set-controller", bridge.name, f"ssl:127.0.0.1:{bridge.ofp_port}")
        with harness.controller(
            policy_file, tmp_path / "ctl.log", bridge.ofp_port, extra_args=tls
        ) as ctl:
            harness.wait_in_sync(bridge.name, ctl.policy, bridge.ports)
            [version] = harness.negotiated_tls(ctl.log())
            print(f"\nOpenFlow over TLS: negotiated {version}")
            assert version in ("TLSv1.2", "TLSv1.3")
            # No plain listener: an OpenFlow hello in the clear gets no hello back, only the
            # end of a failed TLS handshake (an alert record, or the connection closed).
            with socket.create_connection(("127.0.0.1", bridge.ofp_port), timeout=10) as plain:
                plain.sendall(bytes.fromhex("0400000800000001"))
                try:
                    answer = plain.recv(64)
                except ConnectionResetError:
                    answer = b""
            assert not answer.startswith(b"\x04\x00"), answer

            # The same switch presenting a certificate of another CA is refused.
            sh("ovs-ofctl", "-O", "OpenFlow13", "del-flows", bridge.name)
            harness.set_switch_ssl(foreign, ca_directory=ours)
            sh(
                "ovs-vsctl",
                "set",
                "controller",
                controller_of(bridge.name),
                "inactivity_probe=1000",
            )
            harness.wait_for(
                "the foreign certificate's refusal",
                lambda: "TLS handshake failed" in ctl.log(),
                30,
            )
            assert harness.ofctl_cookies(bridge.name) == []
            assert ctl.problems() == []
    finally:
        sh("ovs-vsctl", "del-ssl", check=False)
        sh(
            "ovs-vsctl",
            "set-controller",
            bridge.name,
            f"tcp:127.0.0.1:{bridge.ofp_port}",
            check=False,
        )
