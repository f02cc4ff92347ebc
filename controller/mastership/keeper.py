"""One instance's lease, renewed each beat, and the roles it gives this instance's switches.

``LeaseKeeper.round`` is one renewal: renew the lease (with the switches this
instance is connected to), read the others', ``decide``, release and take
switches, and publish the role of every connected switch.  It blocks on Redis,
so it runs on the Redis link's heartbeat thread (one thread whatever the number
of switches), every beat and at once when asked (``wake``: a new switch, a step-down).

Redis unreachable: the roles stay as they are.  A master goes on writing (the
switch fences it if another instance takes over meanwhile); a switch that
connects meanwhile waits for Redis to be told its role.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Callable, Mapping, Sequence, Set
from typing import Protocol

from controller.mastership.changes import Change
from controller.mastership.decide import Decision, Role, decide
from controller.mastership.leases import Leases
from controller.store.errors import StoreUnavailableError

LOG = logging.getLogger("flowlane.controller")

Publish = Callable[[Mapping[int, Role]], None]


class KeeperObserver(Protocol):
    """Told on the thread running ``round`` (``controller.mastership.changes``)."""

    def changed(self, changes: Sequence[Change]) -> None: ...

    def published(self, roles: Mapping[int, Role]) -> None: ...


class LeaseKeeper:
    """Runs ``round`` on one thread at a time (the heartbeat thread); ``stepped_down`` and
    ``wake`` may be called from any thread."""

    def __init__(
        self,
        leases: Leases,
        connected: Callable[[], Set[int]],
        publish: Publish,
        wake: Callable[[], None] = lambda: None,
    ) -> None:
        self.leases = leases
        self._connected = connected
        self._publish = publish
        self._wake = wake
        self._refused: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._registered = False
        self._reachable = True
        self._conflict = False
        self.roles: Mapping[int, Role] = {}
        """The roles last published (read by tests and logs)."""
        self._observers: list[KeeperObserver] = []
        self._changes: list[Change] = []
        self._down_told: set[int] = set()
        """Refused switches whose step-down is told already, until a round succeeds."""
        """What the round under way did, told to the observers at its end."""

    @property
    def instance_id(self) -> str:
        return self.leases.instance_id

    def stepped_down(self, dpid: int) -> None:
        """A switch refused this instance as master: take it again with a new generation
        if it is still ours, at the next round (which this wakes)."""
        self._refused.put(dpid)
        self._wake()

    def wake(self) -> None:
        self._wake()

    def watch(self, observer: KeeperObserver) -> None:
        """Tell ``observer`` what each round did and the roles it published (events,
        metrics); before the first round."""
        self._observers.append(observer)

    def set_wake(self, wake: Callable[[], None]) -> None:
        """What makes the thread running ``round`` run one now (the Redis link's beat)."""
        self._wake = wake

    def round(self) -> Mapping[int, Role] | None:
        """One renewal; the roles published, or None when Redis did not answer."""
        fresh: set[int] = set()
        while not self._refused.empty():
            fresh.add(self._refused.get_nowait())
        for dpid in sorted(fresh - self._down_told):
            told = self.roles.get(dpid)
            if told is not None and told.name == "master":
                self._down_told.add(dpid)  # once, though Redis may fail this round
                self._changes.append(
                    Change(
                        "stepped-down", dpid, self.instance_id, told.generation, reason="refused"
                    )
                )
        try:
            roles = self._round(frozenset(self._connected()), fresh)
        except StoreUnavailableError as exc:
            for dpid in fresh:
                self._refused.put(dpid)  # still to be taken again once Redis answers
            if self._reachable:
                LOG.warning("mastership: %s; switches keep their roles meanwhile", exc)
            self._reachable = False
            self._tell_observers(None)  # what was done before Redis failed is still news
            return None
        if not self._reachable:
            LOG.info("mastership: Redis answers again")
        self._reachable = True
        self._lost(roles)
        self._down_told.clear()
        self.roles = roles
        self._publish(roles)
        self._tell_observers(roles)
        return roles

    def _lost(self, roles: Mapping[int, Role]) -> None:
        """Switches still connected that this round made slave without a hand-over: the
        lease was lost (paused past its TTL) or another process holds this instance id."""
        told = {c.dpid for c in self._changes if c.op == "released"} | self._down_told
        for dpid, before in sorted(self.roles.items()):
            now = roles.get(dpid)
            lost = before.name == "master" and now is not None and now.name != "master"
            if lost and dpid not in told:
                reason = "conflict" if self._conflict else "lease lost"
                self._changes.append(
                    Change("stepped-down", dpid, self.instance_id, before.generation, reason=reason)
                )

    def _tell_observers(self, roles: Mapping[int, Role] | None) -> None:
        changes, self._changes = self._changes, []
        for observer in self._observers:
            try:
                observer.changed(changes)
                if roles is not None:
                    observer.published(roles)
            except Exception:
                LOG.exception("mastership: observer %r failed", observer)

    def _round(self, connected: frozenset[int], fresh: set[int]) -> dict[int, Role]:
        leases = self.leases
        renewal = leases.renew(connected)
        me = self.instance_id
        if renewal.status == "conflict":
            if not self._conflict:
                LOG.error(
                    "mastership: another process holds the lease of instance id %s; this one"
                    " is slave of every switch until that lease expires (two controllers"
                    " started with one --instance-id?)",
                    me,
                )
            self._conflict = True
            generations = renewal.reading.generations
            return {dpid: Role("slave", generations.get(dpid, 0)) for dpid in connected}
        self._conflict = False
        reading = renewal.reading
        if renewal.status == "registered":
            if self._registered:
                # Paused or cut off past the TTL: others may hold our switches now. What we
                # still own is taken again with a new generation; the rest goes.
                LOG.warning(
                    "mastership: the lease of instance %s had expired; registered again", me
                )
                fresh |= {dpid for dpid, owner in reading.owners.items() if owner.instance == me}
            else:
                LOG.info(
                    "mastership: instance %s registered (lease %.1f s); %d live instance(s)",
                    me,
                    leases.ttl_s,
                    len(reading.instances),
                )
            self._registered = True
        decision = decide(me, reading, fresh)
        for dpid in sorted(decision.release):
            if leases.release(dpid):
                owner = reading.owners.get(dpid)
                generation = owner.generation if owner is not None else 0
                self._changes.append(
                    Change("released", dpid, me, generation, other=decision.assignment.get(dpid))
                )
            LOG.info("mastership: switch %016x handed over to %s", dpid, _to(decision, dpid))
        roles = dict(decision.roles)
        for dpid in sorted(decision.take):
            taken = leases.take(dpid)
            if taken.generation is not None:
                roles[dpid] = Role("master", taken.generation)
                self._changes.append(
                    Change("took", dpid, me, taken.generation, other=taken.previous)
                )
                LOG.info(
                    "mastership: instance %s takes switch %016x (generation %d)",
                    me,
                    dpid,
                    taken.generation,
                )
            else:
                LOG.info("mastership: switch %016x not taken: %s", dpid, taken.why)
                roles[dpid] = Role("slave", leases.generation(dpid))
        return roles

    def resign(self) -> None:
        """A clean stop: end the lease and release every switch now."""
        try:
            self.leases.resign()
        except StoreUnavailableError as exc:
            LOG.warning("mastership: lease not ended (%s); it expires by itself", exc)


def _to(decision: Decision, dpid: int) -> str:
    return decision.assignment.get(dpid, "nobody")
