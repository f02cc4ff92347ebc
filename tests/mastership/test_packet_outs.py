"""With several controllers, packet-outs (LLDP probes, ARP answers and floods) go only to a
switch that confirmed this instance as its master (``MasterConfirmed``), never to one it is
merely assigned or that made it slave (``MasterLeft``): Open vSwitch refuses a slave's
packet-out with ``OFPBRC_IS_SLAVE``, and until the switch answers the role request it may
still hold another master.  Alone, an instance sends to every switch (it is the only
controller of each)."""

from __future__ import annotations

from controller.openflow.fabric_events import MasterConfirmed, MasterLeft
from controller.openflow.framing import with_xid
from controller.switch import codec
from controller.switch.commands import FabricInput
from controller.switch.events import Disconnected, PolicyChanged, PolicySnapshot, RoleChanged
from controller.switch.state import SwitchConfig
from tests.openflow.fabric_harness import (
    HOST_PORTS,
    IP_A,
    IP_UNKNOWN,
    LEAF_A,
    LEAF_B,
    MAC_A,
    SPINE,
    Fabric,
    arp_frame,
    leaf_ports,
    new_fabric,
    spine_ports,
)
from tests.support.ofswitch import OfSwitch
from tests.switch.harness import DPID, StepHarness, policy, ports, rule

ROLES = SwitchConfig(manage_qos=False, audit_interval_s=5.0, reply_timeout_s=2.0, roles=True)


def member() -> Fabric:
    """One instance's owner among several, its three switches' ports known."""
    fabric = new_fabric(share=lambda offer: None)
    for dpid, found in ((SPINE, spine_ports()), (LEAF_A, leaf_ports(LEAF_A))):
        fabric.ports(dpid, found)
    fabric.ports(LEAF_B, leaf_ports(LEAF_B))
    return fabric


def sent_to(fabric: Fabric) -> set[int]:
    return {dpid for dpid, _, _ in fabric.sent.packets}


def test_probes_go_only_where_the_switch_confirmed_this_instance_as_master() -> None:
    fabric = member()
    fabric.discover()
    assert fabric.sent.packets == []  # assigned or not, nothing is confirmed yet
    fabric.tell(MasterConfirmed(LEAF_A, fabric.clock.now))
    assert sent_to(fabric) == {LEAF_A}  # at once, every up port
    fabric.sent.clear()
    fabric.clock.now += 1.0
    fabric.discover()
    assert sent_to(fabric) == {LEAF_A}
    fabric.tell(MasterLeft(LEAF_A, fabric.clock.now))
    fabric.sent.clear()
    fabric.clock.now += 1.0
    fabric.discover()
    assert fabric.sent.packets == []


def test_a_switch_gone_and_back_is_probed_only_once_confirmed_again() -> None:
    fabric = member()
    fabric.tell(MasterConfirmed(LEAF_A, fabric.clock.now))
    fabric.gone(LEAF_A)
    fabric.sent.clear()
    fabric.ports(LEAF_A, leaf_ports(LEAF_A))  # a new connection: its role is asked again
    fabric.clock.now += 1.0
    fabric.discover()
    assert fabric.sent.packets == []
    fabric.tell(MasterConfirmed(LEAF_A, fabric.clock.now))
    assert sent_to(fabric) == {LEAF_A}


def test_an_arp_flood_reaches_only_the_edges_of_confirmed_switches() -> None:
    fabric = member()
    fabric.tell(MasterConfirmed(LEAF_B, fabric.clock.now))
    fabric.clock.now += 2.0  # host ports settle into edge ports
    fabric.discover()
    fabric.sent.clear()
    fabric.packet_in(LEAF_A, HOST_PORTS[0], arp_frame(1, MAC_A, IP_A, IP_UNKNOWN))
    assert sent_to(fabric) == {LEAF_B}  # its edge ports (no link was heard: all of them)


def test_alone_every_switch_is_probed_without_roles() -> None:
    fabric = new_fabric()
    fabric.ports(LEAF_A, leaf_ports(LEAF_A))
    assert sent_to(fabric) == {LEAF_A}


def left(h: StepHarness) -> list[MasterLeft]:
    return [
        c.item for c in h.commands if isinstance(c, FabricInput) and isinstance(c.item, MasterLeft)
    ]


def confirmed_master() -> StepHarness:
    h = StepHarness(
        PolicySnapshot(policy([rule("a", 5001)]), 1),
        config=ROLES,
        switch=OfSwitch(DPID, ports(1, 2)),
    )
    h.connect(phase=1.0)
    h.tell(RoleChanged("master", 2))
    h.settle()
    assert left(h) == []
    return h


def test_a_confirmed_master_told_slave_tells_the_fabric_before_asking() -> None:
    h = confirmed_master()
    h.tell(RoleChanged("slave", 3))
    assert [m.dpid for m in left(h)] == [DPID]
    h.settle()
    h.tell(RoleChanged("master", 4))  # not confirmed yet: nothing left again
    assert len(left(h)) == 1


def test_a_master_refused_by_the_switch_tells_the_fabric() -> None:
    h = confirmed_master()
    # Another instance took the switch (generation 3): a write of ours is refused.
    h.switch.receive(with_xid(codec.role_request("master", 3), 0x777), conn=1)
    h.tell(PolicyChanged(PolicySnapshot(policy([rule("b", 5002)]), 2)))
    h.settle()
    assert [m.dpid for m in left(h)] == [DPID]


def test_a_confirmed_master_disconnected_tells_the_fabric() -> None:
    h = confirmed_master()
    h.tell(Disconnected(gone=True))
    assert [m.dpid for m in left(h)] == [DPID]
