"""OpenFlow roles in the switch step, against the simulated switch (roles per connection).

With ``SwitchConfig.roles`` the step writes nothing until the switch confirms it as
master; as slave it sends only reads; a switch that refuses it (stale generation,
``OFPBRC_IS_SLAVE``) makes it step down.  Two ``StepHarness`` on one ``OfSwitch``
are two controllers, each on its own connection.
"""

from __future__ import annotations

from os_ken.ofproto import ofproto_v1_3 as v13

from controller.openflow.framing import header
from controller.switch.commands import SteppedDown
from controller.switch.events import PolicyChanged, PolicySnapshot, RoleChanged
from controller.switch.state import SwitchConfig
from tests.support.ofswitch import OfSwitch
from tests.switch.harness import DPID, StepHarness, policy, ports, rule

ROLES = SwitchConfig(manage_qos=False, audit_interval_s=5.0, reply_timeout_s=2.0, roles=True)
ONE = PolicySnapshot(policy([rule("a", 5001)]), 1)
TWO = PolicySnapshot(policy([rule("a", 5001), rule("b", 5002)]), 2)

WRITES = {v13.OFPT_FLOW_MOD, v13.OFPT_GROUP_MOD, v13.OFPT_METER_MOD}


def types_sent(h: StepHarness) -> list[int]:
    """Message types the controller sent, in order (each write may hold several)."""
    from controller.switch.codec import split

    return [header(msg)[1] for data in h.sent for msg in split(data)]


def writes(h: StepHarness) -> int:
    return sum(1 for kind in types_sent(h) if kind in WRITES)


def stepped_down(h: StepHarness) -> list[SteppedDown]:
    return [c for c in h.commands if isinstance(c, SteppedDown)]


def controller(switch: OfSwitch, conn: int, snapshot: PolicySnapshot = ONE) -> StepHarness:
    h = StepHarness(snapshot, config=ROLES, switch=switch, conn=conn)
    h.connect(phase=1.0)
    h.settle()
    return h


def test_without_roles_nothing_changes_no_role_request() -> None:
    h = StepHarness(ONE)
    h.connect()
    h.settle()
    assert v13.OFPT_ROLE_REQUEST not in types_sent(h)
    assert h.holds_plan() and h.mods() > 0


def test_with_roles_nothing_is_written_until_master_is_confirmed() -> None:
    switch = OfSwitch(DPID, ports(1, 2))
    h = controller(switch, 0)
    # Before any role: packet-ins asked for in every role, the ports read (controller.switch.
    # slave), nothing else.
    assert types_sent(h) == [v13.OFPT_SET_ASYNC, v13.OFPT_MULTIPART_REQUEST]
    assert h.state.role is None and h.state.ports is not None
    before = len(types_sent(h))
    h.tell(RoleChanged("master", 7))
    assert types_sent(h)[before:] == [v13.OFPT_ROLE_REQUEST]  # nothing before the answer
    h.settle()
    assert switch.roles[0] == v13.OFPCR_ROLE_MASTER and switch.generation_id == 7
    assert h.state.role is not None and h.state.role.confirmed
    assert h.holds_plan() and h.mods() > 0
    # The fresh read came after the reply: role request, then the reads, then the batch.
    kinds = types_sent(h)[before:]
    assert kinds[0] == v13.OFPT_ROLE_REQUEST and kinds[1] == v13.OFPT_MULTIPART_REQUEST


def test_a_slave_sends_only_reads_whatever_happens() -> None:
    switch = OfSwitch(DPID, ports(1, 2))
    h = controller(switch, 0)
    h.tell(RoleChanged("slave", 0))
    h.settle()
    assert switch.roles[0] == v13.OFPCR_ROLE_SLAVE
    h.tell(PolicyChanged(TWO))
    h.advance(30.0)  # audits, retries, port counters
    h.tell(PolicyChanged(ONE))
    h.settle()
    assert writes(h) == 0 and h.mods() == 0
    assert set(types_sent(h)) <= {
        v13.OFPT_ROLE_REQUEST,
        v13.OFPT_MULTIPART_REQUEST,
        v13.OFPT_SET_ASYNC,
    }


def test_master_slave_master_sends_no_mod_when_nothing_changed() -> None:
    switch = OfSwitch(DPID, ports(1, 2))
    h = controller(switch, 0)
    h.tell(RoleChanged("master", 1))
    h.settle()
    assert h.holds_plan()
    mods = h.mods()
    h.tell(RoleChanged("slave", 1))
    h.settle()
    h.advance(6.0)
    syncs, sent = len(h.metrics("sync_seconds")), len(types_sent(h))
    h.tell(RoleChanged("master", 2))
    h.settle()
    assert h.state.role is not None and h.state.role.confirmed and h.state.role.generation == 2
    assert h.mods() == mods  # read afresh, nothing to change: 0 flow-mods
    assert len(h.metrics("sync_seconds")) == syncs + 1 and h.state.installed is not None
    assert v13.OFPT_MULTIPART_REQUEST in types_sent(h)[sent:]  # it did read the tables


def test_a_stale_generation_is_refused_and_the_controller_steps_down() -> None:
    switch = OfSwitch(DPID, ports(1, 2))
    switch.receive(_role_request("master", 9), conn=5)  # another controller, generation 9
    h = controller(switch, 0)
    h.tell(RoleChanged("master", 8))
    h.settle()
    assert h.state.role is not None and h.state.role.stepped_down
    assert [(s.dpid, s.generation) for s in stepped_down(h)] == [(DPID, 8)]
    assert h.metrics("mastership_stepdowns")
    h.advance(30.0)
    assert writes(h) == 0 and h.mods() == 0


def test_is_slave_on_a_write_steps_down_and_nothing_more_is_written() -> None:
    switch = OfSwitch(DPID, ports(1, 2))
    h = controller(switch, 0)
    h.tell(RoleChanged("master", 1))
    h.settle()
    switch.receive(_role_request("master", 2), conn=1)  # taken over; we are not told yet
    assert switch.roles[0] == v13.OFPCR_ROLE_SLAVE
    h.tell(PolicyChanged(TWO))
    h.settle()
    refused = [m for m in switch.mods_received if m.conn == 0 and m.error is not None]
    assert refused and all(m.error == (1, v13.OFPBRC_IS_SLAVE) for m in refused)
    assert [s.generation for s in stepped_down(h)] == [1]
    before = len(switch.mods_received)
    h.advance(30.0)  # retries and audits: a stepped-down controller writes nothing
    assert len(switch.mods_received) == before


def test_a_takeover_the_new_masters_first_mod_is_accepted_the_old_ones_refused() -> None:
    switch = OfSwitch(DPID, ports(1, 2))
    old = controller(switch, 0)
    new = controller(switch, 1)
    old.tell(RoleChanged("master", 1))
    new.tell(RoleChanged("slave", 1))
    old.settle()
    new.settle()
    assert old.holds_plan() and new.mods() == old.mods()
    accepted_old = len([m for m in switch.mods_received if m.conn == 0])
    # The old master pauses; its lease expires; the new one takes generation 2.
    new.tell(RoleChanged("master", 2))
    new.tell(PolicyChanged(TWO))
    new.settle()
    by_new = [m for m in switch.mods_received if m.conn == 1]
    assert by_new and by_new[0].error is None and all(m.error is None for m in by_new)
    # The paused master wakes with a change of its own: every write refused.
    old.tell(PolicyChanged(PolicySnapshot(policy([rule("c", 5003)]), 3)))
    old.settle()
    late = [m for m in switch.mods_received if m.conn == 0][accepted_old:]
    assert late and all(m.error == (1, v13.OFPBRC_IS_SLAVE) for m in late)
    assert stepped_down(old) and not stepped_down(new)
    # It asks again with its old generation: the switch says stale; still nothing written.
    old.tell(RoleChanged("master", 1))
    old.settle()
    assert old.state.role is not None and old.state.role.stepped_down
    assert len([m for m in switch.mods_received if m.conn == 0 and m.error is None]) == (
        accepted_old
    )
    assert new.holds_plan()


def _role_request(role: str, generation: int) -> bytes:
    from controller.openflow.framing import with_xid
    from controller.switch import codec

    return with_xid(codec.role_request(role, generation), 0x777)


def test_a_stale_slave_request_is_not_a_step_down_and_the_next_word_is_asked() -> None:
    switch = OfSwitch(DPID, ports(1, 2))
    switch.receive(_role_request("master", 1), conn=5)
    h = controller(switch, 0)
    h.tell(RoleChanged("slave", 0))  # read before the master took generation 1
    h.settle()
    assert not h.metrics("mastership_stepdowns") and len(stepped_down(h)) == 1
    h.tell(RoleChanged("slave", 0))  # the same word again is asked again
    h.tell(RoleChanged("slave", 1))
    h.settle()
    assert h.state.role is not None and h.state.role.confirmed
    assert switch.roles[0] == v13.OFPCR_ROLE_SLAVE and h.mods() == 0
