"""The mastership actor: each served switch's actor is told its role, once per change.

The lease keeper (``controller.mastership.keeper``) publishes the roles of this
instance's switches every renewal; the registry says when the set of served
connections changed; switch actors say when their switch refused them as master.
This actor alone remembers what each switch actor was told, so a role reaches
the actor serving the switch now (a reconnection gets it again) and a renewal
that changes nothing tells nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from controller.mastership.changes import Change
from controller.mastership.decide import Reading, Role
from controller.mastership.hosts import HostStore
from controller.mastership.pins import PinStore
from controller.openflow.fabric_events import FabricOffer, FabricShared
from controller.store.errors import StoreUnavailableError
from controller.switch.events import RoleChanged

LOG = logging.getLogger("flowlane.controller")


class ServedSwitch(Protocol):
    """What this actor needs of the registry's ``Served`` record."""

    @property
    def ref(self) -> Any: ...


@dataclass(frozen=True)
class Assigned:
    """The roles of one renewal (from the keeper, on the heartbeat thread)."""

    roles: Mapping[int, Role]


@dataclass(frozen=True)
class ServedChanged:
    """The registry replaced its ``served`` mapping."""


@dataclass(frozen=True)
class Refused:
    """A switch refused this instance as master (a switch actor's ``SteppedDown``)."""

    dpid: int


MastershipEvent = Assigned | ServedChanged | Refused


class Mastership:
    """Runs as one actor."""

    def __init__(
        self,
        served: Callable[[], Mapping[int, ServedSwitch]],
        wake: Callable[[], None],
        refused: Callable[[int], None],
    ) -> None:
        self._served = served
        self._wake = wake
        self._refused = refused
        self._roles: dict[int, Role] = {}
        self._told: dict[int, tuple[object, Role]] = {}
        self.masters: frozenset[int] = frozenset()
        """Switches this instance was assigned as master (read by other threads: the
        fabric's packet-outs go only through them; replaced whole, never mutated)."""

    def receive(self, event: MastershipEvent) -> None:
        if isinstance(event, Assigned):
            self._roles = dict(event.roles)
            self.masters = frozenset(d for d, r in self._roles.items() if r.name == "master")
        elif isinstance(event, Refused):
            self._told.pop(event.dpid, None)  # its next role is told even if unchanged
            self._refused(event.dpid)
            return
        served = self._served()
        unknown = False
        for dpid, record in served.items():
            role = self._roles.get(dpid)
            if role is None:
                unknown = True  # a new switch: renew now rather than at the next beat
                continue
            ref = record.ref
            told = self._told.get(dpid)
            if told is None or told[0] is not ref or told[1] != role:
                ref.tell(RoleChanged(role.name, role.generation))
                self._told[dpid] = (ref, role)
        for dpid in [d for d in self._told if d not in served]:
            del self._told[dpid]
        if unknown and isinstance(event, ServedChanged):
            self._wake()


class FabricExchange:
    """What the fabric owner shares with the other instances, to and from Redis.

    A keeper observer: after every renewal (on the heartbeat thread, which may block on
    Redis) it writes the pins and hosts the fabric owner offered for the switches this
    instance masters (fenced by their generations: ``controller.mastership.pins``,
    ``hosts``), reads every instance's, and tells the owner (``FabricShared``) which
    switches it masters now, what every instance published and which switches some live
    instance is connected to.  A takeover's round is followed at once by its exchange,
    so the new master starts from its predecessor's pins and hosts.  ``offer`` is the
    owner's ``share`` (its own thread); ``ready`` is what the keeper renews the lease
    with (the heartbeat thread).
    """

    def __init__(
        self,
        pins: PinStore,
        hosts: HostStore,
        tell: Callable[[FabricShared], None],
        reading: Callable[[], Reading | None] = lambda: None,
    ) -> None:
        """``reading``: the keeper's last reading (``LeaseKeeper.reading``)."""
        self._pins = pins
        self._hosts = hosts
        self._tell = tell
        self._reading = reading
        self._offered: FabricOffer | None = None
        self._written: tuple[FabricOffer, frozenset[tuple[int, int]]] | None = None

    def offer(self, offer: FabricOffer) -> None:
        """The owner's offer (immutable, replaced whole)."""
        self._offered = offer

    def ready(self) -> frozenset[int]:
        """The switches the owner is ready to master (none before its first offer)."""
        offered = self._offered
        return offered.ready if offered is not None else frozenset()

    def changed(self, changes: Sequence[Change]) -> None:
        """Nothing: ``published`` follows in the same round."""

    def published(self, roles: Mapping[int, Role]) -> None:
        mastered = {dpid: role.generation for dpid, role in roles.items() if role.name == "master"}
        offered = self._offered
        ours = frozenset(mastered.items())
        try:
            if offered is not None and self._written != (offered, ours):
                # Again after a take too: the record of a switch taken carries the new
                # generation, and one written before the take was fenced out.
                self._pins.write(
                    {d: (mastered[d], pins) for d, pins in offered.pins.items() if d in mastered}
                )
                self._hosts.write(
                    {d: (mastered[d], h) for d, h in offered.hosts.items() if d in mastered}
                )
                self._written = (offered, ours)
            pins = self._pins.read()
            hosts = self._hosts.read()
        except StoreUnavailableError as exc:
            LOG.debug("fabric not exchanged: %s", exc)  # the keeper says Redis is down
            return
        reading = self._reading()
        attached = (
            None
            if reading is None
            else frozenset(d for switches in reading.instances.values() for d in switches)
        )
        self._tell(FabricShared(frozenset(mastered), pins, hosts=hosts, attached=attached))
