"""Requests to the switch: xids from the state's own counter, each pending with a deadline."""

from __future__ import annotations

from dataclasses import replace

from controller.openflow.framing import with_xid
from controller.switch.commands import Command, Send, Timer
from controller.switch.events import Tick
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
    """Remember ``xid`` as pending; a ``deadline`` tick checks it at its deadline."""
    deadline = now + config.reply_timeout_s
    timer = Timer(config.reply_timeout_s, Tick("deadline", state.epoch, deadline))
    if timer not in out:
        out.append(timer)
    pending = {**state.pending, xid: Request(what, now, deadline)}
    return replace(state, pending=pending)


def asked(state: SwitchState, what: Ask) -> bool:
    """Whether a request of this kind is out (detection and port counters: one at a time)."""
    return any(request.ask is what for request in state.pending.values())


def without(state: SwitchState, *xids: int) -> SwitchState:
    return replace(state, pending={x: r for x, r in state.pending.items() if x not in xids})
