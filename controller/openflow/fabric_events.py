"""What reaches the fabric's owner (``fabric_owner.FabricOwner``): one immutable event each.

Everything the fabric learns arrives as one of these, told to the owner's
mailbox by whoever saw it: a switch's actor (its ports, the flows it counted,
its ports' transmit rates, that it is gone), the hub (a packet-in), the
policy holder (a new policy) and the owner itself (its timer ticks).  Each
carries the time it happened at (``now``, on the monotonic clock), so the
owner never reads a clock to decide anything and tests drive time directly.

As with the switch actors' events, a sender may leave ``now`` unset
(``UNSTAMPED``): an owner given a clock stamps it when it handles the event.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, TypeAlias

from controller.classify.records import ObservedFlow
from controller.fabric.sharing import FabricOffer as FabricOffer
from controller.fabric.sharing import SharedHost as SharedHost
from controller.fabric.sharing import SharedPin as SharedPin
from controller.pipeline.plan import PortState
from controller.policy.jobs import JobSpec
from controller.policy.model import Policy

# ``SharedPin``, ``SharedHost`` and ``FabricOffer`` (re-exported above) live with the pure
# logic that builds and reads them, ``controller.fabric.sharing``.

UNSTAMPED: Final = math.nan
"""``now`` of an event its sender did not stamp (NaN: never equal, never due)."""


@dataclass(frozen=True)
class SwitchPorts:
    """The switch's ports as read from it or updated by a port status (all of them, each
    time): a port missing from ``ports`` was deleted."""

    dpid: int
    ports: tuple[PortState, ...]
    now: float = UNSTAMPED


@dataclass(frozen=True)
class SwitchGone:
    """The connection serving ``dpid`` closed (only the one being served, not a twin).

    With several controllers only this instance's connection went: the switch stays in
    the fabric while another instance is connected to it (``FabricShared.attached``)."""

    dpid: int
    now: float = UNSTAMPED


@dataclass(frozen=True)
class FlowsSeen:
    """The counted flows of one switch with their rates, every detection poll."""

    dpid: int
    flows: tuple[ObservedFlow, ...]
    now: float = UNSTAMPED


@dataclass(frozen=True)
class PortRates:
    """Transmit rate (bit/s) of every port of one switch since its previous poll."""

    dpid: int
    tx_bps: Mapping[int, float]
    now: float = UNSTAMPED

    def __post_init__(self) -> None:
        # Frozen all the way down: the sender cannot change what the owner holds.
        object.__setattr__(self, "tx_bps", MappingProxyType(dict(self.tx_bps)))


@dataclass(frozen=True)
class PolicyChanged:
    """A new active policy: port capacities follow its rates, pins follow its placement."""

    policy: Policy = field(repr=False)


@dataclass(frozen=True)
class JobsChanged:
    """The registered jobs (all of them, each time): a job's elephants are placed together,
    and placed again when a job registers or ends."""

    jobs: tuple[JobSpec, ...] = field(repr=False)
    now: float = UNSTAMPED


@dataclass(frozen=True)
class PacketIn:
    """A frame a switch handed the controller (LLDP, ARP, an unknown source)."""

    dpid: int
    in_port: int
    data: bytes = field(repr=False)
    now: float = UNSTAMPED


@dataclass(frozen=True)
class DiscoveryTick:
    """Time for an LLDP round: probe every up port, expire silent links, publish a snapshot.

    The owner schedules the next one itself; ``now`` is the time it was due."""

    now: float = UNSTAMPED


@dataclass(frozen=True)
class PlacementTick:
    """Time for a placement round (the owner schedules the next one itself)."""

    now: float = UNSTAMPED


@dataclass(frozen=True)
class FabricShared:
    """With several controllers, after every renewal: what this instance masters now and
    what every instance's owner publishes for the switches it masters (read from Redis).

    - ``pins`` by source switch: the master of a flow's source switch places it; every
      instance plans every switch with every instance's pins (a pinned path is the same
      on each of its hops), and a new master starts from its predecessor's (a takeover
      re-places nothing);
    - ``hosts`` by the switch they were learned at: an instance that starts, or whose
      connection to a switch dropped, plans with the hosts the others know (a host that
      is silent is never re-learned from packet-ins);
    - ``attached``: the switches some live instance is connected to (None: not known):
      a switch whose connection to *this* instance dropped is still part of the fabric
      until no instance is connected to it."""

    mastered: frozenset[int]
    pins: Mapping[int, tuple[SharedPin, ...]] = field(default_factory=dict)
    now: float = UNSTAMPED
    hosts: Mapping[int, tuple[SharedHost, ...]] = field(default_factory=dict)
    attached: frozenset[int] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "pins", MappingProxyType(dict(self.pins)))
        object.__setattr__(self, "hosts", MappingProxyType(dict(self.hosts)))


@dataclass(frozen=True)
class MasterConfirmed:
    """The switch confirmed this instance as its master: its LLDP probes go out at once
    (the links out of it were silent since its previous master stopped)."""

    dpid: int
    now: float = UNSTAMPED


@dataclass(frozen=True)
class MasterLeft:
    """This instance is no longer the switch's confirmed master (told another role, or the
    switch refused it): its packet-outs would be refused (``OFPBRC_IS_SLAVE``), so the
    owner sends none there until ``MasterConfirmed`` again."""

    dpid: int
    now: float = UNSTAMPED


FabricMessage: TypeAlias = (
    SwitchPorts
    | SwitchGone
    | FlowsSeen
    | PortRates
    | PolicyChanged
    | JobsChanged
    | PacketIn
    | DiscoveryTick
    | PlacementTick
    | FabricShared
    | MasterConfirmed
    | MasterLeft
)
"""Every event the fabric's owner receives."""
