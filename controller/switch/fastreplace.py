"""``dataclasses.replace`` for the switch's frozen values, without its per-field ``__init__``.

Each step replaces ``SwitchState`` (about forty fields) several times over, and at a
hundred switches a policy change makes a few thousand such copies: ``dataclasses.replace``
builds keyword arguments for every field and runs the frozen ``__init__``, which sets each
one through ``object.__setattr__`` (about 15 µs a copy, a fifth of the switch actors' CPU in
a profile at 100 switches).  A frozen dataclass with no ``__post_init__``, no ``init=False``
field and no ``__slots__`` is exactly its ``__dict__``, so a copy of that dictionary with the
changes applied is the same value (about 1 µs); a class with a ``cached_property`` is not
(its cache would be copied with the fields).  Any other class goes through
``dataclasses.replace``; so does a change naming no field, which then raises as it would.

For the type checker this *is* ``dataclasses.replace`` (mypy checks its keywords against
the class's fields).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dataclasses import replace as replace
else:
    _FIELDS: dict[type, frozenset[str] | None] = {}
    """Per class: its field names when a dictionary copy is a faithful replace, else None."""

    def _copyable(cls: type) -> frozenset[str] | None:
        try:
            return _FIELDS[cls]
        except KeyError:
            pass
        fields = dataclasses.fields(cls)
        simple = (
            "__slots__" not in cls.__dict__
            and not hasattr(cls, "__post_init__")
            # InitVar and ClassVar pseudo-fields are in __dataclass_fields__, not in fields()
            and len(fields) == len(cls.__dataclass_fields__)
            and all(f.init for f in fields)
            and not any(
                isinstance(value, functools.cached_property)
                for klass in cls.__mro__
                for value in vars(klass).values()
            )
        )
        names = frozenset(f.name for f in fields) if simple else None
        _FIELDS[cls] = names
        return names

    def replace(obj: Any, /, **changes: Any) -> Any:
        cls = type(obj)
        names = _copyable(cls)
        if names is None or not changes.keys() <= names:
            return dataclasses.replace(obj, **changes)
        new = object.__new__(cls)
        values = new.__dict__
        values.update(obj.__dict__)
        values.update(changes)
        return new
