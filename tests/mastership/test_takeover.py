"""Two controllers on one simulated switch, their roles from real leases in Redis.

Each controller is a lease keeper and a switch step (``StepHarness``) on its own
connection to one ``OfSwitch``.  The master pauses (its keeper stops renewing),
its lease expires, the other takes the switch with a newer generation: the new
master's first write is accepted, and the old master's writes after it wakes are
all refused; it steps down, and its next renewal makes it a slave.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import redis
from os_ken.ofproto import ofproto_v1_3 as v13

from controller.mastership.decide import Role
from controller.mastership.keeper import LeaseKeeper
from controller.mastership.leases import Leases
from controller.switch.commands import SteppedDown
from controller.switch.events import PolicyChanged, PolicySnapshot, RoleChanged
from controller.switch.state import SwitchConfig
from tests.support.ofswitch import OfSwitch
from tests.switch.harness import DPID, StepHarness, policy, ports, rule

ROLES = SwitchConfig(manage_qos=False, audit_interval_s=5.0, reply_timeout_s=2.0, roles=True)
ONE = PolicySnapshot(policy([rule("a", 5001)]), 1)


def wait_until(what: str, condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


class Controller:
    def __init__(self, client: redis.Redis, name: str, switch: OfSwitch, conn: int, ttl: float):
        self.harness = StepHarness(ONE, config=ROLES, switch=switch, conn=conn)
        self.harness.connect(phase=1.0)
        self.keeper = LeaseKeeper(
            Leases(client, name, prefix="takeover", ttl_s=ttl), lambda: {DPID}, self._told
        )
        self._seen = 0

    def _told(self, roles: Mapping[int, Role]) -> None:
        role = roles[DPID]
        self.harness.tell(RoleChanged(role.name, role.generation))
        self.harness.settle()

    def renew(self) -> None:
        self.keeper.round()
        # What the actor said to mastership (SteppedDown) reaches the keeper.
        downs = [c for c in self.harness.commands if isinstance(c, SteppedDown)]
        for command in downs[self._seen :]:
            self.keeper.stepped_down(command.dpid)
        self._seen = len(downs)

    def confirmed(self, name: str) -> bool:
        role = self.harness.state.role
        return role is not None and role.confirmed and role.name == name


def test_a_paused_master_is_fenced_and_steps_down(redis_client: redis.Redis) -> None:
    switch = OfSwitch(DPID, ports(1, 2))
    old = Controller(redis_client, "old", switch, conn=0, ttl=0.3)
    new = Controller(redis_client, "new", switch, conn=1, ttl=3.0)
    old.renew()
    new.renew()
    assert old.confirmed("master") and new.confirmed("slave")
    assert old.harness.holds_plan() and all(m.conn == 0 for m in switch.mods_received)

    # old pauses: no renewal; its lease expires and new takes the switch (generation 2).
    wait_until(
        "the old lease expires", lambda: not redis_client.exists("takeover:mastership:lease:old")
    )
    new.renew()
    assert new.confirmed("master") and switch.generation_id == 2
    assert switch.roles == {0: v13.OFPCR_ROLE_SLAVE, 1: v13.OFPCR_ROLE_MASTER}
    new.harness.tell(PolicyChanged(PolicySnapshot(policy([rule("b", 5002)]), 2)))
    new.harness.settle()
    by_new = [m for m in switch.mods_received if m.conn == 1]
    assert by_new and by_new[0].error is None and all(m.error is None for m in by_new)

    # old wakes up with a change of its own before its keeper runs: every write refused.
    before = len([m for m in switch.mods_received if m.conn == 0])
    old.harness.tell(PolicyChanged(PolicySnapshot(policy([rule("c", 5003)]), 3)))
    old.harness.settle()
    late = [m for m in switch.mods_received if m.conn == 0][before:]
    assert late and all(m.error == (1, v13.OFPBRC_IS_SLAVE) for m in late)
    assert old.harness.state.role is not None and old.harness.state.role.stepped_down
    # Its keeper runs: the lease had expired, new owns the switch: old is a slave.
    old.renew()
    assert old.confirmed("slave") and new.confirmed("master")
    accepted_by_old = [m for m in switch.mods_received if m.conn == 0 and m.error is None]
    assert len(accepted_by_old) == before
    new.harness.tell(PolicyChanged(PolicySnapshot(policy([rule("b", 5002)]), 2)))
    new.harness.settle()
    assert new.harness.holds_plan()
