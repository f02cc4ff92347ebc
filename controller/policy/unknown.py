"""Unknown keys: name the key, and the field it was probably meant to be.

Pydantic says ``Extra inputs are not permitted``, which leaves an operator
to find ``min_rte`` by eye.  The fields a mapping accepts follow from the
model and the error's location, so the message can say ``unknown field
'min_rte' (did you mean 'min_rate'?)``, or list the fields when nothing is
close.  Pure: reads model classes, never documents.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Sequence
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

_CUTOFF = 0.6
"""difflib's default: ``min_rte`` → ``min_rate`` and ``prority`` → ``priority`` match,
``bogus`` matches nothing (then every accepted field is listed instead)."""


def accepted_keys(model: type[BaseModel], location: Sequence[str | int]) -> tuple[str, ...]:
    """The keys accepted by the mapping at ``location`` of a ``model`` document, as written
    there (aliases, such as a rule's ``class``); empty when no model is there."""
    target = _model_at(model, location)
    if target is None:
        return ()
    return tuple(info.alias or name for name, info in target.model_fields.items())


def unknown_field_message(key: str, accepted: Sequence[str]) -> str:
    """``unknown field 'min_rte' (did you mean 'min_rate'?)``; without a close match, the
    accepted fields, so the reader need not open the documentation to find them."""
    # Keys are case-sensitive, but ``Min_Rate`` was still meant to be ``min_rate``.
    by_lower = {name.lower(): name for name in accepted}
    close = difflib.get_close_matches(key.lower(), list(by_lower), n=1, cutoff=_CUTOFF)
    if close:
        return f"unknown field {key!r} (did you mean {by_lower[close[0]]!r}?)"
    if accepted:
        return f"unknown field {key!r} (fields: {', '.join(accepted)})"
    return f"unknown field {key!r}"


def _model_at(model: type[BaseModel], location: Sequence[str | int]) -> type[BaseModel] | None:
    """Follow ``location`` through fields, dict values and list items to the model there."""
    current: Any = model
    for part in location:
        current = _step(current, part)
        if current is None:
            return None
    return _model_in(current)


def _step(annotation: Any, part: str | int) -> Any:
    """The type one location part below ``annotation``, or None when nothing is there."""
    target = _model_in(annotation)
    if target is not None:
        if not isinstance(part, str):
            return None
        for name, info in target.model_fields.items():
            if part in (name, info.alias):
                return info.annotation
        return None
    annotation = _unwrapped(annotation)
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is dict and len(args) == 2:
        return args[1]  # a key of the mapping: the value's type
    if origin in (list, tuple) and args and isinstance(part, int):
        return args[0]
    return None


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model an annotation holds: itself, or the one model of an optional or union."""
    annotation = _unwrapped(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Union, types.UnionType):
        models = [m for m in map(_model_in, get_args(annotation)) if m is not None]
        # With two models in a union pydantic tags the location with the member's name;
        # no policy field is such a union, so one model is the only case to follow.
        return models[0] if len(models) == 1 else None
    return None


def _unwrapped(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation
