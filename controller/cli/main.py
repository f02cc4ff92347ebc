"""The ``flowlane`` command."""

from __future__ import annotations

import typer

from controller.cli import jobs, policy, scenario
from controller.cli.api import api
from controller.cli.controller import controller
from controller.cli.fabric import paths, topology
from controller.cli.flows import events, flows
from controller.cli.remote import switches
from controller.cli.up import up

app = typer.Typer(
    help="flowlane: training and inference traffic classes on Open vSwitch.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(policy.app, name="policy")
app.add_typer(jobs.app, name="jobs")
app.add_typer(scenario.app, name="scenario")
app.command()(controller)
app.command()(api)
app.command()(switches)
app.command()(flows)
app.command()(events)
app.command()(topology)
app.command()(paths)
app.command()(up)
