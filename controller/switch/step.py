"""One switch's logic as a pure function: ``step(state, event, config) -> (state, commands)``.

No clock (time arrives in events), no I/O, no logging, no metrics, no
globals: what the step wants done comes back as commands (``commands``),
which the actor carries out.  Everything a switch does is here and in the
modules it calls: ``sync`` (bring the switch to its plan), ``detect``
(elephant detection, port counters), ``qos`` (queues and their telemetry).
"""

from __future__ import annotations

import logging

from controller.openflow.fabric_events import MasterLeft
from controller.switch import codec, detect, qos, roles, slave, sync
from controller.switch.commands import Command, FabricInput, Gone, Log, Timer
from controller.switch.events import (
    Connected,
    Disconnected,
    Event,
    FabricChanged,
    PolicyChanged,
    QosChanged,
    QosDone,
    QueuesRead,
    Received,
    RoleChanged,
    Tick,
)
from controller.switch.fastreplace import replace
from controller.switch.requests import rearm, without
from controller.switch.state import (
    SYNC_ASKS,
    Ask,
    Request,
    SwitchConfig,
    SwitchState,
    may_write,
    want,
)


def step(
    state: SwitchState, event: Event, config: SwitchConfig
) -> tuple[SwitchState, list[Command]]:
    """The state after ``event``, and what the world must do about it."""
    out: list[Command] = []
    if isinstance(event, Connected):
        state = _connected(state, event, config, out)
    elif isinstance(event, Disconnected):
        # Requests die with the connection; nothing more is sent.
        gone: list[Command] = [Gone(state.dpid)] if event.gone else []
        if state.role is not None and state.role.name == "master" and state.role.confirmed:
            gone.insert(0, FabricInput(MasterLeft(state.dpid)))  # a new connection asks again
        return (
            replace(state, connected=False, pending={}, sync=None, wanted=None, retries=()),
            gone,
        )
    elif isinstance(event, PolicyChanged):
        state = _policy(state, event, config, out)
    elif isinstance(event, FabricChanged):
        state = replace(state, fabric=event.inputs)
        if state.connected:
            state = sync.start_if_idle(want(state, event.reason), config, event.now, out)
    elif isinstance(event, RoleChanged):
        state = roles.changed(state, event, config, out)
    elif not state.connected:
        return state, []
    elif isinstance(event, Received):
        state = _received(state, event, config, out)
    elif isinstance(event, Tick):
        state = _tick(state, event, config, out)
    elif isinstance(event, QosDone):
        state = qos.done(state, event.result, config, out)
    elif isinstance(event, QueuesRead):
        state = qos.read(state, event.result, config, out)
    elif isinstance(event, QosChanged):
        state = replace(state, qos_wanted=True)
    else:
        return state, []  # an event of a later issue: not ours yet
    if state.connected:
        # Whatever the event wanted (a sync, QoS work) starts now unless one is out.
        state = sync.start_if_idle(state, config, event.now, out)
        state = qos.dispatch(state, config, out)
    return state, out


def _connected(
    state: SwitchState, event: Connected, config: SwitchConfig, out: list[Command]
) -> SwitchState:
    """A new connection starts from nothing known about the switch but its inputs: it is
    read afresh (ports, tables) and detection starts over, adopting the overrides found."""
    state = replace(
        SwitchState(state.dpid, state.snapshot, state.fabric),
        epoch=state.epoch + 1,
        connected=True,
        connected_at=event.wall,
        wall_offset=event.wall - event.now,
        next_xid=state.next_xid,
        role=replace(state.role, confirmed=False) if state.role is not None else None,
    )
    if config.roles:
        state = slave.ask_packet_ins(state, out)  # every instance learns the whole fabric
    if state.role is not None and not state.role.stepped_down:
        # A new connection is EQUAL at the switch until asked again.
        state = roles.request(state, config, event.now, out)
    phase = event.audit_phase_s if event.audit_phase_s is not None else config.audit_interval_s
    out.append(Timer(phase, Tick("audit", state.epoch, event.now + phase)))
    if config.manage_qos:
        state = qos.queues_tick(state, config, event.now, out)
        state = replace(state, queue_read_due=False)
    return sync.start_if_idle(want(state, "connect", fresh=True), config, event.now, out)


def _policy(
    state: SwitchState, event: PolicyChanged, config: SwitchConfig, out: list[Command]
) -> SwitchState:
    old, new = state.snapshot, event.snapshot
    state = replace(state, snapshot=new)
    if not state.connected:
        return state
    if new.policy is not old.policy or new.version != old.version:
        state = want(state, f"policy version {new.version}")
    if new.jobs_version != old.jobs_version or new.jobs != old.jobs:
        state = want(state, "jobs")
    return sync.start_if_idle(state, config, event.now, out)


def _tick(state: SwitchState, event: Tick, config: SwitchConfig, out: list[Command]) -> SwitchState:
    if event.epoch != state.epoch:
        return state  # set for an earlier connection
    now = event.now
    state = _expired(state, config, now, out)
    if event.kind == "deadline":
        return rearm(state, now, out)
    if event.kind == "audit":
        interval = config.audit_interval_s
        out.append(Timer(interval, Tick("audit", state.epoch, now + interval)))
        state = roles.again_if_unanswered(state, config, now, out)
        return sync.start_if_idle(want(state, "audit", fresh=True), config, now, out)
    if event.kind == "retry":
        return sync.retry(state, config, now, out)
    if event.kind == "detect":
        return detect.tick(state, config, now, out)
    if event.kind == "ports":
        return detect.ports_tick(state, config, now, out)
    if event.kind == "queues":
        return qos.queues_tick(state, config, now, out)
    return state


def _expired(
    state: SwitchState, config: SwitchConfig, now: float, out: list[Command]
) -> SwitchState:
    """Requests past their deadline have failed (a barrier that never comes fails its sync)."""
    due = sorted(xid for xid, request in state.pending.items() if request.deadline <= now)
    for xid in due:
        request = state.pending.get(xid)
        if request is None:
            continue  # went with a sync that failed just before
        state = without(state, xid)
        text = f"no reply to xid {xid:#x} within {config.reply_timeout_s:g}s"
        state = _request_failed(state, request, text, config, now, out)
    return state


def _request_failed(
    state: SwitchState,
    request: Request,
    text: str,
    config: SwitchConfig,
    now: float,
    out: list[Command],
) -> SwitchState:
    if request.ask in SYNC_ASKS:
        if state.sync is None:
            return state
        return sync.fail(state, config, now, out, text)
    out.append(
        Log(logging.WARNING, "switch %s: %s not read: %s", (state.tag, request.ask.value, text))
    )
    return state


def _received(
    state: SwitchState, event: Received, config: SwitchConfig, out: list[Command]
) -> SwitchState:
    now = event.now
    try:
        message = codec.decode(event.data)
    except codec.CodecError as exc:
        out.append(Log(logging.WARNING, "switch %s: message not decoded: %s", (state.tag, exc)))
        return state
    if isinstance(message, codec.Part):
        request = state.pending.get(message.xid)
        if request is None:
            return state  # its request failed or went with its connection
        parts = (*request.parts, *_body(message))
        if message.more:
            return replace(
                state, pending={**state.pending, message.xid: replace(request, parts=parts)}
            )
        state = without(state, message.xid)
        return _answered(state, request, parts, config, now, out)
    if isinstance(message, codec.BarrierReply):
        request = state.pending.get(message.xid)
        if request is None or request.ask is not Ask.BARRIER:
            return state
        state = without(state, message.xid)
        if state.sync is None or state.sync.applying is None:
            return state
        return sync.barrier_passed(state, config, now, out)
    if isinstance(message, codec.RoleReply):
        request = state.pending.get(message.xid)
        if request is None or request.ask is not Ask.ROLE:
            return state
        return roles.replied(without(state, message.xid), message, now, out)
    if isinstance(message, codec.ErrorReply):
        request = state.pending.get(message.xid)
        if request is not None and request.ask is Ask.ROLE:
            return roles.refused(without(state, message.xid), message, out)
        # Refused as slave or stale: the fencing roles are for.  A confirmed master steps
        # down (one WARNING); a refusal of a message sent before the role request took
        # effect (an unconfirmed master's packet-out), or after the step-down, is expected.
        role = state.role
        fenced = role is not None and (message.type, message.code) in (codec.IS_SLAVE, codec.STALE)
        if role is not None and role.name == "master" and role.confirmed and fenced:
            state = roles.step_down(state, "a write was refused: this controller is slave", out)
        if request is not None:
            state = without(state, message.xid)
            return _request_failed(state, request, message.text, config, now, out)
        recorded = sync.rejected(state, message.xid, message.text)
        if recorded is not None:
            return recorded
        level = logging.DEBUG if fenced else logging.ERROR
        out.append(Log(level, "switch %016x: %s", (state.dpid, message.text)))
        return state
    if isinstance(message, codec.PortStatus):
        port = message.port
        up = "up" if port.up else "down"
        out.append(
            Log(
                logging.INFO,
                "switch %016x port %s (%d) %s, %s",
                (state.dpid, port.name, port.number, message.reason_text, up),
            )
        )
        # Adopted without re-reading the switch, at the start of the next sync.
        update = (port.number, None if message.deleted else port)
        state = want(state, f"port {port.name} {message.reason_text} {up}", port=update)
        return sync.start_if_idle(state, config, now, out)
    return state


def _body(part: codec.Part) -> tuple[object, ...]:
    return (part.body,) if isinstance(part.body, bytes) else part.body


def _answered(
    state: SwitchState,
    request: Request,
    parts: tuple[object, ...],
    config: SwitchConfig,
    now: float,
    out: list[Command],
) -> SwitchState:
    if request.ask is Ask.DETECT:
        if not may_write(state, config):
            return state  # no longer master since it was asked: the master acts on its own
        bodies = [part for part in parts if isinstance(part, bytes)]
        return detect.polled(state, request, bodies, now, out)
    if request.ask is Ask.PORT_STATS:
        return detect.port_counters(state, request, parts, out)
    return sync.answered(state, request.ask, parts, config, now, out)
