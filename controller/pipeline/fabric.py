"""What one switch holds when the controller owns forwarding (``forwarding: fabric``).

On a leaf-spine fabric OVS's ``NORMAL`` cannot be used: it floods unknown
destinations over every link and the fabric's loops would multiply each
broadcast forever.  Instead the controller, which knows the topology and the
hosts, plans table FORWARD itself:

- known hosts by MAC: their port on their own switch, elsewhere a select
  group over every shortest-path next hop (ECMP, each bucket watching its
  port so the datapath skips a dead link before the controller hears of it);
- placed elephants: exact-match entries pinning them to their path;
- broadcast and multicast: along one loop-free tree;
- anything else (an unknown MAC): to the controller, rate-limited, so it
  learns the host from its first packets.

LLDP and ARP go to the controller from table CLASSIFY: discovery needs the
LLDP frames, and the controller answers ARP from its host table, so ARP never
floods in the data plane.  Classification, marking and counting stay as the
policy plans them; this replaces only the single ``NORMAL`` entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from controller.fabric.model import Path, Topology
from controller.fabric.paths import FabricGraph
from controller.flowid import FlowId
from controller.pipeline import tables
from controller.pipeline.flows import (
    OFPP_CONTROLLER,
    ApplyActions,
    FlowEntry,
    Group,
    Instruction,
    MatchField,
    Meter,
    Output,
    Owner,
    make_match,
)
from controller.pipeline.groups import Bucket, GroupEntry, GroupType, MeterEntry

PUNT_METER_ID = 1
"""The meter every packet-in of the fabric pipeline goes through."""

ETH_TYPE_LLDP = 0x88CC
ETH_TYPE_ARP = 0x0806
MULTICAST_BIT = 0x010000000000
"""The I/G bit of a MAC address: set for broadcast and multicast destinations."""


@dataclass(frozen=True, slots=True)
class FabricPlan:
    """Flows, groups and meters of one switch's fabric forwarding; groups sorted by id."""

    flows: tuple[FlowEntry, ...]
    groups: tuple[GroupEntry, ...]
    meters: tuple[MeterEntry, ...]


def _punt() -> tuple[Instruction, ...]:
    return (Meter(PUNT_METER_ID), ApplyActions((Output(OFPP_CONTROLLER),)))


def _output(*ports: int) -> tuple[Instruction, ...]:
    """Output to ``ports``; no instruction at all (a drop) when there is none."""
    return (ApplyActions(tuple(Output(port) for port in ports)),) if ports else ()


def ecmp_group(ports: tuple[int, ...]) -> GroupEntry:
    """A select group over ``ports``, one bucket per port watching it, in port order.

    Its id comes from its buckets, so every destination with the same next
    hops shares one group, and a re-plan that keeps them keeps the id.
    """
    return GroupEntry(
        GroupType.SELECT,
        tuple(Bucket((Output(port),), watch_port=port) for port in sorted(ports)),
    )


def punt_flows() -> list[FlowEntry]:
    """Table CLASSIFY: LLDP (discovery) and ARP (proxy ARP) to the controller, metered."""
    return [
        FlowEntry(
            tables.CLASSIFY,
            tables.PUNT_PRIORITY,
            make_match(MatchField("eth_type", eth_type)),
            _punt(),
            Owner.DISCOVERY,
        )
        for eth_type in (ETH_TYPE_LLDP, ETH_TYPE_ARP)
    ]


def host_flows(
    topology: Topology, dpid: int, graph: FabricGraph | None = None
) -> tuple[list[FlowEntry], list[GroupEntry]]:
    """Table FORWARD: one entry per reachable host MAC, and the select groups they use."""
    graph = graph or FabricGraph.of(topology)
    hops = {
        dst: graph.next_hops_at(dpid, dst)
        for dst in sorted({host.at.dpid for host in topology.hosts} - {dpid})
    }
    flows: list[FlowEntry] = []
    groups: dict[tuple[int, ...], GroupEntry] = {}
    for host in topology.hosts:
        if host.at.dpid == dpid:
            instructions = _output(host.at.port)
        else:
            ports = hops[host.at.dpid]
            if not ports:
                continue  # unreachable: let the miss entry punt rather than black-hole
            if len(ports) == 1:
                instructions = _output(ports[0])
            else:
                group = groups.setdefault(ports, ecmp_group(ports))
                instructions = (ApplyActions((Group(group.group_id),)),)
        flows.append(
            FlowEntry(
                tables.FORWARD,
                tables.HOST_PRIORITY,
                make_match(MatchField("eth_dst", host.mac)),
                instructions,
                Owner.FORWARDING,
            )
        )
    return flows, sorted(groups.values(), key=lambda group: group.group_id)


def placement_flows(
    topology: Topology,
    dpid: int,
    pinned: Mapping[FlowId, Path],
    graph: FabricGraph | None = None,
) -> list[FlowEntry]:
    """Table FORWARD: placed elephants leave by their path's port at this switch.

    A hop whose port no longer has a usable link is skipped: the flow then
    falls back to the ECMP entry instead of being sent into a dead link while
    placement catches up with the new topology.
    """
    graph = graph or FabricGraph.of(topology)
    usable = {link.src.port for link in graph.out.get(dpid, ())}
    flows: list[FlowEntry] = []
    for flow, path in sorted(pinned.items()):
        port = next((port for hop_dpid, port in path if hop_dpid == dpid), None)
        if port is None or port not in usable:
            continue
        flows.append(
            FlowEntry(
                tables.FORWARD,
                tables.PLACEMENT_PRIORITY,
                make_match(*(MatchField(name, value) for name, value in flow.oxm_fields().items())),
                _output(port),
                Owner.PLACEMENT,
            )
        )
    return flows


def flood_flows(
    topology: Topology,
    dpid: int,
    edge_ports: frozenset[int],
    graph: FabricGraph | None = None,
) -> list[FlowEntry]:
    """Table FORWARD: broadcast and multicast over the edge ports and the flood tree.

    Per in_port, every other flooding port, so a frame never goes back where
    it came from.  A copy arriving on a fabric port off the tree is one a
    loop would repeat: the entry one priority below drops it (without it the
    miss entry would punt every such copy).  A port that ever showed a link
    never floods as an edge port, even when the caller lists it.
    """
    tree = (graph or FabricGraph.of(topology)).flood_tree().get(dpid, frozenset())
    flooding = sorted((edge_ports - topology.fabric_ports(dpid)) | tree)
    multicast = MatchField("eth_dst", MULTICAST_BIT, MULTICAST_BIT)
    flows = [
        FlowEntry(
            tables.FORWARD,
            tables.FLOOD_PRIORITY,
            make_match(MatchField("in_port", in_port), multicast),
            _output(*(port for port in flooding if port != in_port)),
            Owner.FORWARDING,
        )
        for in_port in flooding
    ]
    flows.append(
        FlowEntry(
            tables.FORWARD,
            tables.FLOOD_PRIORITY - 1,
            make_match(multicast),
            (),
            Owner.FORWARDING,
        )
    )
    return flows


def miss_flow() -> FlowEntry:
    """Table FORWARD, lowest priority: unknown unicast to the controller (host learning)."""
    return FlowEntry(
        tables.FORWARD, tables.FORWARD_PRIORITY, make_match(), _punt(), Owner.FORWARDING
    )


def punt_meter(punt_rate_pps: int) -> MeterEntry:
    """The packet-in meter: a burst of a tenth of a second's worth, at least one packet."""
    if punt_rate_pps < 1:
        raise ValueError(f"punt rate must be at least 1 packet/s, not {punt_rate_pps}")
    return MeterEntry(PUNT_METER_ID, punt_rate_pps, burst=max(1, punt_rate_pps // 10))


def fabric_plan(
    topology: Topology,
    dpid: int,
    edge_ports: frozenset[int],
    pinned: Mapping[FlowId, Path],
    punt_rate_pps: int = 1000,
) -> FabricPlan:
    """Everything switch ``dpid`` needs for fabric forwarding, besides the policy's tables.

    ``edge_ports`` are its ports facing hosts (where broadcast is delivered);
    ``pinned`` maps placed elephants to their paths.  Pure and deterministic:
    the same topology gives the same entries, cookies and group ids, so a
    re-plan that changes nothing sends nothing.
    """
    meter = punt_meter(punt_rate_pps)
    graph = FabricGraph.of(topology)
    hosts, groups = host_flows(topology, dpid, graph)
    flows = (
        *punt_flows(),
        *placement_flows(topology, dpid, pinned, graph),
        *hosts,
        *flood_flows(topology, dpid, edge_ports, graph),
        miss_flow(),
    )
    return FabricPlan(flows, tuple(groups), (meter,))
