"""The switch confirming this instance as its master tells the fabric owner at once
(``MasterConfirmed``): LLDP out of a switch is sent only by its master, so the links out
of it are silent from its previous master's end until the new one probes."""

from __future__ import annotations

from controller.openflow.fabric_events import MasterConfirmed
from controller.switch.commands import FabricInput
from controller.switch.events import PolicySnapshot, RoleChanged
from controller.switch.state import SwitchConfig
from tests.support.ofswitch import OfSwitch
from tests.switch.harness import DPID, StepHarness, policy, ports, rule

ROLES = SwitchConfig(manage_qos=False, audit_interval_s=5.0, reply_timeout_s=2.0, roles=True)


def confirmed(h: StepHarness) -> list[MasterConfirmed]:
    return [
        c.item
        for c in h.commands
        if isinstance(c, FabricInput) and isinstance(c.item, MasterConfirmed)
    ]


def test_a_confirmed_master_tells_the_fabric_once_a_slave_never() -> None:
    h = StepHarness(
        PolicySnapshot(policy([rule("a", 5001)]), 1),
        config=ROLES,
        switch=OfSwitch(DPID, ports(1, 2)),
    )
    h.connect(phase=1.0)
    h.tell(RoleChanged("slave", 1))
    h.settle()
    assert confirmed(h) == []
    h.tell(RoleChanged("master", 2))
    h.settle()
    h.tell(RoleChanged("master", 2))  # said again by a renewal: nothing new
    h.settle()
    assert [c.dpid for c in confirmed(h)] == [DPID]
