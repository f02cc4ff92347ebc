"""Fabric messages against a real Open vSwitch: groups, meters, packet-out, packet-in.

Two userspace bridges joined by a veth pair (A port 1 <-> B port 1); A has a
second port for a second watched bucket.  An os-ken app of this module's own
(run as a process, stopped by PID) installs a select group, a meter and a flow
using both on A, reads them back, modifies and deletes, then sends an LLDP
probe out of A and waits for B to hand it back as a packet-in.  The test
then checks that what came back decodes to exactly the planned entries: that
is what makes the controller's group and meter diffs converge to nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar, cast

import pytest
from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib import hub
from os_ken.ofproto import ofproto_v1_3

from controller.openflow import messages
from controller.openflow.frames import lldp_frame, parse_lldp
from controller.openflow.replies import ReplyWaiter
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

REPO = Path(__file__).resolve().parents[2]
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
    """What the probe app read from the switches, handed to the test as a pickle."""

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


# ---- the probe app (runs in its own process) -----------------------------------

_Handler = TypeVar("_Handler", bound=Callable[..., None])


def _on(event: Any, dispatchers: Any) -> Callable[[_Handler], _Handler]:
    """os-ken's ``set_ev_cls`` with a type, so mypy keeps checking the handlers."""
    return cast(Callable[[_Handler], _Handler], set_ev_cls(event, dispatchers))


class FabricProbe(app_manager.OSKenApp):  # type: ignore[misc]
    OFP_VERSIONS: ClassVar[list[int]] = [ofproto_v1_3.OFP_VERSION]
    dpid_a = 0
    dpid_b = 0
    out_path = Path()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.replies = ReplyWaiter()
        self.datapaths: dict[int, Any] = {}
        self.packet_ins: queue.Queue[tuple[int, int, bytes]] = queue.Queue()
        self.started = threading.Lock()

    @_on(ofp_event.EventOFPStateChange, MAIN_DISPATCHER)
    def state_change(self, ev: Any) -> None:
        self.datapaths[ev.datapath.id] = ev.datapath
        if {self.dpid_a, self.dpid_b} <= set(self.datapaths) and self.started.acquire(False):
            hub.spawn(self.run)

    @_on(
        [
            ofp_event.EventOFPGroupDescStatsReply,
            ofp_event.EventOFPMeterConfigStatsReply,
            ofp_event.EventOFPFlowStatsReply,
        ],
        MAIN_DISPATCHER,
    )
    def multipart(self, ev: Any) -> None:
        msg = ev.msg
        more = bool(msg.flags & msg.datapath.ofproto.OFPMPF_REPLY_MORE)
        self.replies.part(msg.datapath.id, msg.xid, msg.body, more)

    @_on(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def barrier(self, ev: Any) -> None:
        self.replies.part(ev.msg.datapath.id, ev.msg.xid, [], False)

    @_on(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def error(self, ev: Any) -> None:
        msg = ev.msg
        self.replies.fail(msg.datapath.id, msg.xid, f"type={msg.type} code={msg.code}")

    @_on(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def packet_in(self, ev: Any) -> None:
        self.packet_ins.put((ev.msg.datapath.id, *messages.packet_in_summary(ev.msg)))

    def request(self, datapath: Any, msg: Any) -> list[Any]:
        datapath.set_xid(msg)
        self.replies.expect(datapath.id, msg.xid)
        datapath.send_msg(msg)
        return self.replies.wait(datapath.id, msg.xid, 10.0)

    def apply(self, datapath: Any, *mods: Any) -> None:
        """Send, then a barrier; any switch error fails the run."""
        xids = []
        for mod in mods:
            datapath.set_xid(mod)
            self.replies.expect(datapath.id, mod.xid)
            xids.append(mod.xid)
            datapath.send_msg(mod)
        self.request(datapath, datapath.ofproto_parser.OFPBarrierRequest(datapath))
        errors = self.replies.settle(datapath.id, xids)
        if errors:
            raise RuntimeError(f"switch rejected: {errors}")

    def groups(self, datapath: Any) -> dict[int, GroupEntry | None]:
        descs = self.request(datapath, messages.group_desc_request(datapath))
        return {desc.group_id: messages.installed_group(desc) for desc in descs}

    def meters(self, datapath: Any) -> dict[int, MeterEntry | None]:
        configs = self.request(datapath, messages.meter_config_request(datapath))
        return {config.meter_id: messages.installed_meter(config) for config in configs}

    def run(self) -> None:
        try:
            observed = self.observe()
        except BaseException:
            self.out_path.write_text(traceback.format_exc())
            os._exit(1)
        # fields, not the Observed itself: this module is __main__ here, not in the test
        self.out_path.write_bytes(pickle.dumps(vars(observed)))
        os._exit(0)

    def observe(self) -> Observed:
        a, b = self.datapaths[self.dpid_a], self.datapaths[self.dpid_b]
        groups_before, meters_before = self.groups(a), self.meters(a)
        # meter and group before the flow that names them
        self.apply(
            a,
            messages.meter_add(a, LIMIT),
            messages.group_add(a, SPREAD),
            messages.group_add(a, FLOOD),
            messages.flow_add(a, TO_SPREAD),
        )
        groups, meters = self.groups(a), self.meters(a)
        stats = self.request(a, messages.flow_stats_request(a))
        flows = [messages.installed_flow(entry) for entry in stats]
        self.apply(a, messages.group_modify(a, RESPREAD), messages.meter_modify(a, RELIMIT))
        groups_modified, meters_modified = self.groups(a), self.meters(a)
        self.apply(
            a, messages.group_delete(a, FOREIGN_GROUP), messages.meter_delete(a, FOREIGN_METER)
        )
        groups_after_delete, meters_after_delete = self.groups(a), self.meters(a)
        self.apply(b, messages.flow_add(b, LLDP_TO_CONTROLLER))
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

    def probe_link(self, a: Any) -> tuple[int, int, tuple[int, int] | None]:
        """Probe until B answers: a fresh veth may drop the first frames."""
        probe = lldp_frame(self.dpid_a, LINK_PORT, PROBE_MAC)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            a.send_msg(messages.packet_out(a, [LINK_PORT], probe))
            with contextlib.suppress(queue.Empty):
                while True:
                    dpid, in_port, data = self.packet_ins.get(timeout=1.0)
                    if dpid == self.dpid_b:
                        return dpid, in_port, parse_lldp(data)
        raise RuntimeError("no packet-in from bridge B within 15 s")


def main() -> None:
    """Run the probe app: ``test_fabric_ovs.py PORT DPID_A DPID_B OUT``."""
    from os_ken import cfg
    from os_ken.controller import controller as _ofp_options  # noqa: F401  (ofp-* options)

    args = argparse.ArgumentParser()
    args.add_argument("port", type=int)
    args.add_argument("dpid_a", type=lambda text: int(text, 16))
    args.add_argument("dpid_b", type=lambda text: int(text, 16))
    args.add_argument("out", type=Path)
    options = args.parse_args()
    FabricProbe.dpid_a, FabricProbe.dpid_b = options.dpid_a, options.dpid_b
    FabricProbe.out_path = options.out
    cfg.CONF(
        args=["--ofp-listen-host", "127.0.0.1", "--ofp-tcp-listen-port", str(options.port)],
        project="os_ken",
    )
    manager = app_manager.AppManager.get_instance()
    manager.load_apps([__name__])
    services = manager.instantiate_apps(**manager.create_contexts())
    hub.joinall(services)


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


def run_probe(fabric: Fabric, out: Path) -> Observed:
    """Start the probe app, wait for its result, stop it by PID whatever happens."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    log = out.with_suffix(".log")
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__)),
                str(fabric.ofp_port),
                f"{fabric.dpid_a:016x}",
                f"{fabric.dpid_b:016x}",
                str(out),
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
        try:
            code = process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
                process.wait()
    if code != 0:
        detail = out.read_text() if out.exists() else ""
        pytest.fail(
            f"probe app exited with {code}:\n{detail}\n--- log ---\n{log.read_text()[-4000:]}\n"
            f"--- groups ---\n{ofctl('dump-groups', fabric.bridge_a)}"
        )
    return Observed(**pickle.loads(out.read_bytes()))


def test_groups_meters_and_probes_round_trip_through_ovs(fabric: Fabric, tmp_path: Path) -> None:
    # someone else's group and meter, there before us
    ofctl("add-group", fabric.bridge_a, f"group_id={FOREIGN_GROUP},type=indirect,bucket=output:2")
    ofctl("add-meter", fabric.bridge_a, f"meter={FOREIGN_METER},kbps,band=type=drop,rate=1000")

    seen = run_probe(fabric, tmp_path / "observed.pickle")

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


if __name__ == "__main__":
    main()
