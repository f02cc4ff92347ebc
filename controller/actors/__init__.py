"""Actors: mailboxes run on a fixed pool of threads, one timer thread, a fixed blocking pool.

``Runtime`` is the threaded one the controller runs; ``ManualRuntime`` offers
the same API on a fake clock with no threads, for deterministic tests.  Code
that only spawns and tells takes an ``ActorSystem`` so it accepts either.
"""

from controller.actors.manual import Failure, LivelockError, ManualRuntime, PendingTimer
from controller.actors.runtime import (
    Actor,
    ActorStats,
    ActorSystem,
    Cancel,
    Ref,
    Runtime,
    RuntimeStats,
)

__all__ = [
    "Actor",
    "ActorStats",
    "ActorSystem",
    "Cancel",
    "Failure",
    "LivelockError",
    "ManualRuntime",
    "PendingTimer",
    "Ref",
    "Runtime",
    "RuntimeStats",
]
