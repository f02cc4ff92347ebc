"""What an API process needs to know: where Redis is, how long it may wait for switches,
and how much policy history it keeps."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from prometheus_client import CollectorRegistry

from controller.store.liveness import CONTROLLER_MAX_AGE_S
from controller.store.policies import HISTORY_LIMIT
from controller.store.url import parse_store_url

MAX_BODY_BYTES: Final = 8 * 1024 * 1024
"""8 MiB: the largest valid policy (4096 rules, MAX_POLICY_ENTRIES) is well below it."""
BODY_TIMEOUT_S: Final = 30.0
"""A request's whole body must arrive within this (408 otherwise): 8 MiB at 2 Mbit/s."""
HEAD_TIMEOUT_S: Final = 10.0
"""A connection's request head (request line and headers) must arrive within this."""
AUTH_FAILURE_BURST: Final = 10
"""Failed authentications a client address may make at once (a mistyped token, a script
retrying with a revoked one) before it is slowed down (429)."""
AUTH_FAILURE_RATE: Final = 1.0
"""Failed authentications a second a client address may make once its burst is spent."""


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
    body_timeout_s: float = BODY_TIMEOUT_S
    """Seconds a request may take to send its whole body (408 after that)."""
    auth_failure_burst: int = AUTH_FAILURE_BURST
    """Failed authentications per client address before 429 (controller/api/limits.py)."""
    auth_failure_rate: float = AUTH_FAILURE_RATE
    """Failed authentications a second per client address, once the burst is spent."""
    token_file: Path | None = None
    """Where the first start on a store without tokens writes its admin token (mode 0600);
    None: no bootstrap (tests create their tokens)."""
    bootstrap_token_ttl_s: float | None = None
    """The first admin token expires this many seconds after it is made (None: never)."""

    def __post_init__(self) -> None:
        parse_store_url(self.redis_url)  # StoreUrlError (a ValueError) names what is wrong
        if self.controller_max_age_s <= 0:
            raise ValueError("controller_max_age_s must be positive")
        if not 0 < self.default_wait_timeout_s <= self.max_wait_timeout_s:
            raise ValueError("need 0 < default_wait_timeout_s <= max_wait_timeout_s")
        if self.poll_interval_s <= 0:
            raise ValueError("poll_interval_s must be positive")
        if self.max_body_bytes < 1024:
            raise ValueError(f"max_body_bytes must be at least 1024, got {self.max_body_bytes}")
        if self.body_timeout_s <= 0:
            raise ValueError(f"body_timeout_s must be positive, got {self.body_timeout_s}")
        if self.auth_failure_burst < 1 or self.auth_failure_rate <= 0:
            raise ValueError(
                "auth_failure_burst must be at least 1 and auth_failure_rate positive,"
                f" got {self.auth_failure_burst} and {self.auth_failure_rate}"
            )
        if self.history_limit < 1:
            raise ValueError(
                f"history_limit must be at least 1 (the active version is always kept),"
                f" got {self.history_limit}"
            )
