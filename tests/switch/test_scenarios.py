"""The switch step against the simulated switch: connect, reconnect, ports, faults, detection,
audit.  Every message goes through the real encoders and decoders (``OfSwitch`` speaks bytes)."""

from __future__ import annotations

import ipaddress
import logging

from os_ken.ofproto import ofproto_v1_3 as v13
from os_ken.ofproto import ofproto_v1_3_parser as v13_parser

from controller.fabric.model import Host, Link, PortRef, Topology
from controller.openflow import wire
from controller.openflow.fabric_events import PortRates, SwitchPorts
from controller.openflow.observer import SyncReport
from controller.openflow.osken_internals import DATAPATH, encode
from controller.pipeline import tables
from controller.pipeline.desired import FabricInputs
from controller.pipeline.planner import LEARNED_COOKIE
from controller.switch.commands import (
    FabricInput,
    FlowsObserved,
    Reclassified,
    Report,
    Send,
)
from controller.switch.events import (
    Disconnected,
    FabricChanged,
    PolicyChanged,
    PolicySnapshot,
    Tick,
)
from tests.support.ofswitch import OfSwitch, PortSpec
from tests.switch.harness import DPID, StepHarness, policy, ports, rule

ONE = PolicySnapshot(policy([rule("a", 5001)]), 1)
TWO = PolicySnapshot(policy([rule("a", 5001), rule("b", 5002, "best-effort")]), 2)


def connected(snapshot: PolicySnapshot = ONE, phase: float | None = None) -> StepHarness:
    harness = StepHarness(snapshot)
    harness.connect(phase)
    harness.settle()
    return harness


def test_connect_reads_the_switch_plans_and_sends_one_batch_with_a_barrier() -> None:
    harness = StepHarness(ONE)
    harness.connect()
    kinds = [harness.switch.messages_received[i].multipart_type for i in range(4)]
    assert kinds == [
        v13.OFPMP_PORT_DESC,
        v13.OFPMP_FLOW,
        v13.OFPMP_GROUP_DESC,
        v13.OFPMP_METER_CONFIG,
    ]
    harness.settle()
    batches = [data for data in harness.sent if len(data) > 200]
    assert len(batches) == 1  # every mod and the barrier in one write
    assert harness.switch.messages_received[-1].type == v13.OFPT_BARRIER_REQUEST
    assert harness.holds_plan()
    assert harness.state.synced_once and harness.state.sync is None and not harness.state.pending
    assert harness.logs(logging.INFO) == [
        f"switch {DPID:016x} in sync (connect): +{harness.mods()} -0 =0 flows"
    ]
    reports = [c.report for c in harness.commands if isinstance(c, Report)]
    assert len(reports) == 1
    report = reports[0]
    assert isinstance(report, SyncReport) and report.policy_version == 1
    assert report.inputs == harness.inputs()
    assert report.flows == harness.expected().desired.flows
    assert [c.item for c in harness.commands if isinstance(c, FabricInput)] == [
        SwitchPorts(DPID, report.ports)
    ]


def test_every_request_has_its_own_xid_and_none_is_zero() -> None:
    harness = connected()
    harness.tell(PolicyChanged(TWO))
    harness.settle()
    xids = [m.xid for m in harness.switch.messages_received]
    assert 0 not in xids
    assert len(xids) == len(set(xids))


def test_a_reconnect_to_a_switch_holding_the_plan_sends_no_mod() -> None:
    first = connected()
    mods = first.mods()
    again = StepHarness(ONE, switch=first.switch)
    again.connect()
    again.settle()
    assert again.mods() == mods
    assert again.logs(logging.INFO) == [
        f"switch {DPID:016x} in sync (connect): +0 -0 ={mods} flows"
    ]
    assert again.holds_plan()


def test_a_reconnect_of_the_same_actor_state_reads_afresh() -> None:
    harness = connected()
    mods = harness.mods()
    harness.tell(Disconnected())
    assert harness.tell(Tick("audit", harness.state.epoch)) == []
    harness.connect()
    harness.settle()
    assert harness.mods() == mods and harness.holds_plan()


def test_a_policy_change_sends_only_the_difference() -> None:
    harness = connected()
    before = harness.mods()
    harness.tell(PolicyChanged(TWO))
    harness.settle()
    added = harness.mods() - before
    assert 0 < added < before
    assert harness.holds_plan()
    assert any("in sync (policy version 2)" in line for line in harness.logs())


def test_a_policy_change_in_the_middle_of_a_sync_is_one_more_sync_after_the_barrier() -> None:
    harness = StepHarness(ONE)
    harness.connect()
    harness.settle()
    harness.tell(PolicyChanged(TWO))  # the batch and barrier are out, not answered yet
    harness.tell(PolicyChanged(ONE))
    harness.tell(PolicyChanged(TWO))
    assert harness.state.wanted is None or harness.state.sync is not None
    sent_before = len(harness.sent)
    harness.settle()
    assert harness.holds_plan()
    summaries = {m.summary for m in harness.switch.mods_received}
    assert len(summaries) == harness.mods()  # no mod sent twice
    assert len(harness.sent) >= sent_before


def test_inputs_arriving_while_the_batch_is_out_wait_for_the_barrier() -> None:
    harness = StepHarness(ONE)
    harness.connect()
    # Deliver the four read replies: the batch goes out.
    for _ in range(4):
        harness.deliver_one()
    applying = harness.state.sync
    assert applying is not None and applying.applying is not None
    batches = len(harness.sent)
    harness.tell(PolicyChanged(TWO))
    assert len(harness.sent) == batches  # never two syncs in flight
    assert harness.state.wanted is not None
    harness.settle()
    assert harness.holds_plan()
    assert harness.state.wanted is None and harness.state.sync is None
    summaries = [m.summary for m in harness.switch.mods_received]
    assert len(summaries) == len(set(summaries))


def test_a_port_flap_adopts_the_port_without_reading_the_switch() -> None:
    harness = connected()
    received = len(harness.switch.messages_received)
    harness.inbox.append(harness.switch.port_down(1))
    harness.settle()
    name = f"s{DPID:x}-eth1"
    assert f"switch {DPID:016x} port {name} (1) modified, down" in harness.logs()
    assert harness.state.ports is not None
    assert [p.up for p in harness.state.ports if p.number == 1] == [False]
    # No port description nor table read: the normal pipeline does not change with a port.
    assert len(harness.switch.messages_received) == received
    harness.inbox.append(harness.switch.port_up(1))
    harness.settle()
    assert [p.up for p in harness.state.ports if p.number == 1] == [True]
    assert harness.holds_plan()
    ports_told = [c.item for c in harness.commands if isinstance(c, FabricInput)]
    assert len(ports_told) == 3


def test_a_rule_naming_a_port_follows_the_port_coming_and_going() -> None:
    named: dict[str, object] = {
        "name": "from3",
        "match": {"in_port": f"s{DPID:x}-eth3"},
        "class": "training",
    }
    snapshot = PolicySnapshot(policy([named]), 1)
    harness = connected(snapshot)
    assert any("name ports this switch lacks" in line for line in harness.logs(logging.WARNING))
    before = harness.mods()
    harness.inbox.append(harness.switch.add_port(PortSpec(3, f"s{DPID:x}-eth3")))
    harness.settle()
    assert harness.mods() > before and harness.holds_plan()
    harness.inbox.append(harness.switch.delete_port(3))
    harness.settle()
    assert harness.holds_plan()
    assert harness.state.ports is not None and 3 not in {p.number for p in harness.state.ports}


def test_an_error_reply_fails_the_sync_and_a_retry_repairs_it() -> None:
    switch = OfSwitch(DPID, ports(1, 2))
    switch.reject(v13.OFPT_FLOW_MOD, v13.OFPET_FLOW_MOD_FAILED, v13.OFPFMFC_TABLE_FULL)
    harness = StepHarness(ONE, switch=switch)
    harness.connect()
    harness.settle()
    errors = harness.logs(logging.ERROR)
    assert len(errors) == 1
    assert errors[0].startswith(
        f"switch {DPID:016x}: sync (connect) failed: 1 message(s) rejected, first: switch error"
        f" type={v13.OFPET_FLOW_MOD_FAILED} code={v13.OFPFMFC_TABLE_FULL}"
    )
    assert harness.state.installed is None
    assert [m.labels for m in harness.metrics("sync_failures")] == [(f"{DPID:016x}",)]
    assert not harness.holds_plan()
    harness.advance(1.0)
    assert harness.holds_plan()
    assert any("in sync (retry of connect): +1 -0" in line for line in harness.logs())


def test_a_barrier_that_never_comes_fails_at_its_deadline_and_the_retry_recovers() -> None:
    switch = OfSwitch(DPID, ports(1, 2))
    switch.drop_barriers(1)
    harness = StepHarness(ONE, switch=switch)
    harness.connect()
    harness.settle()
    assert harness.state.sync is not None  # waiting for the barrier
    mods = harness.mods()
    harness.advance(1.9)
    assert not harness.logs(logging.ERROR)
    harness.advance(0.2)  # past the 2 s reply timeout
    (error,) = harness.logs(logging.ERROR)
    assert "sync (connect) failed: no reply to xid" in error and "within 2s" in error
    harness.advance(1.0)  # the retry: a fresh read finds the flows there
    assert harness.holds_plan()
    assert harness.mods() == mods  # nothing sent twice
    assert any("in sync (retry of connect): +0 -0" in line for line in harness.logs())


def test_a_late_reply_after_a_failure_is_ignored() -> None:
    switch = OfSwitch(DPID, ports(1, 2))
    harness = StepHarness(ONE, switch=switch)
    switch.hold()
    harness.connect()
    harness.advance(2.5)  # every read is past its deadline
    assert harness.state.sync is None and harness.state.installed is None
    harness.release()
    harness.settle()  # the late answers match nothing pending
    assert harness.state.sync is None
    harness.advance(1.0)
    assert harness.holds_plan()


def test_the_audit_repairs_drift_and_counts_it() -> None:
    harness = connected(phase=0.5)
    victim = harness.expected().desired.flows[0]
    harness.switch.inject(wire.flow_delete(victim.key))
    assert not harness.holds_plan()
    harness.advance(0.6)
    assert harness.holds_plan()
    assert [m.labels for m in harness.metrics("drift_repairs")] == [(f"{DPID:016x}", "flows")]
    assert any("in sync (audit): +1 -0" in line for line in harness.logs())
    counts = [c for c in harness.commands if type(c).__name__ == "ClassCounts"]
    assert counts
    harness.advance(5.0)  # the next audit: nothing drifted, nothing logged
    assert len(harness.metrics("drift_repairs")) == 1


def test_an_audit_with_nothing_to_repair_logs_nothing() -> None:
    harness = connected(phase=0.5)
    lines = len(harness.logs())
    harness.advance(0.6)
    assert len(harness.logs()) == lines
    assert harness.metrics("drift_repairs") == []


def test_fabric_mode_installs_groups_and_meters_and_holds_them_on_reconnect() -> None:
    snapshot = PolicySnapshot(policy([rule("a", 5001)], fabric=True), 1)
    harness = connected(snapshot)
    assert harness.holds_plan()
    assert harness.switch.meters()  # the punt meter
    mods = harness.mods()
    again = StepHarness(snapshot, switch=harness.switch)
    again.connect()
    again.settle()
    assert again.mods() == mods


# ---- detection ---------------------------------------------------------------------------


def _count_entry(src: str, dst: str, sport: int, dport: int) -> bytes:
    """The counting entry OVS's learn action would add for a TCP flow."""
    match = v13_parser.OFPMatch(
        eth_type=0x0800, ip_proto=6, ipv4_src=src, ipv4_dst=dst, tcp_src=sport, tcp_dst=dport
    )
    mod = v13_parser.OFPFlowMod(
        datapath=DATAPATH,
        cookie=LEARNED_COOKIE,
        table_id=tables.COUNT,
        command=v13.OFPFC_ADD,
        priority=1,
        match=match,
        instructions=[],
    )
    return encode(mod)


def test_detection_demotes_an_elephant_and_releases_it_when_idle() -> None:
    snapshot = PolicySnapshot(policy(detection=True), 1)
    harness = connected(snapshot)
    harness.switch.inject(_count_entry("10.0.0.1", "10.0.0.2", 40000, 9000))

    def is_flow(flow: object) -> bool:
        return getattr(getattr(flow, "key", None), "table_id", None) == tables.COUNT

    sent = 0
    for _ in range(8):  # 1 Gbit/s-plus for 2 s: an elephant
        sent += 80_000_000
        harness.switch.set_flow_counters(is_flow, sent // 1500, sent, duration_s=harness.now + 0.01)
        harness.advance(0.25)
    changes = [c for c in harness.commands if isinstance(c, Reclassified)]
    assert len(changes) == 1 and changes[0].changes[0].to_class == "training"
    line = next(line for line in harness.logs() if "inference -> training" in line)
    assert line == (
        f"switch {DPID:016x}: tcp 10.0.0.1:40000 > 10.0.0.2:9000 inference -> training"
        " (bytes, 0.010 s after its first packet)"
    )
    assert harness.state.overrides
    assert harness.holds_plan()  # the override is on the switch
    assert any(isinstance(c, FlowsObserved) for c in harness.commands)
    assert harness.metrics("detections")
    harness.advance(6.0)  # idle past release_after
    releases = [c for c in harness.commands if isinstance(c, Reclassified)]
    assert len(releases) == 2 and releases[1].changes[0].to_class == "inference"
    assert not harness.state.overrides and harness.holds_plan()


def test_a_restarted_controller_keeps_the_elephants_it_finds_on_the_switch() -> None:
    snapshot = PolicySnapshot(policy(detection=True), 1)
    first = connected(snapshot)
    first.switch.inject(_count_entry("10.0.0.1", "10.0.0.2", 40000, 9000))
    sent = 0
    for _ in range(8):
        sent += 80_000_000
        first.switch.set_flow_counters(
            lambda f: f.key.table_id == tables.COUNT,
            sent // 1500,
            sent,
            duration_s=first.now + 0.01,
        )
        first.advance(0.25)
    assert first.state.overrides
    mods = first.mods()
    again = StepHarness(snapshot, switch=first.switch)
    again.connect()
    again.settle()
    assert again.mods() == mods  # nothing deleted, nothing re-sent
    assert dict(again.state.overrides) == dict(first.state.overrides)
    assert any("kept 1 elephant override(s)" in line for line in again.logs())


def test_port_counters_become_rates_for_the_fabric_owner() -> None:
    snapshot = PolicySnapshot(policy(fabric=True), 1)
    harness = connected(snapshot)
    harness.switch.set_port_counters(1, tx_bytes=0)
    harness.advance(0.01)
    harness.switch.set_port_counters(1, tx_bytes=125_000_000)
    harness.advance(1.0)
    rates = [
        c.item
        for c in harness.commands
        if isinstance(c, FabricInput) and isinstance(c.item, PortRates)
    ]
    assert any(rate.tx_bps.get(1, 0.0) > 0 for rate in rates)


def test_nothing_is_sent_after_disconnect() -> None:
    harness = StepHarness(ONE)
    harness.connect()
    harness.tell(Disconnected())
    assert not harness.state.pending
    harness.settle()  # replies to the old requests arrive: ignored
    harness.advance(20.0)
    sends = [c for c in harness.commands if isinstance(c, Send)]
    assert len(sends) == 4  # the four reads of the connect, nothing after
    assert harness.tell(PolicyChanged(TWO)) == []


# ---- fabric ------------------------------------------------------------------------------------


def _fabric(link_up: bool) -> FabricInputs:
    """This switch (port 1 to a host, ports 2 and 3 to a spine), a host behind the spine."""
    spine = 0x99
    links = [
        Link(PortRef(DPID, 2), PortRef(spine, 1)),
        Link(PortRef(spine, 1), PortRef(DPID, 2)),
    ]
    if link_up:
        links += [
            Link(PortRef(DPID, 3), PortRef(spine, 2)),
            Link(PortRef(spine, 2), PortRef(DPID, 3)),
        ]
    hosts = (
        Host(0x0A, PortRef(DPID, 1), int(ipaddress.IPv4Address("10.0.0.1"))),
        Host(0x0B, PortRef(spine, 3), int(ipaddress.IPv4Address("10.0.0.2"))),
    )
    topology = Topology(frozenset({DPID, spine}), frozenset(links), hosts)
    return FabricInputs(topology, frozenset({1}))


def test_fabric_inputs_replan_the_switch_and_a_link_down_moves_its_paths() -> None:
    snapshot = PolicySnapshot(policy([rule("a", 5001)], fabric=True), 1)
    harness = StepHarness(snapshot, ports(1, 2, 3))
    harness.connect()
    harness.settle()
    mods = harness.mods()
    harness.tell(FabricChanged(_fabric(link_up=True), "links"))
    harness.settle()
    assert harness.mods() > mods and harness.holds_plan()
    both = harness.expected().desired
    assert len(harness.switch.groups()) == 1  # two ways to the spine: a select group
    harness.tell(FabricChanged(_fabric(link_up=False), "link down"))
    harness.settle()
    assert harness.holds_plan()
    assert harness.expected().desired != both
    assert harness.switch.groups() == {}  # one way left: the group went after its flows
    assert any("in sync (link down)" in line for line in harness.logs())
    reports = [c.report for c in harness.commands if isinstance(c, Report)]
    assert reports[-1].inputs is not None and reports[-1].inputs.fabric == _fabric(link_up=False)


def test_fabric_changes_during_a_sync_coalesce_into_one_more() -> None:
    snapshot = PolicySnapshot(policy([rule("a", 5001)], fabric=True), 1)
    harness = StepHarness(snapshot, ports(1, 2, 3))
    harness.connect()
    harness.tell(FabricChanged(_fabric(link_up=True)))
    harness.tell(FabricChanged(_fabric(link_up=False)))
    harness.tell(FabricChanged(_fabric(link_up=True)))
    assert harness.state.wanted is not None and harness.state.wanted.reasons == ("fabric",)
    harness.settle()
    assert harness.holds_plan()
    summaries = [m.summary for m in harness.switch.mods_received]
    assert len(summaries) == len(set(summaries))


def test_the_step_is_deterministic_same_events_same_commands() -> None:
    def run() -> list[object]:
        snapshot = PolicySnapshot(policy(detection=True), 1)
        harness = connected(snapshot, phase=1.0)
        harness.switch.inject(_count_entry("10.0.0.1", "10.0.0.2", 40000, 9000))
        sent = 0
        for _ in range(8):
            sent += 80_000_000
            harness.switch.set_flow_counters(
                lambda f: f.key.table_id == tables.COUNT, sent // 1500, sent, duration_s=0.01
            )
            harness.advance(0.25)
        harness.tell(PolicyChanged(TWO))
        harness.advance(7.0)
        return list(harness.commands)

    first, second = run(), run()
    assert len(first) > 50
    assert first == second
