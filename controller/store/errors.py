"""Store failures that callers must tell apart: Redis gone versus a lost race."""

from __future__ import annotations


class StoreUnavailableError(RuntimeError):
    """Redis cannot be reached; nothing was read or written."""


class NotReplicatedError(StoreUnavailableError):
    """A write the primary took, but fewer replicas than the store URL's ``min_replicas``
    confirmed it within ``wait_ms``: it may exist on the primary only, and a failover now
    would lose it.  Never acknowledged as a success (the API answers 503)."""

    def __init__(self, replicas: int, required: int, wait_ms: int) -> None:
        self.replicas = replicas
        self.required = required
        self.wait_ms = wait_ms
        super().__init__(
            f"Redis unavailable: the write reached the primary, but {replicas} of the"
            f" {required} replica(s) required confirmed it within {wait_ms} ms; it may exist"
            " on the primary only and be lost if the primary fails now: read the state back"
            " before writing again"
        )


class VersionConflictError(RuntimeError):
    """A write named a version that is no longer the active one (someone else wrote first)."""

    def __init__(self, expected: int | None, active: int | None) -> None:
        self.expected = expected
        self.active = active
        super().__init__(f"policy version conflict: expected {expected}, active is {active}")


class UnknownVersionError(LookupError):
    def __init__(self, version: int) -> None:
        self.version = version
        super().__init__(f"no policy version {version}")
