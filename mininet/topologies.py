"""Mininet topologies for flowlane; also usable with ``mn --custom mininet/topologies.py``.

Each topology is built from a plan (``controller.scenario.topology``) that
fixes the order of links, so port names (``s1-eth3``) are known before the
network exists: scenario files and policies name ports by them.

Port rates come from the flowlane policy (OVS queues), never from TCLink:
TCLink's HTB on a switch port would fight OVS QoS for the root qdisc.

    sudo .venv/bin/python /usr/bin/mn --custom mininet/topologies.py \\
        --topo flowlane-leafspine,2,2,2 \\
        --switch ovs,datapath=user,protocols=OpenFlow13 --controller remote

(Run ``mn`` with the project's interpreter so ``controller`` imports.  A
leaf-spine with more than one spine has loops: enable RSTP on its bridges,
as ``harness.network`` does, before it forwards.)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `controller`, under `mn` too

from mininet.topo import Topo

from controller.scenario import topology
from controller.scenario.topology import TopologyPlan

SWITCH = "s1"


class PlannedTopo(Topo):  # type: ignore[misc]
    """Whatever a ``TopologyPlan`` says, links in plan order."""

    def build(self, plan: TopologyPlan) -> None:
        self.plan = plan
        for switch in plan.switches:
            self.addSwitch(switch.name, dpid=f"{switch.dpid:016x}")
        for host in plan.hosts:
            self.addHost(host.name, ip=f"{host.ip}/24", mac=host.mac)
        for link in plan.links:
            self.addLink(link.a, link.b)


class SingleSwitchTopo(PlannedTopo):
    """Training senders, inference clients and one server on one switch.

    Links are added senders first, then clients, then the server, so the
    server's switch port is always the last: ``s1-eth<senders+clients+1>``.
    """

    def build(self, training_senders: int = 2, inference_clients: int = 1) -> None:  # type: ignore[override]
        names = [f"train{i + 1}" for i in range(training_senders)]
        names += [f"infer{i + 1}" for i in range(inference_clients)]
        super().build(topology.single([*names, "server"]))


class DumbbellTopo(PlannedTopo):
    """``left`` hosts on s1, ``right`` hosts on s2, one s1-s2 link between them."""

    def build(self, left: int = 2, right: int = 2) -> None:  # type: ignore[override]
        names = [f"h{i + 1}" for i in range(left + right)]
        super().build(topology.dumbbell(names[:left], names[left:]))


class LeafSpineTopo(PlannedTopo):
    """Two-tier Clos: ``leaves`` leaves of ``hosts_per_leaf`` hosts, each linked to every spine."""

    def build(self, leaves: int = 2, spines: int = 2, hosts_per_leaf: int = 2) -> None:  # type: ignore[override]
        super().build(topology.leaf_spine(leaves, spines, hosts_per_leaf))


def server_port(training_senders: int = 2, inference_clients: int = 1) -> str:
    return f"{SWITCH}-eth{training_senders + inference_clients + 1}"


topos = {
    "flowlane-single": SingleSwitchTopo,
    "flowlane-dumbbell": DumbbellTopo,
    "flowlane-leafspine": LeafSpineTopo,
}
