"""A slave knows its switch's ports and gets its packet-ins (``controller.switch.slave``).

So the instance that takes a switch over has known the switch, its links and its hosts
all along: a takeover does not start the fabric from nothing.
"""

from __future__ import annotations

from os_ken.ofproto import ofproto_v1_3 as v13

from controller.openflow.fabric_events import SwitchPorts
from controller.switch.commands import FabricInput
from controller.switch.events import PolicySnapshot, Received, RoleChanged
from controller.switch.state import SwitchConfig
from tests.support.ofswitch import OfSwitch
from tests.switch.harness import DPID, NO_QOS, StepHarness, policy, ports, rule

ROLES = SwitchConfig(manage_qos=False, audit_interval_s=5.0, reply_timeout_s=2.0, roles=True)
ONE = PolicySnapshot(policy([rule("a", 5001)]), 1)


def ports_told(h: StepHarness) -> list[list[int]]:
    """The port numbers of every ``SwitchPorts`` the actor handed the fabric owner."""
    return [
        [port.number for port in command.item.ports]
        for command in h.commands
        if isinstance(command, FabricInput) and isinstance(command.item, SwitchPorts)
    ]


def test_a_slave_reads_its_ports_follows_port_status_and_writes_nothing() -> None:
    switch = OfSwitch(DPID, ports(1, 2))
    h = StepHarness(ONE, config=ROLES, switch=switch, conn=0)
    h.connect(phase=1.0)
    h.settle()
    h.tell(RoleChanged("slave", 3))
    h.settle()
    assert ports_told(h) == [[1, 2]]  # read once, before any role was told
    h.tell(Received(switch.add_port(3)))
    h.tell(Received(switch.port_down(1)))
    told = [c.item for c in h.commands if isinstance(c, FabricInput)]
    assert ports_told(h)[-1] == [1, 2, 3]
    last = told[-1]
    assert isinstance(last, SwitchPorts) and not last.ports[0].up
    h.advance(12.0)  # audits: the slave reads nothing more, writes nothing
    assert len(ports_told(h)) == 3 and h.mods() == 0 and not switch.mods_received


def test_a_master_turned_slave_while_reading_keeps_the_ports_it_read() -> None:
    switch = OfSwitch(DPID, ports(1, 2))
    h = StepHarness(ONE, config=ROLES, switch=switch, conn=0)
    h.connect(phase=1.0)
    h.settle()
    h.tell(RoleChanged("master", 1))
    h.settle()
    assert h.holds_plan()
    switch.add_port(4)  # its port status lost: only a read shows it
    switch.hold()
    h.advance(1.0)  # the audit: a fresh read goes out, its answers held
    assert h.state.sync is not None
    h.tell(RoleChanged("slave", 2))
    h.release()
    h.settle()
    assert ports_told(h)[-1] == [1, 2, 4]
    assert h.state.sync is None and h.state.installed is None  # read afresh as master


def test_with_roles_a_switch_sends_packet_ins_in_the_slave_role_too() -> None:
    switch = OfSwitch(DPID, ports(1, 2))
    slave = StepHarness(ONE, config=ROLES, switch=switch, conn=1)
    slave.connect(phase=1.0)
    slave.tell(RoleChanged("slave", 0))
    slave.settle()
    assert switch.roles[1] == v13.OFPCR_ROLE_SLAVE
    assert switch.wants_packet_in(1, v13.OFPR_ACTION)
    assert switch.wants_packet_in(1, v13.OFPR_NO_MATCH)
    # Without the request a slave gets none (Open vSwitch's default), and the only
    # controller (no roles) never asks.
    switch.roles[2] = v13.OFPCR_ROLE_SLAVE
    assert not switch.wants_packet_in(2)
    alone = StepHarness(ONE, config=NO_QOS)
    alone.connect()
    alone.settle()
    assert alone.switch.packet_in_masks == {}
