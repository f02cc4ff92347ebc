"""Shared console output for the CLI: errors go to stderr, tables to stdout."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.console import Console

from controller.logs import LogFormat
from controller.policy.errors import PolicyError

LogFormatOption = Annotated[
    LogFormat, typer.Option(help="Logs as text, or as json: one JSON object per line")
]

PIPED_WIDTH = 10_000
"""Output to a file or a program is never cut to 80 columns: dpids and paths stay whole."""


def console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=PIPED_WIDTH, soft_wrap=True)


out = console()
err = console(stderr=True)


def print_policy_error(error: PolicyError) -> None:
    err.print(f"[bold red]invalid policy[/] {error.source}: {len(error.errors)} error(s)")
    for item in error.errors:
        err.print(f"  [cyan]{item.path}[/]: {item.message}", highlight=False, markup=True)
