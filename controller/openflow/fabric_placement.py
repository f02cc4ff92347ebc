"""The fabric owner's placement round, as pure functions of what the owner holds.

Which counted flows are elephants worth placing (``elephants``), and what a
placement result means for operators (``placement_events``).  The decision
itself is ``controller.fabric.placement.place``; nothing here reads a clock
or holds state, so the owner calls these within one event and tests call
them directly.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence

from controller.classify.records import ObservedFlow
from controller.fabric.demand import FlowDemandInput, estimate_demands
from controller.fabric.model import PortRef, Topology
from controller.fabric.placement import Elephant, Pin, Placement
from controller.fabric.snapshot import (
    FabricEvent,
    PinnedView,
    path_view,
    pinned_view,
    placement_event,
    reroute_event,
)
from controller.flowid import ETH_TYPE_IPV4, IP_PROTO_TCP, FlowId
from controller.policy.model import Policy

LOG = logging.getLogger("flowlane.fabric")

ACK_STREAM_BYTES = 200
"""Average packet size below which a flow is an ACK stream: data fills packets (~1500 B)."""

PinInfo = tuple[str, float, float]
"""(class, rate, demand) of a pinned flow as last seen, for views and its release event."""

NO_INFO: PinInfo = ("", 0.0, 0.0)


def elephants(
    policy: Policy,
    topology: Topology,
    observed: Mapping[int, Sequence[ObservedFlow]],
    pinned: Collection[FlowId],
    jobs: Collection[str] = (),
) -> list[tuple[Elephant, str]]:
    """Flows of the placement classes that are big enough, seen at their source switch.

    A flow the classifier put in a registered job (``why`` is ``job:<name>``, from the job's
    entry that counted it) carries the job's name, so its job's flows are placed together;
    a job no longer in ``jobs`` (it ended since the switch counted) is no job."""
    spec = policy.forwarding.placement
    classes = policy.forwarding.placement_classes(policy.detection)
    if spec is None or not classes:
        return []
    found: dict[FlowId, tuple[ObservedFlow, int, int]] = {}
    for dpid, flows in observed.items():
        for flow in flows:
            if flow.traffic_class not in classes or flow.flow.eth_type != ETH_TYPE_IPV4:
                continue
            # A pinned flow stays a candidate at any rate: OVS refreshes counters in
            # steps, so one poll can read no growth, and unpinning on it would move the
            # flow back to the hash and back again.  Placement releases it once it has
            # been quiet for release_after (it ended, though its entry may linger).
            if flow.flow not in pinned and flow.rate_bps < spec.min_rate.bps:
                continue
            if flow.packets and flow.bytes < ACK_STREAM_BYTES * flow.packets:
                continue  # small packets: a TCP connection's ACKs, not its data
            src, dst = topology.host_by_ip(flow.flow.src), topology.host_by_ip(flow.flow.dst)
            if src is None or dst is None or src.at.dpid != dpid or dst.at.dpid == dpid:
                continue
            found[flow.flow] = (flow, src.at.dpid, dst.at.dpid)
    # A TCP flow's ACKs are a flow too, in the same class by a bidirectional rule: they
    # follow their data flow's path backwards, and are never placed on their own.
    found = {
        flow: entry
        for flow, entry in found.items()
        if flow.reversed() not in found
        or found[flow.reversed()][0].rate_bps < entry[0].rate_bps
        or (found[flow.reversed()][0].rate_bps == entry[0].rate_bps and flow < flow.reversed())
    }
    hosts = {host.ipv4: host for host in topology.hosts if host.ipv4 is not None}

    def nic(address: int) -> float:
        host = hosts.get(address)
        return float(topology.capacity(host.at)) if host else float("inf")

    demands = estimate_demands(
        [
            FlowDemandInput(
                flow.flow,
                flow.flow.src,
                flow.flow.dst,
                flow.flow.ip_proto == IP_PROTO_TCP,
                flow.rate_bps,
            )
            for flow, _, _ in found.values()
        ],
        nic,
    )
    return [
        (
            Elephant(
                flow.flow,
                src,
                dst,
                demands.get(flow.flow, flow.rate_bps),
                flow.rate_bps,
                job_of(flow, jobs),
            ),
            flow.traffic_class,
        )
        for flow, src, dst in found.values()
    ]


JOB_WHY = "job:"


def job_of(flow: ObservedFlow, jobs: Collection[str]) -> str | None:
    """The registered job the classifier put the flow in, or None."""
    if not flow.why.startswith(JOB_WHY):
        return None
    name = flow.why.removeprefix(JOB_WHY)
    return name if name in jobs else None


def placement_events(
    result: Placement,
    old_pins: Mapping[FlowId, Pin],
    info: Mapping[FlowId, PinInfo],
    pinned_info: Mapping[FlowId, PinInfo],
    port_names: Mapping[PortRef, str],
    now: float,
    wall: Callable[[float], float],
) -> list[FabricEvent]:
    """Pinned, moved and released flows of one round, as events (and log lines).

    ``info`` is what this round's candidates were seen with, ``pinned_info``
    what each pin was last seen with; ``now`` is the round's time and ``wall``
    turns a monotonic time into Unix time for the views.
    """
    events: list[FabricEvent] = []
    for move in result.moves:
        cls, rate, demand = info.get(move.flow, NO_INFO)
        view = pinned_view(
            move.flow,
            traffic_class=cls,
            rate_bps=rate,
            demand_bps=demand,
            since=wall(now),
            path=move.new,
            port_names=port_names,
        )
        if move.old is None:
            events.append(placement_event("pinned", view, move.reason))
        else:
            events.append(reroute_event(view, path_view(move.old, port_names), move.reason))
        LOG.info("fabric: %s %s on %s", move.reason, move.flow, move.new)
    for flow in result.released:
        old = old_pins.get(flow)
        if old is None:
            continue
        # A flow that stopped being an elephant is not among the candidates: its event
        # carries what it was pinned with (class, last rate), not blanks.
        cls, rate, demand = info.get(flow) or pinned_info.get(flow, NO_INFO)
        view = pinned_view(
            flow,
            traffic_class=cls,
            rate_bps=rate,
            demand_bps=demand,
            since=wall(old.since),
            path=old.path,
            port_names=port_names,
        )
        why = result.reasons[flow]  # gone, ended, or no second path left to choose from
        events.append(placement_event("released", view, why))
        LOG.info("fabric: released %s from %s (%s)", flow, old.path, why)
    return events


def pinned_views(
    pins: Mapping[FlowId, Pin],
    pin_info: Mapping[FlowId, PinInfo],
    port_names: Mapping[PortRef, str],
    wall: Callable[[float], float],
    jobs: Mapping[FlowId, str] | None = None,
) -> list[PinnedView]:
    """The pinned flows as the API shows them, in flow order (``jobs``: each job flow's job)."""
    views = []
    for flow, pin in sorted(pins.items()):
        cls, rate, demand = pin_info.get(flow, NO_INFO)
        views.append(
            pinned_view(
                flow,
                traffic_class=cls,
                rate_bps=rate,
                demand_bps=demand,
                since=wall(pin.since),
                path=pin.path,
                port_names=port_names,
                job=(jobs or {}).get(flow),
            )
        )
    return views
