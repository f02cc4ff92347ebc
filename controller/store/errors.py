"""Store failures that callers must tell apart: Redis gone versus a lost race."""

from __future__ import annotations


class StoreUnavailableError(RuntimeError):
    """Redis cannot be reached; nothing was read or written."""


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
