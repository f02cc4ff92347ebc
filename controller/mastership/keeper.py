"""One instance's lease, renewed each beat, and the roles it gives this instance's switches.

``LeaseKeeper.round`` is one renewal: renew the lease (with the switches this
instance is connected to), read the others', ``decide``, release and take
switches, and publish the role of every connected switch.  It blocks on Redis,
so it runs on the Redis link's heartbeat thread (one thread whatever the number
of switches), every beat and at once when asked (``wake``: a new switch, a step-down).

Between renewals a watch (``start_watch``, its own thread, every
``WATCH_INTERVAL_S``) ends the leases of instances whose process is gone
(``controller.mastership.presence``) and runs a round at once whenever the set of
live instances changed: a killed instance's switches are taken within about one
watch, not after its lease's TTL; a paused one's when its TTL is over.

Redis unreachable: the roles stay as they are.  A master goes on writing (the
switch fences it if another instance takes over meanwhile); a switch that
connects meanwhile waits for Redis to be told its role.  A renewal that comes late
(Redis failed over, or this process stalled) may find its peers' leases run out in
the same outage: for one TTL after it, owners whose lease is missing are presumed live
(``decide.presume_owners_live``), so a failover of the store moves no switch.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence, Set
from typing import Protocol

import redis

from controller.mastership.changes import Change
from controller.mastership.decide import Decision, Reading, Role, decide, presume_owners_live
from controller.mastership.leases import Leases
from controller.mastership.presence import WATCH_INTERVAL_S
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
        ready: Callable[[], Set[int]] | None = None,
    ) -> None:
        """``ready``: the connected switches this instance could master without losing
        anything (the fabric owner's, through ``FabricExchange``); None: all of them."""
        self.leases = leases
        self._connected = connected
        self._ready = ready
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
        self.reading: Reading | None = None
        """What the last round read (replaced whole: observers read it after the round)."""
        self._live: frozenset[str] = frozenset()
        """The live instances the last round read (replaced whole: the watch reads it)."""
        self._unwatched = threading.Event()
        self._watcher: threading.Thread | None = None
        self._clock: Callable[[], float] = time.monotonic
        self._renewed_at: float | None = None
        """When the last successful round began: the lease it renewed holds until a TTL after."""
        self._grace_until = -1.0
        """Until when owners whose lease is missing are presumed live (``presume_owners_live``):
        a TTL after a renewal late enough that a peer's lease could have run out meanwhile."""
        self._beat_s: float | None = None
        """The usual time between two renewals (the last one that was not late)."""
        self._presumed: frozenset[str] = frozenset()
        """Who is presumed live until ``_grace_until``: live at the renewal before the late
        one, missing at it, and not seen gone by the watch."""
        self._ended: frozenset[str] = frozenset()
        """Instances the presence watch saw go (replaced whole: the watch writes it, rounds
        read it); never presumed live, until they register again."""

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

    def start_watch(self, interval_s: float = WATCH_INTERVAL_S) -> None:
        """Watch the other instances' connections every ``interval_s`` on a thread of its
        own (one per process, whatever the number of switches) until ``resign``."""
        if self._watcher is not None:
            return
        self._unwatched.clear()
        self._watcher = threading.Thread(
            target=self._watch_loop, args=(interval_s,), name="mastership-watch", daemon=True
        )
        self._watcher.start()

    def stop_watch(self) -> None:
        watcher, self._watcher = self._watcher, None
        self._unwatched.set()
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join(timeout=1.0)

    def _watch_loop(self, interval_s: float) -> None:
        while not self._unwatched.wait(interval_s):
            try:
                self.watch_once()
            except Exception:
                LOG.exception("mastership: watch failed")

    def watch_once(self) -> bool:
        """One look (``Leases.watch``); wakes a round when the live instances changed since
        the last round.  True when it woke one."""
        try:
            watched = self.leases.watch()
        except StoreUnavailableError:
            return False  # the round says so, and when Redis is back
        except redis.ResponseError as exc:
            # CLIENT LIST refused (an ACL): leases end by their TTL alone, as before.
            LOG.error(
                "mastership: cannot watch the other instances' connections (%s); a killed"
                " instance's switches are taken when its lease expires",
                exc,
            )
            self._unwatched.set()
            return False
        if watched.ended:
            self._ended = self._ended | frozenset(watched.ended)
        for instance in watched.ended:
            LOG.warning(
                "mastership: instance %s has no connection to Redis left (its process is"
                " gone): its lease is ended, its switches are taken now",
                instance,
            )
        if watched.live != self._live:
            self._wake()
            return True
        return False

    def may_write(self, dpid: int) -> bool:
        """Whether this instance may still write what no switch fences: a bridge's queues in
        OVSDB, which a stale master's flow-mods (refused by the switch) do not cover.

        Yes only while the switch is this instance's as of the last round and that round
        began less than a lease TTL ago (a lease renewed then cannot have expired yet). A
        process woken from a pause longer than its TTL answers no at once, before its keeper
        has run again and before its switch actors have heard that they stepped down.
        Called from any thread (the blocking pool, just before the write)."""
        renewed_at = self._renewed_at
        role = self.roles.get(dpid)
        if renewed_at is None or role is None or role.name != "master":
            return False
        return self._clock() - renewed_at < self.leases.ttl_s

    def round(self) -> Mapping[int, Role] | None:
        """One renewal; the roles published, or None when Redis did not answer."""
        began = self._clock()
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
        self._renewed_at = began
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

    def _late(self, gap: float, renewed: float) -> bool:
        """Judge the time since the previous renewal: Redis failed over or was out (redis-py
        may retry inside one call), or this process stalled.  A peer renews about when this
        instance does, up to one beat earlier: once ``gap`` is over a TTL less a beat, its
        lease may have run out in the same outage, not because it died."""
        ttl = self.leases.ttl_s
        beat = self._beat_s if self._beat_s is not None else ttl / 2
        if gap <= ttl - beat:
            self._beat_s = min(gap, ttl / 2)
            return False
        if renewed >= self._grace_until:
            LOG.info(
                "mastership: no renewal for %.1f s; the owners of switches whose lease is"
                " missing are presumed live for %.1f s more",
                gap,
                ttl,
            )
        self._grace_until = renewed + ttl
        return True

    def _round(self, connected: frozenset[int], fresh: set[int]) -> dict[int, Role]:
        leases = self.leases
        ready = None if self._ready is None else frozenset(self._ready())
        renewal = leases.renew(connected, ready)
        renewed = self._clock()
        live_before = self._live
        late = self._renewed_at is not None and self._late(renewed - self._renewed_at, renewed)
        self.reading = renewal.reading
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
        self._live = frozenset(reading.instances)
        self._ended = self._ended - self._live  # registered again (restarted)
        if late:
            self._presumed = live_before - self._live - self._ended
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
        if self._clock() < self._grace_until:
            reading = presume_owners_live(me, reading, self._presumed - self._ended)
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
        self.stop_watch()
        try:
            self.leases.resign()
        except StoreUnavailableError as exc:
            LOG.warning("mastership: lease not ended (%s); it expires by itself", exc)


def _to(decision: Decision, dpid: int) -> str:
    return decision.assignment.get(dpid, "nobody")
