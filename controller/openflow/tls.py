"""The files of OpenFlow over mutual TLS, and the os-ken options that turn it on.

os-ken listens either on plain TCP or, when given a key and certificate, on
TLS only; with a CA it requires and checks the switch's certificate. flowlane
always gives all three, so a TLS controller has no plain listener and serves
only switches the CA certified.
"""

from __future__ import annotations

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
