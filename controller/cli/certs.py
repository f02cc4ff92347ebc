"""``flowlane certs init DIR``: a private CA and the certificates HTTPS and OpenFlow TLS need."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from controller.auth.files import write_secret_file
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
    # Created 0600 from the start under a random name, then renamed: never readable by
    # others, not even briefly, and never written through a planted symlink.
    write_secret_file(directory / f"{name}.key", issued.key_pem)


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
    switch_dpid: Annotated[
        list[str] | None,
        typer.Option(
            help="Also a certificate for the switch with this datapath id (16 hex digits;"
            " repeat it): switch-<dpid>.pem, for flowlane controller --ofp-bind-dpid"
        ),
    ] = None,
) -> None:
    """Create a private CA in DIRECTORY and sign, with it, certificates for the API
    (api.pem), the OpenFlow controller (controller.pem), switches (switch.pem) and API
    clients (client.pem); keys are *.key, readable by their owner only."""
    hosts = tuple(dict.fromkeys([*DEFAULT_HOSTS, *(host or [])]))
    try:
        dpids = [int(value.replace(":", ""), 16) for value in switch_dpid or []]
    except ValueError:
        out.print("[red]error:[/] --switch-dpid takes a datapath id in hex: 0000000000000001")
        raise typer.Exit(2) from None
    if any(not 0 <= dpid < 2**64 for dpid in dpids):
        out.print("[red]error:[/] --switch-dpid: a datapath id has at most 16 hex digits")
        raise typer.Exit(2)
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
    from controller.auth.certs import issue, new_authority, switch_name

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
    for dpid in dpids:  # CN "flowlane switch dpid:<16 hex>": the id it may serve under
        issued = issue(authority, switch_name(dpid), server=False, client=True)
        _write(directory, f"switch-{dpid:016x}", issued)
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
