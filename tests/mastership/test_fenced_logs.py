"""A fenced stale master says so once: the refusals it is designed to get are no errors.

A master paused past its lease wakes up and sends what it had queued (its LLDP
packet-outs: xid 0, no request of the step).  The switch refuses each with
``OFPBRC_IS_SLAVE``; the actor steps down once (one WARNING) and the other
refusals are expected, not an ERROR line each (a harness' log check and any
log-based alert read ERROR as a fault).
"""

from __future__ import annotations

import logging

from os_ken.ofproto import ofproto_v1_3 as v13

from controller.openflow import messages
from controller.openflow.framing import with_xid
from controller.openflow.osken_internals import DATAPATH, encode
from controller.switch import codec
from controller.switch.commands import SteppedDown
from controller.switch.events import PolicySnapshot, RoleChanged
from controller.switch.state import SwitchConfig
from tests.support.ofswitch import OfSwitch
from tests.switch.harness import DPID, StepHarness, policy, ports, rule

ROLES = SwitchConfig(manage_qos=False, audit_interval_s=5.0, reply_timeout_s=2.0, roles=True)
ONE = PolicySnapshot(policy([rule("a", 5001)]), 1)


def lldp_out(h: StepHarness, port: int) -> None:
    """The app's packet-out on the actor's connection (xid 0, not the step's)."""
    data = encode(messages.packet_out(DATAPATH, [port], b"\x01" * 60), 0)
    h.inbox.extend(h.switch.receive(data, h.conn))


def test_a_stale_master_s_refused_packet_outs_step_it_down_with_one_warning() -> None:
    switch = OfSwitch(DPID, ports(1, 2))
    h = StepHarness(ONE, config=ROLES, switch=switch, conn=0)
    h.connect(phase=1.0)
    h.tell(RoleChanged("master", 1))
    h.settle()
    assert h.state.role is not None and h.state.role.confirmed
    # Another instance took the switch (generation 2); this one was paused, wakes, probes.
    switch.receive(with_xid(codec.role_request("master", 2), 0x777), conn=1)
    for port in (1, 2, 1, 2):
        lldp_out(h, port)
    h.settle()
    assert [c.generation for c in h.commands if isinstance(c, SteppedDown)] == [1]
    assert h.logs(logging.ERROR) == []
    warnings = h.logs(logging.WARNING)
    assert len(warnings) == 1 and "stepping down" in warnings[0]


def test_a_packet_out_refused_before_the_role_request_took_effect_is_no_step_down() -> None:
    switch = OfSwitch(DPID, ports(1, 2))
    h = StepHarness(ONE, config=ROLES, switch=switch, conn=0)
    h.connect(phase=1.0)
    h.tell(RoleChanged("slave", 1))
    h.settle()
    assert switch.roles[0] == v13.OFPCR_ROLE_SLAVE
    # Told master; the fabric's probe overtakes the role request on the connection.
    lldp_out(h, 1)
    h.tell(RoleChanged("master", 2))
    h.settle()
    assert not [c for c in h.commands if isinstance(c, SteppedDown)]
    assert h.logs(logging.ERROR) == []
    assert h.state.role is not None and h.state.role.confirmed
    assert h.holds_plan()
