"""The ``flowlane`` command.

Each subcommand's module is imported only when that subcommand runs (or when the
help lists them all): the API client, Redis, the planner and the scenario runner
cost more to import than most commands take to run, and a ``flowlane policy show``
should answer in a fraction of a second.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from typer._click.core import ParameterSource

from controller.auth.files import TOKEN_ENV, TOKEN_FILE_ENV
from controller.cli.credentials import CREDENTIALS
from controller.cli.groups import HintingGroup

if TYPE_CHECKING:  # typer 0.29 carries its own click; only the type checker needs its names
    from typer._click.core import Command, Context

COMMANDS: dict[str, tuple[str, str]] = {
    "policy": ("controller.cli.policy", "app"),
    "token": ("controller.cli.access", "token_app"),
    "jobs": ("controller.cli.jobs", "app"),
    "scenario": ("controller.cli.scenario", "app"),
    "certs": ("controller.cli.certs", "app"),
    "controller": ("controller.cli.controller", "controller"),
    "api": ("controller.cli.api", "api"),
    "switches": ("controller.cli.remote", "switches"),
    "controllers": ("controller.cli.controllers", "controllers"),
    "flows": ("controller.cli.flows", "flows"),
    "events": ("controller.cli.flows", "events"),
    "topology": ("controller.cli.fabric", "topology"),
    "paths": ("controller.cli.fabric", "paths"),
    "up": ("controller.cli.up", "up"),
    "top": ("controller.cli.top", "top"),
    "audit": ("controller.cli.access", "audit"),
}
"""Subcommand name → (module, attribute): a ``typer.Typer`` group or a command function."""


def load_command(name: str) -> Command:
    """The click command behind ``name``, its module imported now."""
    module, attribute = COMMANDS[name]
    target = getattr(importlib.import_module(module), attribute)
    if isinstance(target, typer.Typer):
        command: Command = typer.main.get_group(target)
    else:
        single = typer.Typer()
        single.command(name=name)(target)
        command = typer.main.get_command(single)
    command.name = name
    return command


class LazyGroup(HintingGroup):
    """The top-level group: subcommands listed by name, built on first use."""

    def list_commands(self, ctx: Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name not in COMMANDS:
            return None
        return load_command(cmd_name)


app = typer.Typer(
    help="flowlane: training and inference traffic classes on Open vSwitch.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    cls=LazyGroup,
)


def _print_version(value: bool) -> None:
    if value:
        from importlib import metadata

        try:
            version = metadata.version("flowlane")
        except metadata.PackageNotFoundError:  # run from a checkout that was never installed
            version = "unknown (not installed)"
        typer.echo(f"flowlane {version}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    token: Annotated[
        str | None,
        typer.Option(
            envvar=TOKEN_ENV,
            help="API token: prefer $FLOWLANE_TOKEN or --token-file (ps shows arguments)",
            show_envvar=False,
        ),
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
    # --token also reads $FLOWLANE_TOKEN: which of the two it was is named when it is refused.
    from_env = ctx.get_parameter_source("token") is ParameterSource.ENVIRONMENT
    CREDENTIALS.token_source = f"${TOKEN_ENV}" if from_env else "--token"
    if token is not None and ctx.get_parameter_source("token") is ParameterSource.COMMANDLINE:
        # ps shows every argument to every user of the machine; the shell keeps it too.
        typer.echo(
            "warning: --token puts the token on the command line, where ps shows it to every"
            f" user; use --token-file or ${TOKEN_ENV}",
            err=True,
        )
    CREDENTIALS.token_file = token_file
    CREDENTIALS.ca_file = ca_file
    CREDENTIALS.client_cert = client_cert
    CREDENTIALS.client_key = client_key
