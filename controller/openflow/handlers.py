"""os-ken's ``set_ev_cls`` with a type, so mypy keeps checking the handlers it marks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from os_ken.controller.handler import set_ev_cls

Handler = TypeVar("Handler", bound=Callable[..., None])


def on_event(event: Any, dispatchers: Any) -> Callable[[Handler], Handler]:
    """Mark a handler of ``event`` (one class or a list) in the given connection states."""
    return cast(Callable[[Handler], Handler], set_ev_cls(event, dispatchers))
