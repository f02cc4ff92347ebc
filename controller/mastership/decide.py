"""One renewal's reading of Redis, turned into what this instance does (pure).

For each switch this instance is connected to: take it (a new generation, fenced by
the lease), keep mastering it with the generation it holds, hand it over (release
the owner record, so the instance it is assigned to can take it), or be its slave
with the switch's newest generation (a slave's role request must not be stale either).

A switch assigned elsewhere whose owner is still live is not taken from it: that
owner releases it at its own next renewal, and only then does the new one take it.
So a rebalance never has two instances writing; only a dead owner's (expired
lease) switches are taken at once, and then the switch itself fences the old
master through the generation id.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field, replace
from typing import Literal

from controller.mastership.assign import assign

RoleName = Literal["master", "slave"]


@dataclass(frozen=True)
class Owner:
    """The owner record of a switch: who took it last, with which generation."""

    instance: str
    generation: int


@dataclass(frozen=True)
class Reading:
    """What a renewal read from Redis, in one script (one moment)."""

    instances: Mapping[str, frozenset[int]]
    """Live instances (lease current) -> the switches each is connected to."""
    owners: Mapping[int, Owner] = field(default_factory=dict)
    generations: Mapping[int, int] = field(default_factory=dict)
    """The generation counter of each switch this instance is connected to (0: never taken)."""
    ready: Mapping[str, frozenset[int]] | None = None
    """Live instance -> the switches it is ready to master (None: every one it is
    connected to); see ``assign``."""


@dataclass(frozen=True)
class Role:
    """What a switch actor is told: be master with this generation, or slave."""

    name: RoleName
    generation: int


@dataclass(frozen=True)
class Decision:
    take: frozenset[int]
    """Switches to take (a fenced new generation); a refused take makes the switch a slave."""
    release: frozenset[int]
    """Owner records of this instance to delete (the switch is assigned elsewhere)."""
    roles: Mapping[int, Role]
    """The role of every other connected switch."""
    assignment: Mapping[int, str]


def presume_owners_live(me: str, reading: Reading, among: Set[str]) -> Reading:
    """``reading`` with the owners in ``among`` whose lease is missing counted live, each
    connected to the switches it owns (those some live instance is connected to).

    ``among`` is who was live at this instance's renewal before the late one, less whom the
    presence watch saw go (``presence``: its connections gone, positive evidence of death):
    a peer already missing then, or known dead, is not presumed back to life, so a run of
    late renewals (a loaded machine, a lease TTL near the renewal interval) never keeps a
    dead peer's switches from being taken.

    For one lease TTL after this instance itself could not renew (Redis failed over, or
    was unreachable, for longer than a TTL; or this process stalled): every lease ran out
    in the same outage, and the others are renewing again on the new primary one by one.
    Read as dead, their switches would go to whoever registers first and come back a
    renewal later: every switch's master changing twice, each new master re-syncing
    from its own view, for an outage of the store that no switch saw.  A peer truly gone
    is taken over one TTL later."""
    instances = dict(reading.instances)
    connected = frozenset().union(*instances.values()) if instances else frozenset()
    absent: dict[str, set[int]] = {}
    for dpid, owner in reading.owners.items():
        missing = owner.instance not in instances and owner.instance in among
        if owner.instance != me and missing and dpid in connected:
            absent.setdefault(owner.instance, set()).add(dpid)
    if not absent:
        return reading
    instances.update({instance: frozenset(owned) for instance, owned in absent.items()})
    return replace(reading, instances=instances)


def decide(me: str, reading: Reading, fresh: Set[int] = frozenset()) -> Decision:
    """What ``me`` does after ``reading``.

    ``fresh``: switches this instance owns but must take again with a new generation
    (its lease was lost and re-registered, or a switch refused its role or a write).
    """
    instances = dict(reading.instances)
    connected = instances.get(me, frozenset())
    current = {dpid: owner.instance for dpid, owner in reading.owners.items()}
    assignment = assign(instances, current, reading.ready)
    take: set[int] = set()
    release: set[int] = set()
    roles: dict[int, Role] = {}
    for dpid in sorted(connected):
        owner = reading.owners.get(dpid)
        slave = Role("slave", reading.generations.get(dpid, 0))
        if assignment.get(dpid) == me:
            if owner is None or owner.instance not in instances:
                take.add(dpid)
            elif owner.instance == me:
                if dpid in fresh:
                    take.add(dpid)
                else:
                    roles[dpid] = Role("master", owner.generation)
            else:
                roles[dpid] = slave  # its live owner hands it over at its next renewal
        else:
            roles[dpid] = slave
            if owner is not None and owner.instance == me:
                release.add(dpid)
    for dpid, owner in reading.owners.items():
        if owner.instance == me and dpid not in connected:
            release.add(dpid)
    return Decision(frozenset(take), frozenset(release), roles, assignment)
