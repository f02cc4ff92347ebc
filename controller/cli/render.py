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


def version_note(rollback_of: object, comment: object) -> str:
    """What follows a version's author: ``, a rollback to version 1: why``.

    A rollback without a comment is stored with ``rollback to version N`` as its comment (so
    the history's comment column says it); printed after the rollback note it only repeats it.
    """
    line = f", a rollback to version {rollback_of}" if rollback_of else ""
    if comment and not (rollback_of and comment == f"rollback to version {rollback_of}"):
        line += f": {comment}"
    return line


def print_policy_error(error: PolicyError) -> None:
    err.print(f"[bold red]invalid policy[/] {error.source}: {len(error.errors)} error(s)")
    for item in error.errors:
        err.print(f"  [cyan]{item.path}[/]: {item.message}", highlight=False, markup=True)
