"""What an API process needs to know: where Redis is, how long it may wait for switches,
and how much policy history it keeps."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from prometheus_client import CollectorRegistry

from controller.store.liveness import CONTROLLER_MAX_AGE_S
from controller.store.policies import HISTORY_LIMIT

MAX_BODY_BYTES: Final = 8 * 1024 * 1024
"""8 MiB: the largest valid policy (4096 rules, MAX_POLICY_ENTRIES) is well below it."""


@dataclass(frozen=True, slots=True)
class ApiSettings:
    """Everything ``create_app`` depends on; tests build one per app.

    ``registry`` is injectable so that two apps in one process (tests) keep
    their own metrics instead of colliding in the global default registry.
    """

    redis_url: str
    prefix: str = "flowlane"
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    controller_max_age_s: float = CONTROLLER_MAX_AGE_S
    """A controller whose heartbeat is older than this is gone, and so are its switches
    (a few heartbeat intervals: controller/store/liveness.py)."""
    default_wait_timeout_s: float = 10.0
    """How long ``?wait=applied`` waits when the request names no ``timeout``."""
    max_wait_timeout_s: float = 120.0
    """The longest ``timeout`` a request may ask for: a waiting request holds a connection."""
    poll_interval_s: float = 0.1
    """How often a waiting request re-reads the applied versions on its own; a controller's
    confirmation wakes it at once, this covers a notification lost to a reconnect."""
    history_limit: int = HISTORY_LIMIT
    """Policy versions kept; each write trims older ones (never the active one)."""
    max_body_bytes: int = MAX_BODY_BYTES
    """Larger request bodies get 413, unread."""
    token_file: Path | None = None
    """Where the first start on a store without tokens writes its admin token (mode 0600);
    None: no bootstrap (tests create their tokens)."""

    def __post_init__(self) -> None:
        if self.controller_max_age_s <= 0:
            raise ValueError("controller_max_age_s must be positive")
        if not 0 < self.default_wait_timeout_s <= self.max_wait_timeout_s:
            raise ValueError("need 0 < default_wait_timeout_s <= max_wait_timeout_s")
        if self.poll_interval_s <= 0:
            raise ValueError("poll_interval_s must be positive")
        if self.max_body_bytes < 1024:
            raise ValueError(f"max_body_bytes must be at least 1024, got {self.max_body_bytes}")
        if self.history_limit < 1:
            raise ValueError(
                f"history_limit must be at least 1 (the active version is always kept),"
                f" got {self.history_limit}"
            )
