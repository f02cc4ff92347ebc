"""The ``flowlane`` command."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Annotated

import typer

from controller.auth.files import TOKEN_ENV, TOKEN_FILE_ENV
from controller.cli import access, certs, jobs, policy, scenario
from controller.cli.api import api
from controller.cli.controller import controller
from controller.cli.fabric import paths, topology
from controller.cli.flows import events, flows
from controller.cli.remote import CREDENTIALS, switches
from controller.cli.top import top
from controller.cli.up import up

app = typer.Typer(
    help="flowlane: training and inference traffic classes on Open vSwitch.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        try:
            version = metadata.version("flowlane")
        except metadata.PackageNotFoundError:  # run from a checkout that was never installed
            version = "unknown (not installed)"
        typer.echo(f"flowlane {version}")
        raise typer.Exit()


@app.callback()
def main(
    token: Annotated[
        str | None,
        typer.Option(envvar=TOKEN_ENV, help="API token (or $FLOWLANE_TOKEN)", show_envvar=False),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(
            envvar=TOKEN_FILE_ENV,
            help="File holding the API token (default: ~/.config/flowlane/token, where the API"
            " writes its first admin token)",
        ),
    ] = None,
    ca_file: Annotated[
        Path | None,
        typer.Option(envvar="FLOWLANE_CA", help="CA to trust for an https:// API (flowlane certs)"),
    ] = None,
    client_cert: Annotated[
        Path | None,
        typer.Option(envvar="FLOWLANE_CLIENT_CERT", help="Client certificate for an API that asks"),
    ] = None,
    client_key: Annotated[
        Path | None, typer.Option(envvar="FLOWLANE_CLIENT_KEY", help="Its private key")
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit"
        ),
    ] = False,
) -> None:
    """flowlane: training and inference traffic classes on Open vSwitch."""
    del version  # handled by its callback
    if (client_cert is None) != (client_key is None):
        raise typer.BadParameter("give --client-cert and --client-key together")
    CREDENTIALS.token = token
    CREDENTIALS.token_file = token_file
    CREDENTIALS.ca_file = ca_file
    CREDENTIALS.client_cert = client_cert
    CREDENTIALS.client_key = client_key


app.add_typer(policy.app, name="policy")
app.add_typer(access.token_app, name="token")
app.add_typer(jobs.app, name="jobs")
app.add_typer(scenario.app, name="scenario")
app.add_typer(certs.app, name="certs")
app.command()(controller)
app.command()(api)
app.command()(switches)
app.command()(flows)
app.command()(events)
app.command()(topology)
app.command()(paths)
app.command()(up)
app.command()(top)
app.command()(access.audit)
