"""Mininet topologies for flowlane; also usable as ``mn --custom mininet/topologies.py``.

Port rates come from the flowlane policy (OVS queues), never from TCLink:
TCLink's HTB on a switch port would fight OVS QoS for the root qdisc.

    mn --custom mininet/topologies.py --topo flowlane-single \\
       --switch ovs,datapath=user,protocols=OpenFlow13 --controller remote
"""

from __future__ import annotations

from mininet.topo import Topo

SWITCH = "s1"


class SingleSwitchTopo(Topo):  # type: ignore[misc]
    """Training senders, inference clients and one server on one switch.

    Links are added senders first, then clients, then the server, so the
    server's switch port is always the last: ``s1-eth<senders+clients+1>``.
    """

    def build(self, training_senders: int = 2, inference_clients: int = 1) -> None:
        switch = self.addSwitch(SWITCH)
        names = [f"train{i + 1}" for i in range(training_senders)]
        names += [f"infer{i + 1}" for i in range(inference_clients)]
        names.append("server")
        for index, name in enumerate(names):
            host = self.addHost(
                name, ip=f"10.0.0.{index + 1}/24", mac=f"00:00:00:00:00:{index + 1:02x}"
            )
            self.addLink(host, switch)


def server_port(training_senders: int = 2, inference_clients: int = 1) -> str:
    return f"{SWITCH}-eth{training_senders + inference_clients + 1}"


topos = {"flowlane-single": SingleSwitchTopo}
