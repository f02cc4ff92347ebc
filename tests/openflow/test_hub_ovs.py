"""The OpenFlow hub with a real Open vSwitch: handshake, a flow-mod and a barrier.

A userspace bridge (``bridge`` fixture: ``datapath_type=netdev``, OpenFlow 1.3,
its controller target on a free port) connects to a hub listening there; the
test installs one flow encoded with ``framing.encode`` and reads it back with
``ovs-ofctl``. Run under ``flock /tmp/flowlane-ovs.lock``.
"""

from __future__ import annotations

import queue

import pytest
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from controller.openflow import framing
from controller.openflow.hub import Connection, Hub, encode
from tests.support.ovs_bridge import OvsBridge, sh

pytestmark = pytest.mark.ovs

COOKIE = 0xF10E
WAIT_S = 20.0


class Recorder:
    """The hub's handler: each callback onto a queue the test reads."""

    def __init__(self) -> None:
        self.connections: queue.Queue[Connection] = queue.Queue()
        self.messages: queue.Queue[bytes] = queue.Queue()
        self.gone: queue.Queue[Connection] = queue.Queue()

    def connected(self, conn: Connection) -> None:
        self.connections.put(conn)

    def received(self, conn: Connection, data: bytes) -> None:
        self.messages.put(data)

    def disconnected(self, conn: Connection) -> None:
        self.gone.put(conn)


def test_open_vswitch_connects_and_takes_a_flow(bridge: OvsBridge) -> None:
    handler = Recorder()
    hub = Hub(handler, [("127.0.0.1", bridge.ofp_port)])
    hub.start()
    try:
        conn = handler.connections.get(timeout=WAIT_S)
        dpid = int(sh("ovs-vsctl", "get", "bridge", bridge.name, "datapath_id").strip('"\n '), 16)
        assert conn.dpid == dpid
        assert conn.n_tables > 1
        datapath = conn.datapath()
        flow = parser.OFPFlowMod(
            datapath,
            cookie=COOKIE,
            table_id=0,
            priority=1234,
            match=parser.OFPMatch(eth_type=0x0800, ip_proto=6, tcp_dst=5201),
            instructions=[
                parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, [parser.OFPActionOutput(1)])
            ],
        )
        assert conn.send(encode(flow, 0x100) + encode(parser.OFPBarrierRequest(datapath), 0x101))
        while True:  # port status and the like may come first; an error for 0x100 must not
            _, kind, _, xid = framing.header(message := handler.messages.get(timeout=WAIT_S))
            assert kind != ofp.OFPT_ERROR, f"the switch refused xid {xid:#x}: {message.hex()}"
            if kind == ofp.OFPT_BARRIER_REPLY:
                assert xid == 0x101
                break
        flows = sh("ovs-ofctl", "-O", "OpenFlow13", "dump-flows", bridge.name)
        (line,) = [line for line in flows.splitlines() if f"cookie={COOKIE:#x}" in line]
        assert "priority=1234" in line
        assert "tp_dst=5201" in line
        assert "actions=output:" in line
    finally:
        hub.stop(2.0)
    assert handler.gone.get(timeout=1.0) is conn
