"""A private certificate authority for a test or small deployment, with the `cryptography`
library: one CA, and certificates for the API server, the OpenFlow controller, the
switches and API clients.

Keys are ECDSA P-256 (what OVS, OpenSSL and browsers all accept, and cheap to
handshake); certificates last a year, the CA ten. A larger deployment brings
its own PKI: every flowlane option takes any PEM certificate and key.

A switch certificate may name the datapath id it is for (``dpid:<16 hex
digits>``, also ``dpid-...`` as ``ovs-pki req+sign dpid-<16 hex> switch``
writes it, in its CN or a DNS/URI subject alternative name); with
``--ofp-bind-dpid`` the controller serves a switch only under that id.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS: Final = 3650
LEAF_DAYS: Final = 365


@dataclass(frozen=True, slots=True)
class Issued:
    """A certificate and its private key, PEM-encoded."""

    cert_pem: bytes
    key_pem: bytes


@dataclass(frozen=True, slots=True)
class Authority:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def issued(self) -> Issued:
        return Issued(self.cert.public_bytes(serialization.Encoding.PEM), _key_pem(self.key))


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "flowlane"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def new_authority(
    common_name: str = "flowlane CA", now: datetime.datetime | None = None
) -> Authority:
    start = now or datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start - datetime.timedelta(minutes=5))
        .not_valid_after(start + datetime.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Authority(cert, key)


def _san(hosts: Sequence[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def issue(
    authority: Authority,
    common_name: str,
    *,
    server: bool,
    client: bool,
    hosts: Sequence[str] = (),
    now: datetime.datetime | None = None,
) -> Issued:
    """A leaf certificate signed by ``authority``, for TLS servers, clients, or both."""
    start = now or datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    usages = [
        *([ExtendedKeyUsageOID.SERVER_AUTH] if server else []),
        *([ExtendedKeyUsageOID.CLIENT_AUTH] if client else []),
    ]
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(authority.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start - datetime.timedelta(minutes=5))
        .not_valid_after(start + datetime.timedelta(days=LEAF_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(authority.key.public_key()),
            critical=False,
        )
    )
    if hosts:
        builder = builder.add_extension(_san(hosts), critical=False)
    cert = builder.sign(authority.key, hashes.SHA256())
    return Issued(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


DPID_NAME = re.compile(r"(?<![0-9a-z])dpid[-:=]?(?:0x)?([0-9a-f]{16})(?![0-9a-z])", re.IGNORECASE)
"""``dpid:0000000000000001`` in a certificate's CN or SAN: the datapath id it is for."""


def switch_name(dpid: int) -> str:
    """The CN ``flowlane certs init --switch-dpid`` gives a switch's certificate."""
    return f"flowlane switch dpid:{dpid:016x}"


def _common_names(cert: x509.Certificate) -> list[str]:
    return [str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]


def certified_dpids(cert: x509.Certificate) -> set[int]:
    """The datapath ids ``cert`` names in its CN and its DNS and URI alternative names."""
    names = _common_names(cert)
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        pass
    else:
        names += san.get_values_for_type(x509.DNSName)
        names += san.get_values_for_type(x509.UniformResourceIdentifier)
    return {int(found, 16) for name in names for found in DPID_NAME.findall(name)}


def dpid_binding_error(cert_der: bytes | None, dpid: int) -> str | None:
    """Why a switch that presented ``cert_der`` may not be datapath ``dpid`` (None: it may).

    Without a binding, any switch the CA certified may claim any datapath id, and so
    take another switch's flows; with it, the certificate says which one it is.
    """
    if not cert_der:
        return "it presented no certificate, so none can name its datapath id"
    try:
        cert = x509.load_der_x509_certificate(cert_der)
    except ValueError as exc:
        return f"its certificate cannot be read: {exc}"
    subject = ", ".join(_common_names(cert)) or cert.subject.rfc4514_string()
    dpids = certified_dpids(cert)
    if not dpids:
        return (
            f"its certificate (CN {subject!r}) names no datapath id; with --ofp-bind-dpid a"
            " switch certificate names its own as dpid:<16 hex digits> in its CN or a SAN"
        )
    if dpid not in dpids:
        named = ", ".join(f"{d:016x}" for d in sorted(dpids))
        return (
            f"it claims datapath id {dpid:016x} but its certificate (CN {subject!r}) is for {named}"
        )
    return None
