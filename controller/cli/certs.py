"""``flowlane certs init DIR``: a private CA and the certificates HTTPS and OpenFlow TLS need."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from controller.cli.groups import HintingGroup
from controller.cli.render import out

if TYPE_CHECKING:  # the cryptography library loads only for `certs init` itself
    from controller.auth.certs import Issued

app = typer.Typer(
    help="Certificates for HTTPS and OpenFlow over TLS.", no_args_is_help=True, cls=HintingGroup
)


DEFAULT_HOSTS = ("localhost", "127.0.0.1", "::1")
FILES = ("ca", "api", "controller", "switch", "client")


def _write(directory: Path, name: str, issued: Issued) -> None:
    (directory / f"{name}.pem").write_bytes(issued.cert_pem)
    key = directory / f"{name}.key"
    # Created 0600 from the start: the key is never readable by others, not even briefly.
    descriptor = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(issued.key_pem)
    key.chmod(0o600)


@app.command()
def init(
    directory: Annotated[Path, typer.Argument(help="Where to write the CA and certificates")],
    host: Annotated[
        list[str] | None,
        typer.Option(
            help="Another name or address the API and controller are reached at (repeat it),"
            " besides localhost, 127.0.0.1 and ::1"
        ),
    ] = None,
    force: Annotated[bool, typer.Option(help="Replace certificates already there")] = False,
) -> None:
    """Create a private CA in DIRECTORY and sign, with it, certificates for the API
    (api.pem), the OpenFlow controller (controller.pem), switches (switch.pem) and API
    clients (client.pem); keys are *.key, readable by their owner only."""
    hosts = tuple(dict.fromkeys([*DEFAULT_HOSTS, *(host or [])]))
    existing = [
        str(directory / f"{name}.{suffix}")
        for name in FILES
        for suffix in ("pem", "key")
        if (directory / f"{name}.{suffix}").exists()
    ]
    if existing and not force:
        out.print(f"[red]error:[/] {existing[0]} exists; --force replaces the certificates")
        raise typer.Exit(2)
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        out.print(f"[red]error:[/] cannot create {directory}: {exc.strerror or exc}")
        raise typer.Exit(2) from None
    from controller.auth.certs import issue, new_authority

    authority = new_authority()
    _write(directory, "ca", authority.issued)
    _write(
        directory, "api", issue(authority, "flowlane api", server=True, client=False, hosts=hosts)
    )
    _write(
        directory,
        "controller",
        issue(authority, "flowlane controller", server=True, client=False, hosts=hosts),
    )
    _write(directory, "switch", issue(authority, "flowlane switch", server=False, client=True))
    _write(directory, "client", issue(authority, "flowlane client", server=False, client=True))
    d = directory
    out.print(
        f"wrote a CA and certificates for {', '.join(hosts)} to {d}\n\n"
        "HTTPS for the API (add --tls-client-ca to require client certificates too):\n"
        f"  flowlane api --tls-cert {d}/api.pem --tls-key {d}/api.key"
        f" [--tls-client-ca {d}/ca.pem]\n"
        f"  flowlane --ca-file {d}/ca.pem [--client-cert {d}/client.pem"
        f" --client-key {d}/client.key] policy show --api https://127.0.0.1:8080\n\n"
        "OpenFlow over mutual TLS (only switches with a certificate of this CA connect):\n"
        f"  flowlane controller --ofp-tls-cert {d}/controller.pem"
        f" --ofp-tls-key {d}/controller.key --ofp-ca {d}/ca.pem ...\n"
        f"  ovs-vsctl set-ssl {d}/switch.key {d}/switch.pem {d}/ca.pem\n"
        "  ovs-vsctl set-controller BRIDGE ssl:127.0.0.1:6653\n\n"
        "flowlane up takes the same --tls-* and --ofp-tls-* options.",
        highlight=False,
    )
