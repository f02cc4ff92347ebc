"""Topologies as plain data: switches, hosts and links in the order Mininet numbers their ports.

Mininet numbers a switch's ports in the order its links are added, starting
at 1, so the plan fixes that order and can name every port (``s1-eth3``)
before a network exists.  Scenario files name bottleneck ports and policies
set port rates by those names, and both are checked against the plan.

Standard library only: ``mininet/topologies.py`` imports this module from
``mn --custom``, which may run under an interpreter without flowlane's
dependencies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_HOSTS = 200
"""Hosts share one /24 (10.0.0.0/24): an L2 fabric, forwarded by ``NORMAL``."""

ETHERNET_MTU = 1_500
"""Every link's MTU unless a plan says otherwise: what Mininet's veths come up with."""

JUMBO_MTU = 9_000
"""The largest MTU a plan may set: jumbo frames, as AI training fabrics run (RoCEv2 uses 4096)."""


@dataclass(frozen=True, slots=True)
class SwitchPlan:
    name: str
    dpid: int


@dataclass(frozen=True, slots=True)
class HostPlan:
    name: str
    ip: str
    mac: str


@dataclass(frozen=True, slots=True)
class LinkPlan:
    a: str
    b: str


@dataclass(frozen=True)
class TopologyPlan:
    """Everything Mininet needs, in link order; ``loops`` says the fabric needs RSTP.

    ``mtu`` is every link's MTU, both ends (hosts' interfaces and switch ports).
    """

    switches: tuple[SwitchPlan, ...]
    hosts: tuple[HostPlan, ...]
    links: tuple[LinkPlan, ...]
    loops: bool = False
    mtu: int = ETHERNET_MTU
    _ports: dict[str, dict[str, str]] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not ETHERNET_MTU <= self.mtu <= JUMBO_MTU:
            raise ValueError(f"mtu must be {ETHERNET_MTU}-{JUMBO_MTU}, got {self.mtu}")
        switches = {switch.name for switch in self.switches}
        counters: dict[str, int] = {}
        ports: dict[str, dict[str, str]] = {name: {} for name in switches}
        for link in self.links:
            for node, peer in ((link.a, link.b), (link.b, link.a)):
                if node in switches:
                    counters[node] = counters.get(node, 0) + 1
                    ports[node][f"{node}-eth{counters[node]}"] = peer
        object.__setattr__(self, "_ports", ports)

    @property
    def host_names(self) -> tuple[str, ...]:
        return tuple(host.name for host in self.hosts)

    def switch_ports(self) -> dict[str, str]:
        """Every switch port name and the node at its other end."""
        return {port: peer for ports in self._ports.values() for port, peer in ports.items()}

    def ports_of(self, switch: str) -> list[str]:
        return list(self._ports[switch])

    def inter_switch_ports(self) -> list[str]:
        """Ports whose peer is a switch: the fabric's links."""
        switches = {switch.name for switch in self.switches}
        return [port for port, peer in self.switch_ports().items() if peer in switches]

    def port_to(self, switch: str, peer: str) -> str:
        """The port of ``switch`` that faces ``peer`` (the first one, if there are several)."""
        for port, node in self._ports[switch].items():
            if node == peer:
                return port
        raise KeyError(f"{switch} has no link to {peer}")


def _hosts(names: list[str], switches: list[str]) -> tuple[HostPlan, ...]:
    clash = sorted(set(names) & set(switches))
    if clash:
        raise ValueError(f"host names {', '.join(clash)} are switch names in this topology")
    if len(names) > MAX_HOSTS:
        raise ValueError(f"at most {MAX_HOSTS} hosts fit the fabric's /24, got {len(names)}")
    if len(set(names)) != len(names):
        raise ValueError("host names must be unique")
    return tuple(
        HostPlan(
            name,
            f"10.0.0.{index + 1}",
            f"00:00:00:00:{(index + 1) >> 8:02x}:{(index + 1) & 0xFF:02x}",
        )
        for index, name in enumerate(names)
    )


def single(hosts: list[str]) -> TopologyPlan:
    """One switch ``s1``; host ``i`` (in list order) is on port ``s1-eth<i+1>``."""
    return TopologyPlan(
        switches=(SwitchPlan("s1", 1),),
        hosts=_hosts(hosts, ["s1"]),
        links=tuple(LinkPlan(name, "s1") for name in hosts),
    )


def dumbbell(left: list[str], right: list[str]) -> TopologyPlan:
    """Two switches joined by one link, the bottleneck.

    ``left`` hosts sit on ``s1``, ``right`` hosts on ``s2``; the joining link is
    added last, so it is ``s1-eth<len(left)+1>`` and ``s2-eth<len(right)+1>``.
    """
    links = [LinkPlan(name, "s1") for name in left] + [LinkPlan(name, "s2") for name in right]
    return TopologyPlan(
        switches=(SwitchPlan("s1", 1), SwitchPlan("s2", 2)),
        hosts=_hosts(left + right, ["s1", "s2"]),
        links=(*links, LinkPlan("s1", "s2")),
    )


def leaf_spine(leaves: int, spines: int, hosts_per_leaf: int) -> TopologyPlan:
    """A two-tier Clos: every leaf links to every spine; hosts ``h1..`` fill the leaves in order.

    Leaf ``l`` has its hosts on ports 1..H and its uplink to spine ``s`` on port
    ``H+s``; spine ``s`` reaches leaf ``l`` on port ``l``.  With more than one
    spine the fabric has loops, which ``NORMAL`` forwarding can only survive
    with a spanning tree (RSTP), so ``loops`` is set.  Names carry their own
    datapath ids because Mininet would derive the same id from ``leaf1`` and
    ``spine1``.
    """
    if not 1 <= leaves <= 16 or not 1 <= spines <= 8 or not 1 <= hosts_per_leaf <= 12:
        raise ValueError("leaf-spine needs 1-16 leaves, 1-8 spines and 1-12 hosts per leaf")
    names = [f"h{index + 1}" for index in range(leaves * hosts_per_leaf)]
    leaf_names = [f"leaf{index + 1}" for index in range(leaves)]
    spine_names = [f"spine{index + 1}" for index in range(spines)]
    links = [
        LinkPlan(names[leaf * hosts_per_leaf + slot], leaf_names[leaf])
        for leaf in range(leaves)
        for slot in range(hosts_per_leaf)
    ]
    links += [LinkPlan(leaf, spine) for leaf in leaf_names for spine in spine_names]
    return TopologyPlan(
        switches=tuple(SwitchPlan(name, 0x100 + i + 1) for i, name in enumerate(leaf_names))
        + tuple(SwitchPlan(name, 0x200 + i + 1) for i, name in enumerate(spine_names)),
        hosts=_hosts(names, leaf_names + spine_names),
        links=tuple(links),
        loops=spines > 1 and leaves > 1,
    )


def with_hosts(plan: TopologyPlan, extra: list[tuple[str, str]]) -> TopologyPlan:
    """``plan`` plus hosts ``(name, switch)`` linked last, so no existing port is renumbered.

    Mininet numbers a switch's ports in link order: a link added after all
    others takes the next number on its switch, and every port a scenario or
    policy names keeps its name.  The new hosts take the next addresses, and
    their links the plan's MTU.
    """
    switches = {switch.name for switch in plan.switches}
    unknown = sorted({switch for _, switch in extra} - switches)
    if unknown:
        raise ValueError(f"no switch {', '.join(unknown)} in this topology")
    names = [*plan.host_names, *(name for name, _ in extra)]
    hosts = _hosts(names, sorted(switches))
    links = tuple(LinkPlan(name, switch) for name, switch in extra)
    return TopologyPlan(plan.switches, hosts, (*plan.links, *links), plan.loops, plan.mtu)
