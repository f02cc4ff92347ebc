"""The store's epoch: which Redis dataset this is, so a controller notices one that lost data.

A Redis restarted without its data (no persistence, a lost volume, a restore
from an older snapshot) numbers policy versions from 1 again.  A controller
comparing version numbers alone would take the new "version 1" for news and
move the switches to it without a word, or skip every write until the
numbers caught up.  So every dataset gets an epoch: a random id written once,
with SET NX, by the first process that finds the store without one (the API
and the controllers at start, a controller whenever it finds it gone).  The
controller remembers the epoch and the version it enforces, and ``judge``
decides what the store's answer means.  A store that lost data is flagged,
never followed backwards: the controller keeps enforcing what it has,
publishes a ``RegressionFlag`` (what ``/readyz`` explains), and raises the
store's version sequence so that the operator's next write gets a number
above the one it enforces, which it then adopts.

Keys (``<prefix>`` defaults to ``flowlane``):

- ``<prefix>:epoch``              JSON ``{"id": <32 hex digits>, "created_at": <unix time>}``
- ``<prefix>:store-regressions``  hash: controller id → JSON of its ``RegressionFlag``
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass
from typing import Any, Literal

import redis

from controller.store.client import text, translate_errors

RegressionKind = Literal["gone", "older", "rewritten", "new-epoch"]
"""How the store lost data: no active policy at all; an active version lower than the one
enforced; the enforced number holding another record; a new dataset whose numbers are
not above the one enforced."""


@dataclass(frozen=True, slots=True)
class Epoch:
    id: str
    created_at: float

    def to_json(self) -> str:
        return json.dumps({"id": self.id, "created_at": self.created_at})

    @staticmethod
    def from_json(raw: str) -> Epoch:
        """A record someone else wrote by hand still names a dataset: its text is the id."""
        try:
            data = json.loads(raw)
            return Epoch(str(data["id"]), float(data["created_at"]))
        except (ValueError, KeyError, TypeError):
            return Epoch(raw, 0.0)


@dataclass(frozen=True, slots=True)
class Enforced:
    """The stored version a controller runs, and the epoch of the store it came from.

    The record's ``created_at`` is kept with the number because a restored
    snapshot can hand the same number to another record.
    """

    version: int
    created_at: float
    epoch: str


@dataclass(frozen=True, slots=True)
class StoreView:
    """What the store says now: its epoch, and its active version (``None``: no policy)."""

    epoch: str
    active: int | None
    active_created_at: float | None = None


@dataclass(frozen=True, slots=True)
class Regression:
    """The store holds less than the controller enforces: it lost data."""

    kind: RegressionKind
    enforced: int
    active: int | None

    def describe(self) -> str:
        """The store's side of it, for a log line or a 503."""
        if self.kind == "gone":
            return "the store has no active version"
        if self.kind == "rewritten":
            return (
                f"the store's active version is {self.active}, but another record than the one"
                " it enforces"
            )
        if self.kind == "new-epoch":
            return f"the store's active version is {self.active}, in a new store epoch"
        return f"the store's active version is {self.active}"


Verdict = Literal["keep", "adopt"] | Regression


def judge(enforced: Enforced | None, store: StoreView) -> Verdict:
    """What a controller does with the store's answer, given what it enforces.

    - ``"adopt"``: the active version is news: the controller enforces nothing
      stored (its ``--policy`` file), or the active number is higher than the
      one it enforces, whatever the epoch (a higher number never went back).
    - ``"keep"``: the store still holds exactly what the controller enforces.
    - a ``Regression``: the store lost data; the controller keeps what it has.
    """
    if enforced is None:
        return "keep" if store.active is None else "adopt"
    if store.active is None:
        return Regression("gone", enforced.version, None)
    if store.active > enforced.version:
        return "adopt"
    if store.epoch != enforced.epoch:
        return Regression("new-epoch", enforced.version, store.active)
    if store.active < enforced.version:
        return Regression("older", enforced.version, store.active)
    if store.active_created_at != enforced.created_at:
        return Regression("rewritten", enforced.version, store.active)
    return "keep"


@dataclass(frozen=True, slots=True)
class RegressionFlag:
    """A controller's report that the store lost data; ``/readyz`` answers 503 with it."""

    controller: str
    regression: Regression
    since: float
    """When the controller first found the store so (unix time)."""

    def message(self) -> str:
        enforced = self.regression.enforced
        return (
            f"controller {self.controller} enforces version {enforced};"
            f" {self.regression.describe()}: the store lost data; PUT a policy to recover"
            f" (it gets a version above {enforced})"
        )

    def to_json(self) -> str:
        return json.dumps(
            {
                "controller": self.controller,
                "kind": self.regression.kind,
                "enforced": self.regression.enforced,
                "active": self.regression.active,
                "since": self.since,
            }
        )

    @staticmethod
    def from_json(raw: str) -> RegressionFlag:
        data: dict[str, Any] = json.loads(raw)
        active = data.get("active")
        return RegressionFlag(
            controller=str(data["controller"]),
            regression=Regression(
                data["kind"], int(data["enforced"]), None if active is None else int(active)
            ),
            since=float(data["since"]),
        )


class EpochStore:
    def __init__(self, client: redis.Redis, prefix: str = "flowlane") -> None:
        self._redis = client
        self._epoch = f"{prefix}:epoch"
        self._flags = f"{prefix}:store-regressions"

    @translate_errors
    def ensure(self, now: float | None = None) -> Epoch:
        """The store's epoch, created first if it has none: SET NX, so the first writer wins."""
        fresh = Epoch(secrets.token_hex(16), now if now is not None else time.time())
        pipe = self._redis.pipeline(transaction=True)
        pipe.set(self._epoch, fresh.to_json(), nx=True)
        pipe.get(self._epoch)
        _, raw = pipe.execute()
        return Epoch.from_json(text(raw))

    @translate_errors
    def current(self) -> Epoch | None:
        raw = self._redis.get(self._epoch)
        return Epoch.from_json(text(raw)) if raw is not None else None

    @translate_errors
    def flag(self, flag: RegressionFlag) -> None:
        self._redis.hset(self._flags, flag.controller, flag.to_json())

    @translate_errors
    def clear(self, controller: str) -> None:
        self._redis.hdel(self._flags, controller)

    @translate_errors
    def flags(self) -> list[RegressionFlag]:
        """Every controller's flag, by controller; an unreadable entry is left out."""
        found = []
        for raw in self._redis.hgetall(self._flags).values():
            try:
                found.append(RegressionFlag.from_json(text(raw)))
            except (ValueError, KeyError, TypeError):
                continue
        return sorted(found, key=lambda flag: flag.controller)
