"""What several controller instances share of the fabric, as values: pins and hosts.

With several controllers every instance learns the whole topology itself, but what
it learns alone is not enough to plan a switch it takes over (see
``controller.openflow.fabric_owner``):

- only the master of a flow's source switch sees its counters, so each instance
  publishes the pins of the switches it masters, and plans every switch with every
  instance's pins; a new master starts from its predecessor's (a takeover re-places
  nothing);
- a host is learned from its packet-ins, and a host whose routes are installed sends
  none, so the master of each switch publishes the hosts at it and every instance adds
  those it does not know.

The records cross process boundaries through Redis (``controller.mastership.pins``,
``hosts``), so their times are Unix time: another process's monotonic clock means
nothing here.  Everything in this module is pure: the owner passes in its topology,
what it follows, its pins and its times (``now`` on its monotonic clock, ``wall`` the
Unix time read with it), and keeps the results.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from controller.fabric.model import Host, Path, PortRef, Topology
from controller.fabric.placement import Pin
from controller.flowid import FlowId


@dataclass(frozen=True)
class SharedPin:
    """A pinned elephant as another instance published it (``controller.mastership.pins``):
    times are Unix time, since another process's monotonic clock means nothing here."""

    flow: FlowId
    path: Path
    since_wall: float
    quiet_since_wall: float | None = None


@dataclass(frozen=True)
class SharedHost:
    """A host as the master of its switch published it (``controller.mastership.hosts``)."""

    mac: int
    port: int
    ipv4: int | None = None


@dataclass(frozen=True)
class FabricOffer:
    """What the owner offers the other instances (``FabricOwner``'s ``share``), replaced
    whole when it changes: the pins and hosts of every switch this instance masters, and
    the switches it is ready to master without losing anything (it has followed them for
    one link timeout and read the shared hosts): a rebalance hands it only those."""

    pins: SharedPins
    hosts: SharedHosts
    ready: frozenset[int]


SharedPins = Mapping[int, tuple[SharedPin, ...]]
"""Published pins by the source switch of their flows (the switch its master places)."""

SharedHosts = Mapping[int, tuple[SharedHost, ...]]
"""Published hosts by the switch they were learned at."""


# ---- hosts ------------------------------------------------------------------------------


def attached_records(
    hosts: SharedHosts, attached: frozenset[int] | None
) -> dict[int, tuple[SharedHost, ...]]:
    """The host records of switches some live instance is connected to (``attached``; None:
    not known, every record counts).  A record outlives its switch (nobody masters a switch
    nobody is connected to, so nobody empties it): only switches some instance is
    connected to count."""
    return {dpid: found for dpid, found in hosts.items() if attached is None or dpid in attached}


def merge_shared_hosts(
    topology: Topology, followed: Mapping[int, frozenset[int]], shared: SharedHosts
) -> Topology:
    """``topology`` with the hosts the masters of the switches published adopted.

    ``followed``: the switches this instance is connected to (it sees their ports and
    packet-ins), each with its ports that are up.

    At a switch followed here, only hosts this instance does not know are added, and only
    at an up port facing no switch: a record may be a renewal older than a port status
    seen here (the port went down since, or turned out to face a switch).  A host known
    here keeps this instance's view (learned here: it stands), except that the record may
    give the address of a host known at the same port without one.  An address another MAC
    owns at a followed switch is not taken from it: that owner was learned here, where
    its packet-ins arrive.

    At a switch not followed here, its master's record is all there is: hosts it no longer
    lists go, and hosts it lists replace what was known of them, unless known the same, or
    learned here at a switch this instance follows (its own view stands)."""
    for dpid, hosts in sorted(shared.items()):
        up = followed.get(dpid)
        if up is None:
            listed = {host.mac for host in hosts}
            for gone in topology.hosts_at(dpid):
                if gone.mac not in listed:
                    topology = topology.without_host(gone.mac)
        fabric = topology.fabric_ports(dpid)
        for host in hosts:
            at = PortRef(dpid, host.port)
            known = topology.host(host.mac)
            if up is not None:
                if host.port not in up or host.port in fabric:
                    continue
                if known is not None:
                    if known.at == at and known.ipv4 is None and host.ipv4 is not None:
                        topology = topology.with_host(Host(host.mac, at, host.ipv4))
                    continue  # learned here: this instance's own view stands
            elif known is not None and (
                (known.at == at and known.ipv4 == host.ipv4) or known.at.dpid in followed
            ):
                continue  # the same, or learned here at a switch this instance follows
            if host.ipv4 is not None:
                owner = topology.host_by_ip(host.ipv4)
                if owner is not None and owner.mac != host.mac and up is not None:
                    continue
            topology = topology.with_host(Host(host.mac, at, host.ipv4))
    return topology


def offered_hosts(topology: Topology, mastered: Iterable[int]) -> dict[int, tuple[SharedHost, ...]]:
    """The hosts at each switch this instance masters, as it publishes them: every mastered
    switch has a record, empty when no host is at it (an empty record empties what its
    previous master published)."""
    found: dict[int, list[SharedHost]] = {dpid: [] for dpid in sorted(mastered)}
    for host in topology.hosts:
        if host.at.dpid in found:
            found[host.at.dpid].append(SharedHost(host.mac, host.at.port, host.ipv4))
    return {dpid: tuple(at) for dpid, at in found.items()}


# ---- pins -------------------------------------------------------------------------------


def local_pins(shared: SharedPins, now: float, wall: float) -> dict[int, dict[FlowId, Pin]]:
    """The published pins on this instance's monotonic clock, by source switch: ``wall`` is
    the Unix time read at ``now``, so a pin placed ``wall - since_wall`` seconds ago was
    placed at ``now`` minus that here (hold and release times keep running across a
    takeover, and a pin's time does not jump with NTP once converted)."""

    def here(at: float | None) -> float | None:
        return None if at is None else now - (wall - at)

    return {
        source: {
            pin.flow: Pin(pin.path, now - (wall - pin.since_wall), here(pin.quiet_since_wall))
            for pin in pins
        }
        for source, pins in shared.items()
    }


def inherited_pins(
    shared: Mapping[int, Mapping[FlowId, Pin]],
    taken: Iterable[int],
    placed: Collection[FlowId],
) -> dict[FlowId, Pin]:
    """The pins a switch's previous master published, for the switches just ``taken`` (this
    instance has published none for them since): a takeover starts from them and re-places
    nothing.  A flow this instance already ``placed`` keeps its own pin."""
    inherited: dict[FlowId, Pin] = {}
    for source in sorted(taken):
        for flow, pin in shared.get(source, {}).items():
            if flow not in placed:
                inherited[flow] = pin
    return inherited


def pin_paths(shared: Mapping[int, Mapping[FlowId, Pin]]) -> dict[int, dict[FlowId, Path]]:
    """The switches, flows and paths of pins by source switch, without their times: what
    the switches plan from (a pin's times change nothing installed)."""
    return {
        source: {flow: pin.path for flow, pin in pins.items()} for source, pins in shared.items()
    }


def offered_pins(
    mastered: Iterable[int], placing: Mapping[FlowId, Pin], wall_at: Callable[[float], float]
) -> dict[int, tuple[SharedPin, ...]]:
    """The pins this instance publishes, by source switch, sorted by flow: every switch it
    masters has a record (none: the switch's record is emptied), holding the pins placement
    starts from there (its own and those taken over).  ``wall_at`` turns a time on this
    instance's monotonic clock into Unix time, which is all another process can read."""
    mine: dict[int, list[SharedPin]] = {source: [] for source in mastered}
    for flow, pin in placing.items():
        mine.setdefault(pin.path[0][0], []).append(
            SharedPin(
                flow,
                pin.path,
                wall_at(pin.since),
                None if pin.quiet_since is None else wall_at(pin.quiet_since),
            )
        )
    return {source: tuple(sorted(pins, key=lambda p: p.flow)) for source, pins in mine.items()}


def same_paths(before: SharedPins, after: SharedPins) -> bool:
    """The same switches with the same flows on the same paths (times move every round)."""

    def key(offer: SharedPins) -> dict[int, list[tuple[FlowId, Path]]]:
        return {source: [(p.flow, p.path) for p in pins] for source, pins in offer.items()}

    return key(before) == key(after)


# ---- the offer --------------------------------------------------------------------------


def build_offer(
    topology: Topology,
    mastered: frozenset[int],
    placing: Mapping[FlowId, Pin],
    ready: frozenset[int],
    wall_at: Callable[[float], float],
) -> FabricOffer:
    """What this instance offers the others: the pins and hosts of every switch it masters
    and the switches it is ready to master (see ``FabricOffer``)."""
    return FabricOffer(
        MappingProxyType(offered_pins(mastered, placing, wall_at)),
        MappingProxyType(offered_hosts(topology, mastered)),
        ready,
    )


def offer_changed(before: FabricOffer | None, after: FabricOffer) -> bool:
    """Whether ``after`` is news to the others: pin times move every round, so an offer
    whose switches, flows, paths, hosts and ready switches are those of ``before`` is not
    published again."""
    return not (
        before is not None
        and same_paths(before.pins, after.pins)
        and before.hosts == after.hosts
        and before.ready == after.ready
    )
