"""Policy errors that name the field at fault, so an operator can fix a file in one pass."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ValidationError

from controller.policy.unknown import accepted_keys, unknown_field_message

_PREFIXES = ("Value error, ", "Assertion failed, ")


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


def field_errors(exc: ValidationError, model: type[BaseModel] | None = None) -> list[FieldError]:
    """Pydantic's errors at our paths, without its ``Value error, `` prefixes; an unknown key
    of ``model`` (when given) says which field was probably meant."""
    errors: list[FieldError] = []
    for error in exc.errors():
        location = error["loc"]
        if error["type"] == "extra_forbidden" and location and isinstance(location[-1], str):
            accepted = accepted_keys(model, location[:-1]) if model is not None else ()
            message = unknown_field_message(location[-1], accepted)
        else:
            message = _message(error["msg"])
        errors.append(FieldError(format_path(location), message))
    return errors


def _message(raw: str) -> str:
    for prefix in _PREFIXES:
        if raw.startswith(prefix):
            return raw[len(prefix) :]
    return raw
