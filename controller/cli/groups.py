"""Command groups that answer a mistyped or misremembered subcommand with the one meant.

typer suggests only near spellings, and only among commands it has built:
``flowlane jobs remove`` said ``No such command 'remove'`` (``delete`` is not
a near spelling), and the top-level group, whose commands load lazily, never
suggested anything.  Here a group suggests among every command it lists, by
spelling and by the words other tools use for the same thing.
"""

from __future__ import annotations

from collections.abc import Iterable
from difflib import get_close_matches
from typing import TYPE_CHECKING

from typer._click.exceptions import UsageError
from typer.core import TyperGroup

if TYPE_CHECKING:
    from typer._click.core import Command, Context

SYNONYMS: dict[str, tuple[str, ...]] = {
    "remove": ("delete", "revoke"),
    "rm": ("delete", "revoke"),
    "del": ("delete", "revoke"),
    "destroy": ("delete", "revoke"),
    "ls": ("list",),
    "get": ("show", "list"),
    "status": ("show", "switches"),
    "new": ("create", "add"),
    "create": ("add",),
    "register": ("add",),
    "add": ("create",),
    "log": ("audit", "events", "history"),
    "logs": ("audit", "events", "history"),
    "undo": ("rollback",),
    "revert": ("rollback",),
    "check": ("validate",),
    "diff": ("plan",),
    "start": ("up",),
    "run": ("up",),
}
"""A word other CLIs use → the commands it may mean here (only those a group has count)."""


def suggestions(typed: str, commands: Iterable[str]) -> list[str]:
    """The commands ``typed`` most likely meant: synonyms first, then near spellings."""
    available = list(commands)
    found = [name for name in SYNONYMS.get(typed.lower(), ()) if name in available]
    found += [name for name in get_close_matches(typed, available) if name not in found]
    return found


class HintingGroup(TyperGroup):
    """A group whose "No such command" names the command probably meant."""

    def resolve_command(
        self, ctx: Context, args: list[str]
    ) -> tuple[str | None, Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except UsageError as error:
            if args and error.message.startswith("No such command"):
                found = suggestions(args[0], self.list_commands(ctx))
                if found:
                    meant = " or ".join(repr(name) for name in found)
                    error.message = f"No such command {args[0]!r}. Did you mean {meant}?"
            raise
