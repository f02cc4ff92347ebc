"""A switch certificate tied to its datapath id (issue 24, finding 11): with
``--ofp-bind-dpid`` a certified switch may claim only the dpid its certificate names.

The pure check on certificates of both PKIs (``flowlane certs init --switch-dpid`` and
``ovs-pki``'s CN/SAN layout), then a real TLS controller process and a scripted switch
over mutual TLS: the one whose certificate names another dpid is refused, logged and
recorded as a ``switch-refused`` event; the right one is served."""

from __future__ import annotations

import contextlib
import datetime
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import redis
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from flowlane_bench import harness
from typer.testing import CliRunner

from controller.auth.certs import (
    certified_dpids,
    dpid_binding_error,
    issue,
    new_authority,
    switch_name,
)
from controller.cli.main import app
from controller.store.events import EventStore
from tests.support.openflow_peer import ScriptedSwitch

DPID = 0x00000000000000A1
OTHER = 0x00000000000000B2


def der(pem: bytes) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding

    return x509.load_pem_x509_certificate(pem).public_bytes(Encoding.DER)


def ovs_pki_style(name: str) -> x509.Certificate:
    """What ``ovs-pki req+sign NAME switch`` makes: CN "NAME id:<uuid>", SAN DNS the same."""
    key = ec.generate_private_key(ec.SECP256R1())
    cn = f"{name} id:5d3c1f2e-0000-4000-8000-000000000000"
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Open vSwitch"),
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
        ]
    )
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(datetime.datetime(2025, 1, 1))
        .not_valid_after(datetime.datetime(2035, 1, 1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(cn)]), critical=False)
        .sign(key, hashes.SHA256())
    )


def test_the_dpid_is_read_from_either_pkis_certificates() -> None:
    authority = new_authority()
    ours = x509.load_pem_x509_certificate(
        issue(authority, switch_name(DPID), server=False, client=True).cert_pem
    )
    assert certified_dpids(ours) == {DPID}
    assert certified_dpids(ovs_pki_style(f"dpid-{DPID:016x}")) == {DPID}
    assert certified_dpids(ovs_pki_style("sc")) == set()
    # 16 hex digits exactly, as a word: a longer run of hex is not a datapath id
    assert certified_dpids(ovs_pki_style(f"xdpid:{DPID:016x}")) == set()
    assert certified_dpids(ovs_pki_style(f"dpid:{DPID:016x}0")) == set()


def test_the_binding_says_why_it_refuses() -> None:
    authority = new_authority()
    cert = der(issue(authority, switch_name(DPID), server=False, client=True).cert_pem)
    assert dpid_binding_error(cert, DPID) is None
    mismatch = dpid_binding_error(cert, OTHER)
    assert mismatch is not None
    assert f"claims datapath id {OTHER:016x}" in mismatch and f"for {DPID:016x}" in mismatch
    unnamed = der(issue(authority, "flowlane switch", server=False, client=True).cert_pem)
    assert "names no datapath id" in (dpid_binding_error(unnamed, DPID) or "")
    assert "no certificate" in (dpid_binding_error(None, DPID) or "")


def test_certs_init_issues_a_certificate_per_datapath_id(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["certs", "init", str(tmp_path), "--switch-dpid", f"{DPID:016x}"]
    )
    assert result.exit_code == 0, result.output
    cert = x509.load_pem_x509_certificate((tmp_path / f"switch-{DPID:016x}.pem").read_bytes())
    assert certified_dpids(cert) == {DPID}
    assert (tmp_path / f"switch-{DPID:016x}.key").stat().st_mode & 0o777 == 0o600
    bad = CliRunner().invoke(app, ["certs", "init", str(tmp_path / "b"), "--switch-dpid", "zz"])
    assert bad.exit_code == 2 and "--switch-dpid" in bad.output


def test_bind_dpid_without_tls_is_a_usage_error(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text((Path(__file__).parents[2] / "policies/examples/fifo.yaml").read_text())
    result = CliRunner().invoke(
        app, ["controller", "--policy", str(policy), "--ofp-bind-dpid", "--metrics-port", "0"]
    )
    assert result.exit_code == 2
    assert "--ofp-bind-dpid needs --ofp-tls-cert" in " ".join(result.output.split())


# ---- a real controller, a scripted switch over mutual TLS ------------------------------


@contextlib.contextmanager
def switch(port: int, pki: Path, cert: str, dpid: int) -> Iterator[ScriptedSwitch]:
    """A scripted switch connected over mutual TLS with ``cert``, claiming ``dpid``."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(pki / "ca.pem"))
    context.check_hostname = False
    context.load_cert_chain(pki / f"{cert}.pem", pki / f"{cert}.key")
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    peer = ScriptedSwitch(context.wrap_socket(raw), dpid)
    try:
        yield peer
    finally:
        peer.close()


def test_a_certified_switch_claiming_another_dpid_is_refused(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    """Before: any switch the CA certified was served under whatever dpid it claimed."""
    pki = tmp_path / "pki"
    tls = harness.make_pki(pki)
    done = CliRunner().invoke(
        app, ["certs", "init", str(pki), "--force", "--switch-dpid", f"{DPID:016x}"]
    )
    assert done.exit_code == 0, done.output
    policy = tmp_path / "policy.yaml"
    policy.write_text((Path(__file__).parents[2] / "policies/examples/fifo.yaml").read_text())
    port = harness.free_port()
    args = [*tls, "--ofp-bind-dpid", "--no-qos"]
    with harness.controller(
        policy, tmp_path / "ctl.log", port, redis_url=redis_url, extra_args=args
    ) as ctl:
        with switch(port, pki, f"switch-{DPID:016x}", OTHER) as impostor:
            assert impostor.hung_up.wait(15), ctl.log()
        harness.wait_for(
            "the refusal in the log", lambda: "refused a switch connection" in ctl.log(), 10
        )
        assert f"claims datapath id {OTHER:016x}" in ctl.log()
        assert f"switch {OTHER:016x} connected" not in ctl.log()
        events = EventStore(redis_client)
        harness.wait_for(
            "the switch-refused event",
            lambda: any(e.kind == "switch-refused" for e in events.read(limit=100)),
            10,
        )
        [refused] = [e.data for e in events.read(limit=100) if e.kind == "switch-refused"]
        assert refused["switch"] == f"{OTHER:016x}"
        assert f"is for {DPID:016x}" in refused["reason"]
        # The generic switch certificate names no dpid: refused as well, saying so.
        with switch(port, pki, "switch", DPID) as unnamed:
            assert unnamed.hung_up.wait(15), ctl.log()
        assert "names no datapath id" in ctl.log()
        # The right certificate for the right dpid is served.
        with switch(port, pki, f"switch-{DPID:016x}", DPID) as real:
            harness.wait_for(
                "the switch to be served",
                lambda: f"switch {DPID:016x} connected" in ctl.log(),
                15,
            )
            time.sleep(0.5)
            assert not real.hung_up.is_set()


def test_up_refuses_bind_dpid_without_tls_before_starting_anything() -> None:
    result = CliRunner().invoke(app, ["up", "--ofp-bind-dpid", "--ephemeral"])
    assert result.exit_code == 2
    assert "--ofp-bind-dpid needs --ofp-tls-cert" in " ".join(result.output.split())
