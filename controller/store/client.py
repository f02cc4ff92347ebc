"""One way to open Redis, so every process fails the same clear way when it is not there."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import redis

from controller.store.errors import StoreUnavailableError

P = ParamSpec("P")
R = TypeVar("R")


def connect(url: str) -> redis.Redis:
    """A client with short timeouts: a dead Redis must turn into a 503, not a hung request."""
    return redis.Redis.from_url(
        url,
        decode_responses=True,
        socket_connect_timeout=2,
        socket_timeout=5,
        health_check_interval=10,
        retry_on_timeout=False,
    )


def translate_errors(function: Callable[P, R]) -> Callable[P, R]:
    """Turn redis-py's connection errors into ``StoreUnavailableError``."""

    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return function(*args, **kwargs)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise StoreUnavailableError(f"Redis unavailable: {exc}") from exc

    return wrapper


def text(value: bytes | str) -> str:
    """redis-py is typed for both reply kinds; our clients always decode responses."""
    return value.decode() if isinstance(value, bytes) else value
