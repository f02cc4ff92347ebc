"""The files of OpenFlow over mutual TLS, and the os-ken options that turn it on.

os-ken listens either on plain TCP or, when given a key and certificate, on
TLS only; with a CA it requires and checks the switch's certificate. flowlane
always gives all three, so a TLS controller has no plain listener and serves
only switches the CA certified. The OpenFlow hub (``hub``) takes the same three
files as an ``ssl.SSLContext`` (``server_context``).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class OfpTls:
    cert: Path
    key: Path
    ca: Path


def listener_args(host: str, port: int, tls: OfpTls | None) -> list[str]:
    """os-ken's command-line options for a listener on ``host:port``."""
    args = ["--ofp-listen-host", host]
    if tls is None:
        return [*args, "--ofp-tcp-listen-port", str(port)]
    return [
        *args,
        "--ofp-ssl-listen-port",
        str(port),
        "--ctl-privkey",
        str(tls.key),
        "--ctl-cert",
        str(tls.cert),
        "--ca-certs",
        str(tls.ca),
    ]


def server_context(tls: OfpTls) -> ssl.SSLContext:
    """The hub's TLS context: our certificate and key, and only switches the CA certified
    (a client certificate is required and checked; no host name, switches have none)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(tls.ca))
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(str(tls.cert), str(tls.key))
    context.verify_mode = ssl.CERT_REQUIRED
    return context
