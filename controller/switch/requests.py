"""Requests to the switch: xids from the state's own counter, each pending with a deadline."""

from __future__ import annotations

from controller.openflow.framing import with_xid
from controller.switch.commands import Command, Send, Timer
from controller.switch.events import Tick
from controller.switch.fastreplace import replace
from controller.switch.state import MAX_XID, Ask, Request, SwitchConfig, SwitchState


def take_xids(state: SwitchState, count: int) -> tuple[SwitchState, int]:
    """``count`` consecutive xids that do not wrap (a batch's range is first..last); 0 is
    never one (packet-outs of the fabric are sent with xid 0)."""
    first = state.next_xid
    if first + count > MAX_XID:
        first = 1
    return replace(state, next_xid=first + count), first


def ask(
    state: SwitchState,
    what: Ask,
    request: bytes,
    now: float,
    config: SwitchConfig,
    out: list[Command],
) -> SwitchState:
    """Send ``request`` with a fresh xid and remember it until answered or due."""
    state, xid = take_xids(state, 1)
    out.append(Send(with_xid(request, xid)))
    return expect(state, xid, what, now, config, out)


def expect(
    state: SwitchState,
    xid: int,
    what: Ask,
    now: float,
    config: SwitchConfig,
    out: list[Command],
) -> SwitchState:
    """Remember ``xid`` as pending; a ``deadline`` tick checks it at its deadline.

    Deadlines only grow (``now`` does, the timeout is fixed), so a tick already out is
    due no later than this one: it checks the requests then, and asks for the next tick
    at the earliest deadline still pending (``rearm``)."""
    deadline = now + config.reply_timeout_s
    pending = {**state.pending, xid: Request(what, now, deadline)}
    if state.deadline_tick is not None:
        return replace(state, pending=pending)
    out.append(Timer(config.reply_timeout_s, Tick("deadline", state.epoch, deadline)))
    return replace(state, pending=pending, deadline_tick=deadline)


def rearm(state: SwitchState, now: float, out: list[Command]) -> SwitchState:
    """The ``deadline`` tick came: ask for the next one at the earliest pending deadline.

    A tick before the one asked for (an earlier connection's is dropped before this) leaves
    it to that one."""
    if state.deadline_tick is not None and now < state.deadline_tick:
        return state
    if not state.pending:
        return replace(state, deadline_tick=None)
    due = min(request.deadline for request in state.pending.values())
    out.append(Timer(max(0.0, due - now), Tick("deadline", state.epoch, due)))
    return replace(state, deadline_tick=due)


def asked(state: SwitchState, what: Ask) -> bool:
    """Whether a request of this kind is out (detection and port counters: one at a time)."""
    return any(request.ask is what for request in state.pending.values())


def without(state: SwitchState, *xids: int) -> SwitchState:
    return replace(state, pending={x: r for x, r in state.pending.items() if x not in xids})
