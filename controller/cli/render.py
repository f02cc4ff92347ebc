"""Shared console output for the CLI: errors go to stderr, tables to stdout."""

from __future__ import annotations

from rich.console import Console

from controller.policy.errors import PolicyError

out = Console()
err = Console(stderr=True)


def print_policy_error(error: PolicyError) -> None:
    err.print(f"[bold red]invalid policy[/] {error.source}: {len(error.errors)} error(s)")
    for item in error.errors:
        err.print(f"  [cyan]{item.path}[/]: {item.message}", highlight=False, markup=True)
