"""The fabric a scenario builds, as the controller's ``Topology`` value: for optima and paths.

The plan already fixes every switch's datapath id and every port's name
(``leaf1-eth3``), and Mininet gives port ``<switch>-eth<N>`` the OpenFlow
number ``N``; capacities are the policy's port rates (the HTB ceilings).  So
the topology the controller should discover is known before the network
exists, and a scenario's optimum is a pure function of its files.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence

from controller.fabric.model import Host, Link, PortRef, Topology
from controller.fabric.optimum import Commodity, max_throughput
from controller.policy.model import Policy
from flowlane_bench.suite.spec import (
    BulkFlow,
    BulkWorkload,
    LoadedScenario,
    ProbeWorkload,
    Scenario,
)
from flowlane_bench.suite.topology import TopologyPlan

_PORT = re.compile(r"^(?P<switch>.+)-eth(?P<number>\d+)$")


def port_number(name: str) -> int:
    """``leaf1-eth3`` is OpenFlow port 3 (Mininet requests that number for it)."""
    match = _PORT.match(name)
    if match is None:
        raise ValueError(f"'{name}' is not a Mininet switch port name (<switch>-eth<N>)")
    return int(match["number"])


def port_ref(plan: TopologyPlan, name: str) -> PortRef:
    match = _PORT.match(name)
    dpids = {switch.name: switch.dpid for switch in plan.switches}
    if match is None or match["switch"] not in dpids:
        raise ValueError(f"'{name}' is not a port of this topology")
    return PortRef(dpids[match["switch"]], int(match["number"]))


def port_name(plan: TopologyPlan, ref: PortRef) -> str:
    names = {switch.dpid: switch.name for switch in plan.switches}
    return f"{names[ref.dpid]}-eth{ref.port}"


def host_port(plan: TopologyPlan, host: str) -> PortRef:
    """The edge port where ``host`` attaches: where its traffic enters the fabric."""
    switches = {switch.name for switch in plan.switches}
    for port, peer in plan.switch_ports().items():
        if peer == host and port.rsplit("-eth", 1)[0] in switches:
            return port_ref(plan, port)
    raise KeyError(f"no switch port faces host '{host}'")


def link_refs(plan: TopologyPlan, a: str, b: str) -> tuple[Link, Link]:
    """The two directions of the link between switches ``a`` and ``b``."""
    forward = Link(port_ref(plan, plan.port_to(a, b)), port_ref(plan, plan.port_to(b, a)))
    return forward, forward.reversed()


def fabric_topology(plan: TopologyPlan, policy: Policy) -> Topology:
    """Every switch, both directions of every link, every host, every port's policy rate."""
    switches = {switch.name for switch in plan.switches}
    links: set[Link] = set()
    for link in plan.links:
        if link.a in switches and link.b in switches:
            links.update(link_refs(plan, link.a, link.b))
    hosts = tuple(
        Host(
            mac=int(host.mac.replace(":", ""), 16),
            at=host_port(plan, host.name),
            ipv4=int(ipaddress.IPv4Address(host.ip)),
        )
        for host in plan.hosts
    )
    capacity = {
        port_ref(plan, port): policy.ports.configured_rate(port).bps for port in plan.switch_ports()
    }
    return Topology(
        switches=frozenset(switch.dpid for switch in plan.switches),
        links=frozenset(links),
        hosts=hosts,
        capacity_bps=capacity,
        default_capacity_bps=policy.ports.rate.bps,
    )


def without_links(
    topology: Topology, plan: TopologyPlan, down: Iterable[tuple[str, str]]
) -> Topology:
    """The fabric with the named switch-to-switch links failed (both directions)."""
    gone = [ref for a, b in down for ref in link_refs(plan, a, b)]
    return topology.without_links(gone)


_RATE = re.compile(r"^\s*(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>[kKmMgG]?)\s*$")
_UNITS = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9}
FRAME_OVERHEAD_BYTES = 8 + 20 + 14
"""UDP, IPv4 and Ethernet headers: what a probe datagram adds on the wire."""


def iperf_rate_bps(text: str) -> float:
    """iperf3's ``-b`` (``18M``): decimal units, as iperf3 reads them."""
    match = _RATE.match(text)
    if match is None:
        raise ValueError(f"'{text}' is not an iperf3 rate (a number with K, M or G)")
    return float(match["value"]) * _UNITS[match["unit"].lower()]


def training_commodities(scenario: Scenario, plan: TopologyPlan) -> list[Commodity]:
    """One commodity per training stream: bulk flows (UDP capped at its rate) and ring links
    (held to their ring's one rate, counted once: a run reports a ring's rate, one hop's)."""
    commodities = []
    for workload in scenario.training:
        if isinstance(workload, BulkWorkload):
            limit = iperf_rate_bps(workload.udp_rate) if workload.udp_rate else None
            commodities += [
                Commodity(host_port(plan, f.src), host_port(plan, f.dst), limit)
                for f in workload.flows
            ]
        else:
            ring = workload.workers
            commodities += [
                Commodity(host_port(plan, a), host_port(plan, b), None, workload.name)
                for a, b in zip(ring, [*ring[1:], ring[0]], strict=True)
            ]
    return commodities


def probe_commodity(probe: ProbeWorkload, plan: TopologyPlan, pair: BulkFlow) -> Commodity:
    """The probe stream at its wire rate: it is served before training, so training gets less."""
    wire = probe.rate * (probe.size + FRAME_OVERHEAD_BYTES) * 8
    return Commodity(host_port(plan, pair.src), host_port(plan, pair.dst), float(wire))


def optimum_bps(loaded: LoadedScenario) -> float:
    """The training flows' optimum on the intact fabric at the policy's port rates."""
    plan = loaded.scenario.plan()
    commodities = training_commodities(loaded.scenario, plan)
    return max_throughput(fabric_topology(plan, loaded.policy), commodities) if commodities else 0.0


TRACE_SHARE = 0.8
"""A port is on a traced path when it sent at least this share of the burst."""


def raised_ports(
    plan: TopologyPlan,
    before: Mapping[str, Mapping[int, int]],
    after: Mapping[str, Mapping[int, int]],
    burst: int,
) -> list[str]:
    """Switch ports whose transmit counters rose by most of a burst: the burst's path.

    Counters are per switch, per OpenFlow port number, read just before and
    after a burst sent alone; LLDP and ARP add a few packets, far below a
    burst of hundreds.  Ports come in plan order (leaves, then spines).
    """
    path = []
    for switch in plan.switches:
        for port in plan.ports_of(switch.name):
            number = port_number(port)
            sent = after.get(switch.name, {}).get(number, 0) - before.get(switch.name, {}).get(
                number, 0
            )
            if sent >= TRACE_SHARE * burst:
                path.append(port)
    return path


def first_crossing(
    paths: Sequence[Sequence[str]], plan: TopologyPlan, link: tuple[str, str]
) -> int:
    """The first traced path that uses ``link`` (either direction); the first path if none does."""
    a, b = link
    ends = {plan.port_to(a, b), plan.port_to(b, a)}
    for index, path in enumerate(paths):
        if ends & set(path):
            return index
    return 0
