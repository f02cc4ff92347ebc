"""Fabric messages against a real Open vSwitch: groups, meters, packet-out, packet-in.

Two userspace bridges joined by a veth pair (A port 1 <-> B port 1); A has a
second port for a second watched bucket.  Both connect to an OpenFlow hub
(``controller.openflow.hub``, the controller's own, in this process) whose
handler here installs a select group, a meter and a flow using both on A,
reads them back, modifies and deletes, then sends an LLDP probe out of A and
waits for B to hand it back as a packet-in.  The test then checks that what
came back decodes to exactly the planned entries: that is what makes the
controller's group and meter diffs converge to nothing.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from os_ken.ofproto import ofproto_v1_3 as v13

from controller.openflow import messages
from controller.openflow.frames import lldp_frame, parse_lldp
from controller.openflow.framing import header
from controller.openflow.hub import Connection, Hub
from controller.openflow.osken_internals import encode, parse
from controller.pipeline.flows import (
    OFPP_CONTROLLER,
    ApplyActions,
    FlowEntry,
    Group,
    InstalledFlow,
    MatchField,
    Meter,
    Output,
    Owner,
    make_match,
)
from controller.pipeline.groups import Bucket, GroupEntry, GroupType, MeterEntry, diff_groups
from controller.pipeline.tables import CLASSIFY

pytestmark = pytest.mark.ovs

LINK_PORT = 1
"""A's and B's ends of the veth pair between them."""
SPARE_PORT = 2
"""A's second port: a veth whose other end stays outside any bridge."""
FOREIGN_GROUP = 77
FOREIGN_METER = 9
PROBE_MAC = 0x02F1000000A1

SPREAD = GroupEntry(
    GroupType.SELECT,
    (
        Bucket((Output(LINK_PORT),), watch_port=LINK_PORT),
        Bucket((Output(SPARE_PORT),), watch_port=SPARE_PORT),
    ),
)
RESPREAD = GroupEntry(
    GroupType.SELECT,
    (
        Bucket((Output(LINK_PORT),), watch_port=LINK_PORT, weight=3),
        Bucket((Output(SPARE_PORT),), watch_port=SPARE_PORT, weight=1),
    ),
    group_id=SPREAD.group_id,
)
"""The same group with new weights: a modify in place."""
FLOOD = GroupEntry(GroupType.ALL, (Bucket((Output(LINK_PORT),)), Bucket((Output(SPARE_PORT),))))
"""Unwatched buckets of a non-select group: no weight on the wire, the default read back."""
LIMIT = MeterEntry(meter_id=1, rate_pps=100, burst=10)
RELIMIT = MeterEntry(meter_id=1, rate_pps=250, burst=25)
TO_SPREAD = FlowEntry(
    CLASSIFY,
    100,
    make_match(MatchField("eth_type", 0x0800), MatchField("ipv4_dst", 0x0A000002)),
    (Meter(LIMIT.meter_id), ApplyActions((Group(SPREAD.group_id),))),
    Owner.PLACEMENT,
)
LLDP_TO_CONTROLLER = FlowEntry(
    CLASSIFY,
    200,
    make_match(MatchField("eth_type", 0x88CC)),
    (ApplyActions((Output(OFPP_CONTROLLER),)),),
    Owner.DISCOVERY,
)


@dataclass
class Observed:
    """What the probe read from the switches."""

    groups_before: dict[int, GroupEntry | None]
    meters_before: dict[int, MeterEntry | None]
    groups: dict[int, GroupEntry | None]
    meters: dict[int, MeterEntry | None]
    flows: list[InstalledFlow]
    groups_modified: dict[int, GroupEntry | None]
    meters_modified: dict[int, MeterEntry | None]
    groups_after_delete: dict[int, GroupEntry | None]
    meters_after_delete: dict[int, MeterEntry | None]
    lldp_packet_in: tuple[int, int, tuple[int, int] | None]
    """(dpid it arrived on, in_port, what parse_lldp read)."""


# ---- the probe: the hub's handler and a client on the test's thread ---------------

WAIT_S = 15.0


class Switches:
    """The hub's handler: each connection and message onto a queue the test reads."""

    def __init__(self) -> None:
        self.connections: queue.Queue[Connection] = queue.Queue()
        self.messages: queue.Queue[tuple[int, bytes]] = queue.Queue()
        self.packet_ins: queue.Queue[tuple[int, bytes]] = queue.Queue()

    def connected(self, conn: Connection) -> None:
        self.connections.put(conn)

    def received(self, conn: Connection, data: bytes) -> None:
        if header(data)[1] == v13.OFPT_PACKET_IN:
            self.packet_ins.put((conn.dpid, data))
        else:
            self.messages.put((conn.dpid, data))

    def disconnected(self, conn: Connection) -> None:
        pass


class Probe:
    """Requests and batches to the switches, one at a time, each waited for."""

    def __init__(self, switches: Switches, dpid_a: int, dpid_b: int) -> None:
        self.switches = switches
        self.dpid_a, self.dpid_b = dpid_a, dpid_b
        self.conns: dict[int, Connection] = {}
        self._xids = itertools.count(1)
        deadline = time.monotonic() + 30
        while not {dpid_a, dpid_b} <= set(self.conns):
            conn = switches.connections.get(timeout=max(0.0, deadline - time.monotonic()))
            self.conns[conn.dpid] = conn

    def _replies(self, dpid: int, xids: set[int]) -> Iterator[tuple[int, int, bytes]]:
        """(type, xid, message) of ``dpid``'s messages for ``xids``, as they come."""
        deadline = time.monotonic() + WAIT_S
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"switch {dpid:016x}: no reply to {sorted(xids)}")
            got, data = self.switches.messages.get(timeout=remaining)
            _, kind, _, xid = header(data)
            if got == dpid and xid in xids:
                yield kind, xid, data

    def request(self, conn: Connection, msg: Any) -> list[Any]:
        """A multipart request's reply body, every part of it."""
        xid = next(self._xids)
        assert conn.send(encode(msg, xid))
        body: list[Any] = []
        for kind, _, data in self._replies(conn.dpid, {xid}):
            reply = parse(data)
            if kind == v13.OFPT_ERROR:
                raise RuntimeError(f"switch rejected: type={reply.type} code={reply.code}")
            body += reply.body
            if not reply.flags & v13.OFPMPF_REPLY_MORE:
                return body

    def apply(self, conn: Connection, *mods: Any) -> None:
        """Send in one write, then a barrier; any switch error fails the run."""
        xids = [next(self._xids) for _ in (*mods, None)]
        barrier = conn.datapath().ofproto_parser.OFPBarrierRequest(conn.datapath())
        assert conn.send(
            b"".join(encode(m, x) for m, x in zip((*mods, barrier), xids, strict=True))
        )
        errors = []
        for kind, _, data in self._replies(conn.dpid, set(xids)):
            if kind == v13.OFPT_ERROR:
                reply = parse(data)
                errors.append(f"xid {reply.xid}: type={reply.type} code={reply.code}")
            elif kind == v13.OFPT_BARRIER_REPLY:
                break
        if errors:
            raise RuntimeError(f"switch rejected: {errors}")

    def groups(self, conn: Connection) -> dict[int, GroupEntry | None]:
        descs = self.request(conn, messages.group_desc_request(conn.datapath()))
        return {desc.group_id: messages.installed_group(desc) for desc in descs}

    def meters(self, conn: Connection) -> dict[int, MeterEntry | None]:
        configs = self.request(conn, messages.meter_config_request(conn.datapath()))
        return {config.meter_id: messages.installed_meter(config) for config in configs}

    def observe(self) -> Observed:
        a, b = self.conns[self.dpid_a], self.conns[self.dpid_b]
        dp_a, dp_b = a.datapath(), b.datapath()
        groups_before, meters_before = self.groups(a), self.meters(a)
        # meter and group before the flow that names them
        self.apply(
            a,
            messages.meter_add(dp_a, LIMIT),
            messages.group_add(dp_a, SPREAD),
            messages.group_add(dp_a, FLOOD),
            messages.flow_add(dp_a, TO_SPREAD),
        )
        groups, meters = self.groups(a), self.meters(a)
        stats = self.request(a, messages.flow_stats_request(dp_a))
        flows = [messages.installed_flow(entry) for entry in stats]
        self.apply(a, messages.group_modify(dp_a, RESPREAD), messages.meter_modify(dp_a, RELIMIT))
        groups_modified, meters_modified = self.groups(a), self.meters(a)
        self.apply(
            a,
            messages.group_delete(dp_a, FOREIGN_GROUP),
            messages.meter_delete(dp_a, FOREIGN_METER),
        )
        groups_after_delete, meters_after_delete = self.groups(a), self.meters(a)
        self.apply(b, messages.flow_add(dp_b, LLDP_TO_CONTROLLER))
        lldp_packet_in = self.probe_link(a)
        return Observed(
            groups_before,
            meters_before,
            groups,
            meters,
            flows,
            groups_modified,
            meters_modified,
            groups_after_delete,
            meters_after_delete,
            lldp_packet_in,
        )

    def probe_link(self, a: Connection) -> tuple[int, int, tuple[int, int] | None]:
        """Probe until B answers: a fresh veth may drop the first frames."""
        probe = lldp_frame(self.dpid_a, LINK_PORT, PROBE_MAC)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            # xid 0, as the controller's fabric owner sends its probes
            assert a.send(encode(messages.packet_out(a.datapath(), [LINK_PORT], probe), 0))
            with contextlib.suppress(queue.Empty):
                while True:
                    dpid, data = self.switches.packet_ins.get(timeout=1.0)
                    if dpid == self.dpid_b:
                        in_port, frame = messages.packet_in_summary(parse(data))
                        return dpid, in_port, parse_lldp(frame)
        raise RuntimeError("no packet-in from bridge B within 15 s")


# ---- the test ---------------------------------------------------------------------

_ids = itertools.count(1)


def sh(*args: str, check: bool = True) -> str:
    done = subprocess.run(list(args), capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


@dataclass(frozen=True)
class Fabric:
    bridge_a: str
    bridge_b: str
    dpid_a: int
    dpid_b: int
    ofp_port: int


@pytest.fixture
def fabric() -> Iterator[Fabric]:
    from flowlane_bench import harness

    harness.check_prerequisites()
    index = f"{os.getpid() % 1000}{next(_ids)}"
    a, b = f"flfa{index}", f"flfb{index}"
    base = 0xF1A0_0000_0000_0000 | (os.getpid() & 0xFFFFFF) << 16 | next(_ids) << 4
    made = Fabric(a, b, base | 0xA, base | 0xB, harness.free_port())
    veths = [f"{a}l", f"{a}s"]
    try:
        for name, dpid in ((a, made.dpid_a), (b, made.dpid_b)):
            sh(
                "ovs-vsctl",
                "add-br",
                name,
                "--",
                "set",
                "bridge",
                name,
                "datapath_type=netdev",
                "protocols=OpenFlow13",
                "fail-mode=secure",
                f"other-config:datapath-id={dpid:016x}",
                "--",
                "set-controller",
                name,
                f"tcp:127.0.0.1:{made.ofp_port}",
            )
            uuid = sh("ovs-vsctl", "get", "bridge", name, "controller").strip("[]\n ")
            sh("ovs-vsctl", "set", "controller", uuid, "max_backoff=1000")
        # A port 1 <-> B port 1; A port 2 to a veth end outside any bridge
        sh("ip", "link", "add", f"{a}l", "type", "veth", "peer", "name", f"{b}l")
        sh("ip", "link", "add", f"{a}s", "type", "veth", "peer", "name", f"{a}t")
        for end in (f"{a}l", f"{b}l", f"{a}s", f"{a}t"):
            sh("ip", "link", "set", end, "up")
        for bridge, port, number in (
            (a, f"{a}l", LINK_PORT),
            (b, f"{b}l", LINK_PORT),
            (a, f"{a}s", SPARE_PORT),
        ):
            request = f"ofport_request={number}"
            sh("ovs-vsctl", "add-port", bridge, port, "--", "set", "interface", port, request)
        yield made
    finally:
        for bridge in (a, b):
            sh("ovs-vsctl", "--if-exists", "del-br", bridge, check=False)
        for veth in veths:
            sh("ip", "link", "del", veth, check=False)


def ofctl(*args: str) -> str:
    return sh("ovs-ofctl", "-O", "OpenFlow13", *args)


def run_probe(fabric: Fabric) -> Observed:
    """Serve both bridges from a hub in this process, probe them, stop the hub."""
    switches = Switches()
    hub = Hub(switches, [("127.0.0.1", fabric.ofp_port)])
    hub.start()
    try:
        try:
            return Probe(switches, fabric.dpid_a, fabric.dpid_b).observe()
        except Exception as exc:
            pytest.fail(f"{exc!r}\n--- groups ---\n{ofctl('dump-groups', fabric.bridge_a)}")
    finally:
        hub.stop(2.0)


def test_groups_meters_and_probes_round_trip_through_ovs(fabric: Fabric) -> None:
    # someone else's group and meter, there before us
    ofctl("add-group", fabric.bridge_a, f"group_id={FOREIGN_GROUP},type=indirect,bucket=output:2")
    ofctl("add-meter", fabric.bridge_a, f"meter={FOREIGN_METER},kbps,band=type=drop,rate=1000")

    seen = run_probe(fabric)

    # foreign entries read as None: the controller deletes them by id
    assert seen.groups_before == {FOREIGN_GROUP: None}
    assert seen.meters_before == {FOREIGN_METER: None}
    # ours read back equal to the plan, so the diff is empty
    assert seen.groups == {FOREIGN_GROUP: None, SPREAD.group_id: SPREAD, FLOOD.group_id: FLOOD}
    assert seen.meters == {FOREIGN_METER: None, LIMIT.meter_id: LIMIT}
    ours = {gid: group for gid, group in seen.groups.items() if group is not None}
    assert diff_groups(ours, [SPREAD, FLOOD]).empty
    assert InstalledFlow(TO_SPREAD.key, TO_SPREAD.cookie) in seen.flows
    # a modify replaces buckets and bands in place
    assert seen.groups_modified[SPREAD.group_id] == RESPREAD
    assert seen.meters_modified[LIMIT.meter_id] == RELIMIT
    assert seen.groups_after_delete == {SPREAD.group_id: RESPREAD, FLOOD.group_id: FLOOD}
    assert seen.meters_after_delete == {LIMIT.meter_id: RELIMIT}
    # OVS itself agrees on what it holds
    groups = ofctl("dump-groups", fabric.bridge_a)
    assert f"group_id={SPREAD.group_id},type=select" in groups
    assert "bucket=weight:3,watch_port:1,actions=output:1" in groups
    assert "meter=1 pktps burst" in ofctl("dump-meters", fabric.bridge_a)
    assert f"meter:1,group:{SPREAD.group_id}" in ofctl("dump-flows", fabric.bridge_a)
    # the probe sent out of A port 1 came back from B, in on B port 1
    assert seen.lldp_packet_in == (fabric.dpid_b, LINK_PORT, (fabric.dpid_a, LINK_PORT))
