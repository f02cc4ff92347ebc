r"""Shared console output for the CLI: errors go to stderr, tables to stdout.

Text the CLI did not write itself (comments, names, port names, the API's error
messages) is printed as it is, never interpreted: a comment ``[/bold]`` must not
crash ``flowlane policy history`` (rich markup), and ``\x1b]0;...`` must not
retitle the operator's terminal or hide the lines above it (escape sequences).
``safe`` escapes a value for a markup string and ``plain`` makes a table cell of
it; the consoles themselves are the net under both: whatever reaches them has its
control characters replaced, and a markup error prints the text literally.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Collection, Iterable, Sequence
from typing import Annotated, Any

import typer
from rich.console import Console, ConsoleOptions, RenderableType
from rich.errors import MarkupError
from rich.markup import escape
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from controller.logs import LogFormat
from controller.policy.errors import PolicyError

LogFormatOption = Annotated[
    LogFormat, typer.Option(help="Logs as text, or as json: one JSON object per line")
]

PIPED_WIDTH = 10_000
"""Output to a file or a program is never cut to 80 columns: dpids and paths stay whole."""


_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 and C1 controls (ESC and CSI start escape sequences), DEL, and the bidirectional
overrides that make a terminal show text in another order than it is stored."""
_UNSAFE_IN_OUTPUT = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
"""The same, less newline and tab: what a console may still be handed as a whole text."""
REPLACEMENT = "\ufffd"


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(value: object) -> str:
    r"""``value`` as one line of text with every control character shown as an escape:
    ``"a\x1b]0;b"`` prints as ``a\x1b]0;b``, ``"x\ny"`` as ``x\ny``."""
    return _UNSAFE.sub(_visible, str(value))


def safe(value: object) -> str:
    """``value`` fit to put in a rich markup string: cleaned, and its ``[`` escaped."""
    return escape(clean(value))


def plain(value: object) -> Text:
    """A table cell showing ``value`` as it is: no markup, no control characters."""
    return Text(clean(value))


class SafeConsole(Console):
    """A console that cannot be made to write a control character it did not make itself,
    nor crash on markup it was handed by mistake."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        try:
            return super().render_str(text, **kwargs)
        except MarkupError:
            # Some caller put stored text in a markup string unescaped: show it literally
            # rather than fail the whole command for every viewer.
            return super().render_str(text, **{**kwargs, "markup": False})

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control is None and _UNSAFE_IN_OUTPUT.search(segment.text):
                # One character for one, so the widths rich measured stay right.
                segment = Segment(
                    _UNSAFE_IN_OUTPUT.sub(REPLACEMENT, segment.text), segment.style, None
                )
            yield segment


def console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return SafeConsole(stderr=stderr)
    return SafeConsole(stderr=stderr, width=PIPED_WIDTH, soft_wrap=True)


out = console()
err = console(stderr=True)


Row = Sequence[RenderableType]
"""One table row: a cell per column, markup strings or ``plain`` texts."""


def table(
    title: str, columns: Iterable[str], rows: Iterable[Row], *, right: Collection[str] = ()
) -> Table:
    """The CLI's one table style: titled on the left, a column per name (left-aligned, but
    those named in ``right``: numbers), then the rows."""
    grid = Table(title=title, title_justify="left")
    for column in columns:
        grid.add_column(column, justify="right" if column in right else "left")
    for row in rows:
        grid.add_row(*row)
    return grid


def print_table(
    title: str,
    columns: Iterable[str],
    rows: Sequence[Row],
    *,
    empty: str,
    right: Collection[str] = (),
    highlight: bool | None = None,
) -> None:
    """``table`` on stdout, or the line ``empty`` when there is no row: a table with only
    headers would say less than a sentence naming why it is empty. ``highlight`` is
    ``empty``'s (rich's repr highlighting), for a line that carries its own markup."""
    if rows:
        out.print(table(title, columns, rows, right=right))
    else:
        out.print(empty, highlight=highlight)


def version_note(rollback_of: object, comment: object) -> str:
    """What follows a version's author: ``, a rollback to version 1: why``.

    A rollback without a comment is stored with ``rollback to version N`` as its comment (so
    the history's comment column says it); printed after the rollback note it only repeats it.
    The comment is escaped (``safe``): the note goes into markup strings.
    """
    line = f", a rollback to version {safe(rollback_of)}" if rollback_of else ""
    if comment and not (rollback_of and comment == f"rollback to version {rollback_of}"):
        line += f": {safe(comment)}"
    return line


def print_policy_error(error: PolicyError) -> None:
    err.print(f"[bold red]invalid policy[/] {safe(error.source)}: {len(error.errors)} error(s)")
    for item in error.errors:  # paths and messages quote the input: printed as they are
        err.print(f"  [cyan]{safe(item.path)}[/]: {safe(item.message)}", highlight=False)
