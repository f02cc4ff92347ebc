"""The private CA of ``flowlane certs init``: chains that verify, usages that fit, keys that
only their owner reads, and a handshake that works with Python's own TLS."""

from __future__ import annotations

import socket
import ssl
import stat
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from typer.testing import CliRunner

from controller.cli.main import app

FILES = ("ca", "api", "controller", "switch", "client")


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    directory = tmp_path / "pki"
    result = CliRunner().invoke(app, ["certs", "init", str(directory), "--host", "fabric.test"])
    assert result.exit_code == 0, result.output
    assert "ovs-vsctl set-ssl" in result.output and "--ofp-ca" in result.output
    return directory


def load(directory: Path, name: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate((directory / f"{name}.pem").read_bytes())


def test_every_certificate_is_signed_by_the_ca_for_its_use(pki: Path) -> None:
    ca = load(pki, "ca")
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    usages = {
        "api": {ExtendedKeyUsageOID.SERVER_AUTH},
        "controller": {ExtendedKeyUsageOID.SERVER_AUTH},
        "switch": {ExtendedKeyUsageOID.CLIENT_AUTH},
        "client": {ExtendedKeyUsageOID.CLIENT_AUTH},
    }
    for name, wanted in usages.items():
        cert = load(pki, name)
        assert cert.issuer == ca.subject and cert.signature_hash_algorithm is not None
        # Raises unless the CA's key made the signature (cryptography 38 has no verify helper).
        ca_key = ca.public_key()
        assert isinstance(ca_key, ec.EllipticCurvePublicKey)
        ca_key.verify(
            cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm)
        )
        assert set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == wanted
        assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    names = load(pki, "api").extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert names.value.get_values_for_type(x509.DNSName) == ["localhost", "fabric.test"]


def test_keys_are_readable_by_their_owner_only(pki: Path) -> None:
    assert stat.S_IMODE(pki.stat().st_mode) == 0o700
    for name in FILES:
        assert stat.S_IMODE((pki / f"{name}.key").stat().st_mode) == 0o600


def test_init_refuses_to_overwrite_without_force(pki: Path) -> None:
    before = (pki / "ca.pem").read_bytes()
    refused = CliRunner().invoke(app, ["certs", "init", str(pki)])
    assert refused.exit_code == 2 and "exists; --force" in refused.output
    assert (pki / "ca.pem").read_bytes() == before
    assert CliRunner().invoke(app, ["certs", "init", str(pki), "--force"]).exit_code == 0
    assert (pki / "ca.pem").read_bytes() != before


def test_a_mutual_tls_handshake_with_the_issued_certificates(pki: Path, tmp_path: Path) -> None:
    """Server: the controller's certificate, requiring clients of the CA. A client with the
    switch's certificate connects; one of another CA is refused."""
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=pki / "ca.pem")
    server_context.load_cert_chain(pki / "controller.pem", pki / "controller.key")
    server_context.verify_mode = ssl.CERT_REQUIRED
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    outcomes: list[str] = []

    def serve(times: int) -> None:
        for _ in range(times):
            conn, _ = listener.accept()
            try:
                with server_context.wrap_socket(conn, server_side=True) as tls:
                    outcomes.append(str(tls.version()))
                    tls.sendall(b"ok")
            except ssl.SSLError as exc:
                outcomes.append(f"refused: {exc.reason}")

    thread = threading.Thread(target=serve, args=(2,), daemon=True)
    thread.start()

    def connect(client_dir: Path) -> bytes:
        context = ssl.create_default_context(cafile=pki / "ca.pem")
        context.load_cert_chain(client_dir / "switch.pem", client_dir / "switch.key")
        with (
            socket.create_connection(("127.0.0.1", port)) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            return tls.recv(2)

    assert connect(pki) == b"ok"
    other = tmp_path / "other"
    assert CliRunner().invoke(app, ["certs", "init", str(other)]).exit_code == 0
    with pytest.raises((ssl.SSLError, ConnectionError)):
        connect(other)
        connect(other)  # TLS 1.3 reports a refused client certificate on the first read
    thread.join(5)
    listener.close()
    assert outcomes[0] in ("TLSv1.2", "TLSv1.3")
    assert outcomes[1].startswith("refused")
