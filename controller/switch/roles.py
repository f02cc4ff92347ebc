"""OpenFlow roles: the switch's master writes, its slaves only read.

Mastership (``controller.mastership``) tells the actor its role with a
generation id; the step asks the switch for it (OFPT_ROLE_REQUEST, with its own
xid and deadline) and writes nothing until the switch confirms MASTER.  On
becoming master it reads the switch afresh and syncs the difference (nothing
when nothing changed).  A switch that refuses it (a stale generation, or a write
refused with OFPBRC_IS_SLAVE: another controller is master now) makes it step
down at once: it says so (log, metric, ``SteppedDown`` for mastership) and
writes nothing more until told again.
"""

from __future__ import annotations

import logging

from controller.openflow.fabric_events import MasterConfirmed, MasterLeft
from controller.openflow.framing import with_xid
from controller.switch import codec
from controller.switch.commands import Command, FabricInput, Log, Metric, Send, SteppedDown
from controller.switch.events import RoleChanged
from controller.switch.fastreplace import replace
from controller.switch.requests import asked, expect, take_xids
from controller.switch.state import Ask, RoleState, SwitchConfig, SwitchState, want


def changed(
    state: SwitchState, event: RoleChanged, config: SwitchConfig, out: list[Command]
) -> SwitchState:
    """A new role (or a new generation): ask the switch for it now if connected."""
    role = state.role
    if (
        role is not None
        and not role.stepped_down
        and (role.name, role.generation) == (event.role, event.generation_id)
    ):
        return state  # said again by a renewal: nothing new
    if role is not None and role.name == "master" and role.confirmed:
        out.append(FabricInput(MasterLeft(state.dpid)))  # no packet-out until confirmed again
    state = replace(state, role=RoleState(event.role, event.generation_id))
    if not state.connected:
        return state  # asked for when the switch connects
    return request(state, config, event.now, out)


def request(
    state: SwitchState, config: SwitchConfig, now: float, out: list[Command]
) -> SwitchState:
    """Send the role request of ``state.role`` (on connect, when it changed, or again at an
    audit when no answer came)."""
    role = state.role
    assert role is not None
    out.append(
        Log(
            logging.INFO,
            "switch %s: asking to be %s (generation %d)",
            (state.tag, role.name, role.generation),
        )
    )
    state, xid = take_xids(state, 1)
    out.append(Send(with_xid(codec.role_request(role.name, role.generation), xid)))
    state = replace(state, role=replace(role, xid=xid))
    return expect(state, xid, Ask.ROLE, now, config, out)


def again_if_unanswered(
    state: SwitchState, config: SwitchConfig, now: float, out: list[Command]
) -> SwitchState:
    """At an audit: a role request that failed or went unanswered is asked again."""
    role = state.role
    if role is None or role.confirmed or role.stepped_down or asked(state, Ask.ROLE):
        return state
    return request(state, config, now, out)


def replied(
    state: SwitchState, reply: codec.RoleReply, now: float, out: list[Command]
) -> SwitchState:
    """The switch's answer: the role asked last is confirmed (an older request's answer is
    not: requests are answered in order, so the newest one's answer follows)."""
    role = state.role
    if (
        role is None
        or role.stepped_down
        or reply.xid != role.xid
        or reply.role != codec.ROLES[role.name]
        or reply.generation_id != role.generation % 2**64
    ):
        return state
    if role.confirmed:
        return state
    state = replace(state, role=replace(role, confirmed=True))
    out.append(
        Log(
            logging.INFO,
            "switch %s: %s (generation %d)",
            (state.tag, role.name, role.generation),
        )
    )
    out.append(Metric("role_changes", "inc", 1, (state.tag, role.name)))
    if role.name != "master":
        return state
    # The previous master may have written until our request took effect: read afresh,
    # adopt the overrides found, report again (the other master's report stood meanwhile).
    state = replace(state, adopt=True, overrides={}, reported=None)
    out.append(FabricInput(MasterConfirmed(state.dpid)))  # its LLDP probes go out now
    return want(state, "mastership", fresh=True)


def step_down(state: SwitchState, reason: str, out: list[Command]) -> SwitchState:
    """The switch refused us as master: write nothing more; tell mastership."""
    role = state.role
    if role is None or role.stepped_down:
        return state
    was = "master" if role.name == "master" and role.confirmed else role.name
    out.append(
        Log(
            logging.WARNING,
            "switch %s: stepping down (was %s, generation %d): %s",
            (state.tag, was, role.generation, reason),
        )
    )
    out.append(Metric("mastership_stepdowns", "inc", 1, (state.tag,)))
    if role.name == "master" and role.confirmed:
        out.append(FabricInput(MasterLeft(state.dpid)))
    out.append(SteppedDown(state.dpid, role.generation, reason))
    stepped = RoleState("slave", role.generation, confirmed=False, stepped_down=True)
    return replace(state, role=stepped)


def refused(state: SwitchState, error: codec.ErrorReply, out: list[Command]) -> SwitchState:
    """A role request the switch refused (stale generation, or another failure)."""
    role = state.role
    if role is None or error.xid != role.xid:
        return state  # an older request's: the newest one's answer decides
    if role is not None and role.name == "slave" and not role.stepped_down:
        # A slave's generation read just before a master took a newer one: not a step-down;
        # mastership re-reads the counter and says so again.
        out.append(
            Log(
                logging.INFO,
                "switch %s: slave request refused (%s); asking mastership again",
                (state.tag, error.text),
            )
        )
        out.append(SteppedDown(state.dpid, role.generation, "slave request refused"))
        return replace(state, role=replace(role, confirmed=False, stepped_down=True))
    if (error.type, error.code) == codec.STALE:
        reason = "the switch has seen a newer generation id (another controller took it)"
    else:
        reason = f"role request refused: {error.text}"
    return step_down(state, reason, out)
