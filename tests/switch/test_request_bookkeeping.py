"""What the old shell's request bookkeeping promised (``Channel``, ``ReplyWaiter``, the
audit's turn), as the pure step keeps it: the rest is in ``test_step`` and ``test_scenarios``.
"""

from __future__ import annotations

import logging

from os_ken.ofproto import ofproto_v1_3 as v13

from controller.openflow.framing import header
from controller.switch import codec
from controller.switch.commands import Command, Log, Send, Timer
from controller.switch.events import Connected, PolicySnapshot, Received, Tick
from controller.switch.state import SwitchConfig, SwitchState, initial_state
from controller.switch.step import step
from tests.switch import wire_bytes
from tests.switch.harness import policy, rule
from tests.switch.test_step import answer_reads

CONFIG = SwitchConfig(manage_qos=False, reply_timeout_s=2.0, audit_interval_s=5.0)
ONE = PolicySnapshot(policy([rule("a", 5001), rule("b", 5002)]), 1)
DPID = 7


def batch_out() -> tuple[SwitchState, list[bytes]]:
    """Connected, reads answered: the plan's batch is out, its barrier not answered."""
    state, _ = step(initial_state(DPID, ONE), Connected(0.0, 100.0, 0.25), CONFIG)
    state, commands = answer_reads(state)
    (batch,) = [c.data for c in commands if isinstance(c, Send)]
    return state, list(codec.split(batch))


def test_a_batch_is_every_mod_then_its_barrier_and_the_counter_moves_past_it() -> None:
    state, messages = batch_out()
    kinds = [header(m)[1] for m in messages]
    assert kinds[-1] == v13.OFPT_BARRIER_REQUEST
    assert set(kinds[:-1]) == {v13.OFPT_FLOW_MOD} and len(kinds) > 2
    xids = [header(m)[3] for m in messages]
    assert len(set(xids)) == len(xids)
    assert state.next_xid == xids[-1] + 1  # the next request never reuses one of the batch


def test_an_error_for_a_batch_message_after_its_barrier_is_no_request_s() -> None:
    """The batch was settled at its barrier: a late error fails nothing and is said."""
    state, messages = batch_out()
    xids = [header(m)[3] for m in messages]
    state, _ = step(state, Received(wire_bytes.barrier_reply(xids[-1]), 0.2), CONFIG)
    installed = state.installed
    assert installed is not None and state.sync is None
    state, commands = step(state, Received(wire_bytes.error(xids[0]), 0.3), CONFIG)
    assert state.installed is installed and state.sync is None
    assert [c.msg % c.args for c in commands if isinstance(c, Log)] == [
        f"switch {DPID:016x}: switch error type={v13.OFPET_BAD_REQUEST} code=1 for xid {xids[0]:#x}"
    ]


def test_each_switch_is_audited_once_per_interval_from_its_phase() -> None:
    state, commands = step(initial_state(DPID, ONE), Connected(0.0, 100.0, 1.5), CONFIG)
    assert Timer(1.5, Tick("audit", 1, 1.5)) in commands
    state, commands = step(state, Tick("audit", 1, 1.5), CONFIG)
    audits = [c for c in commands if isinstance(c, Timer) and c.event.kind == "audit"]  # type: ignore[attr-defined]
    assert audits == [Timer(5.0, Tick("audit", 1, 6.5))]


def _logs(commands: list[Command], level: int) -> list[str]:
    return [c.msg % c.args for c in commands if isinstance(c, Log) and c.level == level]


def test_a_switch_that_never_answers_fails_the_sync_by_its_deadline_naming_the_request() -> None:
    state, messages = batch_out()
    barrier = header(messages[-1])[3]
    state, commands = step(state, Tick("deadline", 1, 2.2), CONFIG)
    assert _logs(commands, logging.WARNING) + _logs(commands, logging.ERROR) == [
        f"switch {DPID:016x}: sync (connect) failed: no reply to xid {barrier:#x} within 2s;"
        " will retry"
    ]
    assert state.installed is None and not state.pending
