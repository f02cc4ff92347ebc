"""The files of OpenFlow over mutual TLS, and the TLS context the hub serves with.

A TLS controller listens on TLS only, with all three files: its key and
certificate, and the CA whose certificate every switch must present. So it
has no plain listener and serves only switches the CA certified. The OpenFlow
hub (``hub``) takes them as an ``ssl.SSLContext`` (``server_context``).
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


def server_context(tls: OfpTls) -> ssl.SSLContext:
    """The hub's TLS context: our certificate and key, and only switches the CA certified
    (a client certificate is required and checked; no host name, switches have none)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(tls.ca))
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(str(tls.cert), str(tls.key))
    context.verify_mode = ssl.CERT_REQUIRED
    return context
