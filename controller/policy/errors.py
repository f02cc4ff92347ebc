"""Policy errors that name the field at fault, so an operator can fix a file in one pass."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem: ``path`` is like ``rules[1].match.tcp_dst``; ``message`` says why."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class PolicyError(ValueError):
    """A policy document was rejected; ``errors`` lists every problem found."""

    def __init__(self, errors: Sequence[FieldError], source: str = "policy") -> None:
        self.errors = tuple(errors)
        self.source = source
        lines = "\n".join(f"  {error}" for error in self.errors)
        super().__init__(f"{source}: {len(self.errors)} error(s)\n{lines}")


def format_path(location: Sequence[str | int]) -> str:
    """Render a pydantic location as ``rules[1].match.tcp_dst``."""
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "(document)"
