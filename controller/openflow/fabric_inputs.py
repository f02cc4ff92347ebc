"""What each switch plans from (``FabricInputs``), as pure functions of the fabric owner's state.

A port is an edge port — where hosts may be, where ARP is flooded — once it
is up, has stayed up for 1.5 LLDP intervals (so a link behind it had two
rounds to show itself), and faces no switch.  Every switch shares the
topology and the pinned paths; only its edge ports are its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from controller.fabric.model import Path, Topology
from controller.fabric.paths import pinned_paths
from controller.fabric.placement import Pin
from controller.flowid import FlowId
from controller.pipeline.desired import FabricInputs

SETTLE_INTERVALS = 1.5
"""How many LLDP intervals a port must stay up before it is an edge port."""

_SETTLE_SLACK = 1e-9
"""Float slack on when a port settles: an event a hair early re-checks, none is skipped."""


def settle_s(lldp_interval: float) -> float:
    return SETTLE_INTERVALS * lldp_interval


def edge_ports(
    up_since: Mapping[int, float], fabric: Iterable[int], now: float, settle: float
) -> frozenset[int]:
    """Ports up since ``settle`` ago or longer, and not among ``fabric`` (facing a switch)."""
    facing = frozenset(fabric)
    return frozenset(
        number
        for number, since in up_since.items()
        if now - since >= settle and number not in facing
    )


def next_settle(up_since: Iterable[Mapping[int, float]], now: float, settle: float) -> float:
    """When the next port not settled yet will be (``inf``: none is waiting)."""
    waiting = [
        since + settle - _SETTLE_SLACK
        for ports in up_since
        for since in ports.values()
        if now - since < settle
    ]
    return min(waiting, default=math.inf)


def fabric_ports_by_switch(topology: Topology) -> dict[int, frozenset[int]]:
    """``topology.fabric_ports`` of every switch at once (one pass over the links)."""
    found: dict[int, set[int]] = {}
    for link in topology.links:
        for end in (link.src, link.dst):
            found.setdefault(end.dpid, set()).add(end.port)
    return {dpid: frozenset(ports) for dpid, ports in found.items()}


def switch_inputs(
    topology: Topology,
    up_since: Mapping[int, Mapping[int, float]],
    pins: Mapping[FlowId, Pin],
    now: float,
    settle: float,
) -> dict[int, FabricInputs]:
    """The inputs of every switch in ``up_since`` (by dpid: when each port came up)."""
    pinned: Mapping[FlowId, Path] = MappingProxyType(
        pinned_paths(topology, {flow: pin.path for flow, pin in pins.items()})
    )
    fabric = fabric_ports_by_switch(topology)
    return {
        dpid: FabricInputs(
            topology, edge_ports(ports, fabric.get(dpid, frozenset()), now, settle), pinned
        )
        for dpid, ports in sorted(up_since.items())
    }


def changed_switches(
    before: Mapping[int, FabricInputs], after: Mapping[int, FabricInputs]
) -> frozenset[int]:
    """Switches of ``after`` whose inputs differ from ``before``'s (new ones included).

    Every switch's inputs share one topology and one set of pins, so those are compared
    once, not once per switch: a topology change at 100 switches is one comparison.
    """
    old = next(iter(before.values()), None)
    new = next(iter(after.values()), None)
    shared_same = (
        old is not None
        and new is not None
        and (old.topology is new.topology or old.topology == new.topology)
        and old.pinned == new.pinned
    )
    return frozenset(
        dpid
        for dpid, inputs in after.items()
        if (previous := before.get(dpid)) is None
        or not shared_same
        or previous.edge_ports != inputs.edge_ports
    )
