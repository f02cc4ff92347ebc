"""What a slave does with its switch: know its ports, and see its packet-ins.

A slave writes nothing, but the fabric is every instance's: the topology, the
hosts and the edge ports must be known by the instance that takes a switch over
*before* it takes it, or a takeover starts the fabric from nothing (no host, no
link: nothing to forward to).  So with roles every controller, master or slave:

- reads the switch's ports once per connection (a multipart read, which a slave
  may make) and follows its port-status messages, which the switch sends to
  slaves too, and hands them to the fabric owner (``SwitchPorts``);
- asks the switch for its packet-ins in the slave role too (``OFPT_SET_ASYNC``;
  by default Open vSwitch sends a slave only port status), so every instance
  sees every LLDP probe, ARP and unknown source and learns the whole fabric
  itself.  Only the master of a switch sends packet-outs on it (the shell's
  ``_packet_out``), so a probe or a flood still goes out once.

Hosts that stay silent are not learned this way: those come from the masters
through Redis (``controller.mastership.hosts``), and a switch is handed to an
instance only once it has followed it for one link timeout
(``controller.mastership.assign``).

A slave keeps only the packet-ins it needs (``slave_keeps``, read from the raw message
before anything parses it): LLDP (its links) and ARP (its hosts, with their addresses;
and the ARP flood, which each instance sends out of the edge ports of the switches *it*
masters, so every instance must see every ARP).  The rest is unknown unicast that the
table-miss entry punts (up to the punt meter's rate per switch): its only use at a slave
would be to learn the source host a little before its master publishes it, not worth
parsing it three times over with three controllers.
"""

from __future__ import annotations

import struct
from dataclasses import replace
from typing import Final

from os_ken.ofproto import ofproto_v1_3 as v13
from os_ken.ofproto import ofproto_v1_3_parser as v13_parser

from controller.openflow.fabric_events import SwitchPorts
from controller.openflow.framing import with_xid
from controller.openflow.osken_internals import DATAPATH, encode
from controller.switch import codec
from controller.switch.commands import Command, FabricInput, Send
from controller.switch.requests import ask, take_xids
from controller.switch.state import Ask, SwitchConfig, SwitchState, Sync, updated_ports

PORTS_READ: Final = "ports, as slave"
"""The reason of a slave's read: its ports only, never planned."""

_PACKET_INS: Final = 1 << v13.OFPR_NO_MATCH | 1 << v13.OFPR_ACTION | 1 << v13.OFPR_INVALID_TTL
_PORT_STATUS: Final = 1 << v13.OFPPR_ADD | 1 << v13.OFPPR_DELETE | 1 << v13.OFPPR_MODIFY
_FLOW_REMOVED: Final = (
    1 << v13.OFPRR_IDLE_TIMEOUT
    | 1 << v13.OFPRR_HARD_TIMEOUT
    | 1 << v13.OFPRR_DELETE
    | 1 << v13.OFPRR_GROUP_DELETE
)
SET_ASYNC: Final = encode(
    v13_parser.OFPSetAsync(
        DATAPATH,
        [_PACKET_INS, _PACKET_INS],  # [master or equal, slave]
        [_PORT_STATUS, _PORT_STATUS],
        [_FLOW_REMOVED, 0],  # the switch's defaults
    )
)
"""Packet-ins in every role; port status and flow-removed as the switch's defaults."""


_PACKET_IN_MATCH: Final = 24
"""Offset of a v1.3 packet-in's match: header, buffer_id, total_len, reason, table_id, cookie."""
_VLAN_TAGS: Final = frozenset({0x8100, 0x88A8})
SLAVE_ETH_TYPES: Final = frozenset({0x88CC, 0x0806})
"""LLDP and ARP: what a slave does something with (see the module's docstring)."""


def slave_keeps(message: bytes) -> bool:
    """Whether a slave handles this (raw, OpenFlow 1.3) packet-in: its frame is LLDP or
    ARP (behind VLAN tags too).  A message too short to tell is kept: the full parser
    says what is wrong with it."""
    if len(message) < _PACKET_IN_MATCH + 4:
        return True
    (match_len,) = struct.unpack_from("!H", message, _PACKET_IN_MATCH + 2)
    offset = _PACKET_IN_MATCH + (match_len + 7) // 8 * 8 + 2 + 12  # + 2 pad, + the MACs
    while len(message) >= offset + 2:
        (eth_type,) = struct.unpack_from("!H", message, offset)
        if eth_type not in _VLAN_TAGS:
            return eth_type in SLAVE_ETH_TYPES
        offset += 4
    return True


def ask_packet_ins(state: SwitchState, out: list[Command]) -> SwitchState:
    """On every connection (the setting is the connection's): packet-ins as slave too."""
    state, xid = take_xids(state, 1)
    out.append(Send(with_xid(SET_ASYNC, xid)))
    return state


def observe(
    state: SwitchState, config: SwitchConfig, now: float, out: list[Command]
) -> SwitchState:
    """A sync wanted while this controller may not write (``sync.start_if_idle``, connected
    and no sync out): read the ports if unknown, else adopt the port-status updates
    wanted; the rest of what is wanted waits for mastership."""
    wanted = state.wanted
    if wanted is None or not config.roles:
        return state
    if state.ports is None:
        # A fresh read makes the updates wanted before it obsolete.
        state = replace(state, wanted=replace(wanted, ports={}))
        state = replace(state, sync=Sync(PORTS_READ, False, now, True, False))
        return ask(state, Ask.PORTS, codec.PORT_DESC, now, config, out)
    if not wanted.ports:
        return state
    ports = updated_ports(state.ports, wanted.ports)
    out.append(FabricInput(SwitchPorts(state.dpid, ports)))
    return replace(state, ports=ports, wanted=replace(wanted, ports={}))


def read(state: SwitchState, out: list[Command]) -> SwitchState:
    """A read done while this controller may not write (or a slave's ports read that
    finished after it became master): adopt the ports, plan nothing.  What the switch
    holds is unknown: becoming master reads it afresh."""
    sync = state.sync
    assert sync is not None
    if sync.ports is not None:
        state = replace(state, ports=sync.ports)
        out.append(FabricInput(SwitchPorts(state.dpid, sync.ports)))
    return replace(state, sync=None, installed=None)


def stepped_down(state: SwitchState) -> bool:
    """The switch refused this controller as master (another took it over): the batch it
    refused failing is expected, a warning rather than an error."""
    return state.role is not None and state.role.stepped_down
