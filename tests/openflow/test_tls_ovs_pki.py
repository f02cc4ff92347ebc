"""OpenFlow over mutual TLS with certificates made by OVS's own ``ovs-pki`` (a
``controllerca`` for the controller, a ``switchca`` for the switches), and the binding of
a switch certificate to its datapath id (``--ofp-bind-dpid``) on a real OVS bridge.

``ovs-vswitchd`` can keep presenting a certificate it loaded earlier after ``set-ssl``
names other files, so before the controller sees the switch, a TLS server of the test's
own takes the switch's connection and reads which certificate it presents; when it is not
the one just set, ovs-vswitchd is restarted (the cure measured on this machine) and the
check repeated. ``set-ssl`` is global to the OVS instance: ``del-ssl`` after, whatever
happens. Run under ``flock /tmp/flowlane-ovs.lock``.
"""

from __future__ import annotations

import socket
import ssl
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID
from flowlane_bench import harness

from tests.support.ovs_bridge import OvsBridge, sh

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


def ovs_pki(directory: Path, *args: str) -> None:
    done = subprocess.run(
        ["ovs-pki", f"--dir={directory / 'pki'}", *args],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def make_ovs_pki(directory: Path, switches: list[str]) -> None:
    """``ovs-pki init`` then ``req+sign ctl controller`` and ``req+sign NAME switch`` each."""
    ovs_pki(directory, "init")
    ovs_pki(directory, "req+sign", "ctl", "controller")
    for name in switches:
        ovs_pki(directory, "req+sign", name, "switch")


def presented_cn(directory: Path, bridge: str) -> str:
    """The CN of the certificate ``bridge``'s OVS presents to a controller target now."""
    context = ssl.create_default_context(
        ssl.Purpose.CLIENT_AUTH, cafile=str(directory / "pki" / "switchca" / "cacert.pem")
    )
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_cert_chain(directory / "ctl-cert.pem", directory / "ctl-privkey.pem")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(30)
        sh("ovs-vsctl", "set-controller", bridge, f"ssl:127.0.0.1:{server.getsockname()[1]}")
        connection, _ = server.accept()
        with context.wrap_socket(connection, server_side=True) as tls:
            der = tls.getpeercert(binary_form=True)
    assert der is not None
    cert = x509.load_der_x509_certificate(der)
    return str(cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)


def set_switch_certificate(directory: Path, bridge: str, name: str) -> None:
    """OVS presents ``name``'s certificate; checked, with a restart of ovs-vswitchd if OVS
    still presents an older one."""
    sh(
        "ovs-vsctl",
        "set-ssl",
        str(directory / f"{name}-privkey.pem"),
        str(directory / f"{name}-cert.pem"),
        str(directory / "pki" / "controllerca" / "cacert.pem"),
    )
    try:
        cn = presented_cn(directory, bridge)
    except (OSError, ssl.SSLError) as exc:
        cn = f"(no TLS connection: {exc})"
    if not cn.startswith(f"{name} id:"):
        print(f"\novs-vswitchd presented {cn!r}, not {name!r}: restarting it")
        sh("/usr/share/openvswitch/scripts/ovs-ctl", "--no-ovsdb-server", "restart")
        cn = presented_cn(directory, bridge)
    assert cn.startswith(f"{name} id:"), cn


def test_ovs_pki_certificates_and_the_dpid_binding(bridge: OvsBridge, tmp_path: Path) -> None:
    dpid = harness.datapath_id(bridge.name)
    right, wrong = f"dpid-{dpid}", f"dpid-{int(dpid, 16) + 1:016x}"
    make_ovs_pki(tmp_path, [right, wrong])
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(POLICY)
    tls = ["--ofp-tls-cert", str(tmp_path / "ctl-cert.pem")]
    tls += ["--ofp-tls-key", str(tmp_path / "ctl-privkey.pem")]
    tls += ["--ofp-ca", str(tmp_path / "pki" / "switchca" / "cacert.pem"), "--ofp-bind-dpid"]
    target = f"ssl:127.0.0.1:{bridge.ofp_port}"
    try:
        # A certificate naming another datapath id: refused, and the log names it.
        set_switch_certificate(tmp_path, bridge.name, wrong)
        with harness.controller(
            policy_file, tmp_path / "ctl-wrong.log", bridge.ofp_port, extra_args=tls
        ) as ctl:
            sh("ovs-vsctl", "set-controller", bridge.name, target)
            harness.wait_for(
                "the refusal of the wrong certificate",
                lambda: f"claims datapath id {dpid}" in ctl.log(),
                30,
            )
            assert f"is for {wrong.removeprefix('dpid-')}" in ctl.log()
            assert harness.ofctl_cookies(bridge.name) == []
        # Its own certificate: served, policy installed, over TLS.
        set_switch_certificate(tmp_path, bridge.name, right)
        with harness.controller(
            policy_file, tmp_path / "ctl-right.log", bridge.ofp_port, extra_args=tls
        ) as ctl:
            sh("ovs-vsctl", "set-controller", bridge.name, target)
            harness.wait_in_sync(bridge.name, ctl.policy, bridge.ports)
            [version] = harness.negotiated_tls(ctl.log())
            print(f"\nOVS with ovs-pki certificates, bound to dpid {dpid}: {version}")
            assert "refused" not in ctl.log()
            assert ctl.problems() == []
    finally:
        sh("ovs-vsctl", "del-ssl", check=False)
        sh("ovs-vsctl", "set-controller", bridge.name, f"tcp:127.0.0.1:{bridge.ofp_port}")
