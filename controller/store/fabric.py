"""The fabric snapshot the controller publishes, for the API to read.

Key: ``<prefix>:fabric``, one JSON ``FabricSnapshot``, replaced whole on
every publication.  It has no TTL on purpose: after the controller stops,
operators still want the last topology it saw (what was up when it went
away), and the snapshot's ``updated`` tells any reader how old it is.
"""

from __future__ import annotations

import redis

from controller.fabric.snapshot import FabricSnapshot
from controller.store.client import text, translate_errors


class FabricStore:
    def __init__(self, client: redis.Redis, prefix: str = "flowlane") -> None:
        self._redis = client
        self._key = f"{prefix}:fabric"

    @translate_errors
    def publish(self, snapshot: FabricSnapshot) -> None:
        self._redis.set(self._key, snapshot.model_dump_json())

    @translate_errors
    def read(self) -> FabricSnapshot | None:
        """The last snapshot published; None when no controller published one.

        A document that does not validate (written by an incompatible
        controller version) raises pydantic's ``ValidationError``.
        """
        raw = self._redis.get(self._key)
        if raw is None:
            return None
        return FabricSnapshot.model_validate_json(text(raw))

    @translate_errors
    def clear(self) -> None:
        self._redis.delete(self._key)
