"""One deadline timer per switch, not one per request: the tick out checks every request
due by then and asks for the next at the earliest deadline still pending."""

from __future__ import annotations

from controller.openflow.framing import header
from controller.switch import codec
from controller.switch.commands import Command, Timer
from controller.switch.events import PolicyChanged, Received, Tick
from controller.switch.step import step
from tests.switch import wire_bytes
from tests.switch.test_step import CONFIG, TWO, answer_reads, connect, sends


def deadline_timers(commands: list[Command]) -> list[Timer]:
    return [c for c in commands if isinstance(c, Timer) and c.event.kind == "deadline"]


def test_requests_made_while_a_tick_is_out_ask_for_no_other() -> None:
    state, commands = connect()  # four reads at 0.0, due at 2.0
    assert deadline_timers(commands) == [Timer(2.0, Tick("deadline", 1, 2.0))]
    state, commands = answer_reads(state, 0.1)  # the batch's barrier, due at 2.1
    barrier = header(list(codec.split(sends(commands)[0]))[-1])[3]
    assert deadline_timers(commands) == [] and state.deadline_tick == 2.0
    state, commands = step(state, Received(wire_bytes.barrier_reply(barrier), 0.2), CONFIG)
    state, commands = step(state, PolicyChanged(TWO, 1.5), CONFIG)  # a barrier due at 3.5
    assert deadline_timers(commands) == [] and len(state.pending) == 1
    # The tick at 2.0: nothing is due yet, the next tick is asked for the barrier's deadline.
    state, commands = step(state, Tick("deadline", 1, 2.0), CONFIG)
    assert deadline_timers(commands) == [Timer(1.5, Tick("deadline", 1, 3.5))]
    assert state.sync is not None and state.deadline_tick == 3.5
    # That one fails the sync, and with nothing left pending asks for none.
    state, commands = step(state, Tick("deadline", 1, 3.5), CONFIG)
    assert state.sync is None and not state.pending and state.deadline_tick is None
    assert deadline_timers(commands) == []
    assert any(isinstance(c, Timer) and c.event.kind == "retry" for c in commands)


def test_a_tick_before_the_one_asked_for_changes_nothing() -> None:
    state, _ = connect()
    same, commands = step(state, Tick("deadline", 1, 1.0), CONFIG)
    assert commands == [] and same.deadline_tick == 2.0 and len(same.pending) == 4
