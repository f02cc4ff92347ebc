"""The pure step with hand-built events: requests and xids, replies in parts, deadlines,
errors, coalescing, disconnect.  No switch: the replies are packed by hand."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from os_ken.ofproto import ofproto_v1_3 as v13

from controller.openflow.framing import header
from controller.switch import codec
from controller.switch.commands import Command, FabricInput, Gone, Log, Metric, Send, Timer
from controller.switch.events import (
    Connected,
    Disconnected,
    PolicyChanged,
    PolicySnapshot,
    Received,
    Tick,
)
from controller.switch.state import MAX_XID, Ask, SwitchConfig, SwitchState, initial_state
from controller.switch.step import step
from tests.switch import wire_bytes
from tests.switch.harness import policy, rule

CONFIG = SwitchConfig(manage_qos=False, reply_timeout_s=2.0, audit_interval_s=5.0)
ONE = PolicySnapshot(policy([rule("a", 5001)]), 1)
TWO = PolicySnapshot(policy([rule("a", 5001), rule("b", 5002)]), 2)
DPID = 7


def sends(commands: list[Command]) -> list[bytes]:
    return [c.data for c in commands if isinstance(c, Send)]


def logs(commands: list[Command]) -> list[str]:
    return [c.msg % c.args for c in commands if isinstance(c, Log)]


def connect(state: SwitchState | None = None) -> tuple[SwitchState, list[Command]]:
    return step(state or initial_state(DPID, ONE), Connected(0.0, 100.0, 0.25), CONFIG)


def xid_of(state: SwitchState, ask: Ask) -> int:
    (xid,) = [x for x, r in state.pending.items() if r.ask is ask]
    return xid


def answer_reads(state: SwitchState, now: float = 0.1) -> tuple[SwitchState, list[Command]]:
    """Ports 1 and 2, empty tables."""
    body = wire_bytes.port(1, "eth1") + wire_bytes.port(2, "eth2")
    out: list[Command] = []
    for data in (
        wire_bytes.multipart(xid_of(state, Ask.PORTS), v13.OFPMP_PORT_DESC, body),
        wire_bytes.multipart(xid_of(state, Ask.FLOWS), v13.OFPMP_FLOW),
        wire_bytes.multipart(xid_of(state, Ask.GROUPS), v13.OFPMP_GROUP_DESC),
        wire_bytes.multipart(xid_of(state, Ask.METERS), v13.OFPMP_METER_CONFIG),
    ):
        state, commands = step(state, Received(data, now), CONFIG)
        out += commands
    return state, out


def test_connect_asks_ports_tables_groups_and_meters_each_with_its_xid() -> None:
    state, commands = connect()
    requests = sends(commands)
    assert [header(r)[3] for r in requests] == [1, 2, 3, 4]
    assert [r[8:10] for r in requests] == [
        v13.OFPMP_PORT_DESC.to_bytes(2, "big"),
        v13.OFPMP_FLOW.to_bytes(2, "big"),
        v13.OFPMP_GROUP_DESC.to_bytes(2, "big"),
        v13.OFPMP_METER_CONFIG.to_bytes(2, "big"),
    ]
    assert {r.deadline for r in state.pending.values()} == {2.0}
    timers = [c for c in commands if isinstance(c, Timer)]
    assert Timer(0.25, Tick("audit", 1, 0.25)) in timers  # the phase the owner gave
    assert Timer(2.0, Tick("deadline", 1, 2.0)) in timers
    assert state.sync is not None and state.sync.reason == "connect"


def test_the_plan_goes_out_as_one_write_ending_with_a_barrier() -> None:
    state, _ = connect()
    state, commands = answer_reads(state)
    (batch,) = sends(commands)
    messages = list(codec.split(batch))
    assert header(messages[-1])[1] == v13.OFPT_BARRIER_REQUEST
    xids = [header(m)[3] for m in messages]
    assert xids == list(range(5, 5 + len(messages)))
    assert state.installed is None  # unknown until the barrier
    assert any(isinstance(c, FabricInput) for c in commands)
    state, commands = step(state, Received(wire_bytes.barrier_reply(xids[-1]), 0.2), CONFIG)
    assert state.installed is not None and state.sync is None and state.synced_once
    assert logs(commands) == [
        f"switch {DPID:016x} in sync (connect): +{len(messages) - 1} -0 =0 flows"
    ]
    assert Metric("sync_seconds", "observe", 0.2) in commands
    # Detection and port counters start with the first confirmed plan.
    assert Timer(0.0, Tick("detect", 1, 0.2)) in commands


def test_a_multipart_reply_is_taken_when_its_last_part_is_in() -> None:
    state, _ = connect()
    xid = xid_of(state, Ask.PORTS)
    first = wire_bytes.multipart(xid, v13.OFPMP_PORT_DESC, wire_bytes.port(1, "eth1"), more=True)
    state, commands = step(state, Received(first, 0.1), CONFIG)
    assert commands == [] and len(state.pending[xid].parts) == 1
    last = wire_bytes.multipart(xid, v13.OFPMP_PORT_DESC, wire_bytes.port(2, "eth2"))
    state, _ = step(state, Received(last, 0.1), CONFIG)
    assert xid not in state.pending
    assert state.sync is not None and state.sync.ports is not None
    assert [p.number for p in state.sync.ports] == [1, 2]


def test_a_read_past_its_deadline_fails_the_sync_and_a_timer_retries_it() -> None:
    state, _ = connect()
    state, commands = step(state, Tick("deadline", 1, 1.9), CONFIG)
    assert commands == [] and len(state.pending) == 4
    state, commands = step(state, Tick("deadline", 1, 2.0), CONFIG)
    assert logs(commands) == [
        f"switch {DPID:016x}: sync (connect) failed: no reply to xid 0x1 within 2s; will retry"
    ]
    assert not state.pending and state.sync is None and state.installed is None
    assert Timer(1.0, Tick("retry", 1, 3.0)) in commands
    assert Metric("sync_failures", "inc", 1, (f"{DPID:016x}",)) in commands
    state, commands = step(state, Tick("retry", 1, 3.0), CONFIG)
    assert len(sends(commands)) == 4
    assert state.sync is not None and state.sync.reason == "retry of connect"


def test_an_error_for_a_read_fails_the_sync_at_once() -> None:
    state, _ = connect()
    state, commands = step(state, Received(wire_bytes.error(3), 0.1), CONFIG)
    (line,) = logs(commands)
    assert line.endswith(
        f"sync (connect) failed: switch error type={v13.OFPET_BAD_REQUEST} code=1 for xid 0x3;"
        " will retry"
    )
    # The other reads' answers are no one's now.
    state, commands = step(
        state, Received(wire_bytes.multipart(1, v13.OFPMP_PORT_DESC), 0.1), CONFIG
    )
    assert commands == [] and state.sync is None


def test_an_error_for_no_request_of_ours_is_logged() -> None:
    state, _ = connect()
    state, commands = step(state, Received(wire_bytes.error(0x99), 0.1), CONFIG)
    assert logs(commands) == [
        f"switch {DPID:016x}: switch error type={v13.OFPET_BAD_REQUEST} code=1 for xid 0x99"
    ]
    assert state.sync is not None


def test_errors_for_batch_messages_fail_the_sync_at_the_barrier() -> None:
    state, _ = connect()
    state, commands = answer_reads(state)
    messages = list(codec.split(sends(commands)[0]))
    xids = [header(m)[3] for m in messages]
    state, commands = step(state, Received(wire_bytes.error(xids[1]), 0.15), CONFIG)
    assert commands == []
    state, commands = step(state, Received(wire_bytes.barrier_reply(xids[-1]), 0.2), CONFIG)
    (line,) = logs(commands)
    assert "sync (connect) failed: 1 message(s) rejected, first: switch error" in line
    assert state.installed is None


def test_changes_while_a_sync_is_out_coalesce_into_one_more() -> None:
    state, _ = connect()
    state, commands = step(state, PolicyChanged(TWO, 0.05), CONFIG)
    state, more = step(state, PolicyChanged(ONE, 0.06), CONFIG)
    assert sends(commands + more) == []  # never two syncs in flight
    assert state.wanted is not None
    assert state.wanted.reasons == ("policy version 2", "policy version 1")
    state, commands = answer_reads(state)
    (batch,) = sends(commands)  # planned with the newest inputs (ONE)
    barrier = header(list(codec.split(batch))[-1])[3]
    state, commands = step(state, Received(wire_bytes.barrier_reply(barrier), 0.2), CONFIG)
    # The follow-up sync plans the same inputs: nothing to send, nothing to say.
    assert sends(commands) == [] and state.wanted is None and state.sync is None
    assert logs(commands) == [
        f"switch {DPID:016x} in sync (connect): +{len(list(codec.split(batch))) - 1} -0 =0 flows"
    ]


def test_a_jobs_only_snapshot_is_a_jobs_sync() -> None:
    state, _ = connect()
    jobs_only = PolicySnapshot(ONE.policy, ONE.version, (), 3)
    state, _ = step(state, PolicyChanged(jobs_only, 0.05), CONFIG)
    assert state.wanted is not None and state.wanted.reasons == ("jobs",)


def test_port_status_is_logged_and_adopted_at_the_next_sync() -> None:
    state, _ = connect()
    status = wire_bytes.port_status(v13.OFPPR_ADD, wire_bytes.port(3, "eth3"))
    state, commands = step(state, Received(status, 0.05), CONFIG)
    assert logs(commands) == [f"switch {DPID:016x} port eth3 (3) added, up"]
    assert state.wanted is not None and 3 in state.wanted.ports


def test_ticks_of_an_earlier_connection_are_ignored() -> None:
    state, _ = connect()
    state, _ = step(state, Disconnected(now=0.5), CONFIG)
    state, _ = connect(state)
    assert state.epoch == 2
    before = state
    state, commands = step(state, Tick("audit", 1, 5.0), CONFIG)
    assert commands == [] and state is before


def test_nothing_but_storing_inputs_while_disconnected() -> None:
    state = initial_state(DPID, ONE)
    state, commands = step(state, PolicyChanged(TWO, 1.0), CONFIG)
    assert commands == [] and state.snapshot is TWO and state.wanted is None
    state, commands = step(state, Received(wire_bytes.barrier_reply(1), 1.0), CONFIG)
    assert commands == []


def test_a_disconnect_drops_every_request() -> None:
    state, _ = connect()
    state, commands = step(state, Disconnected(now=0.5), CONFIG)
    assert commands == [Gone(DPID)] and not state.pending and state.sync is None
    assert not state.connected


def test_a_connection_taken_over_says_no_goodbye() -> None:
    state, _ = connect()
    state, commands = step(state, Disconnected(gone=False, now=0.5), CONFIG)
    assert commands == [] and not state.connected


def test_xids_never_wrap_inside_a_batch_and_are_never_zero() -> None:
    state, _ = connect(initial_state(DPID, ONE))
    state = state.__class__(**{**state.__dict__, "next_xid": MAX_XID - 2})
    state, commands = answer_reads(state)
    xids = [header(m)[3] for m in codec.split(sends(commands)[0])]
    assert xids[0] == 1 and xids == sorted(xids)


def test_an_undecodable_message_is_logged_and_dropped() -> None:
    state, _ = connect()
    state2, commands = step(state, Received(b"\x04\x00", 0.1), CONFIG)
    assert state2 is state
    (line,) = logs(commands)
    assert line.startswith(f"switch {DPID:016x}: message not decoded: ")
    assert [c.level for c in commands if isinstance(c, Log)] == [logging.WARNING]


def test_port_counters_become_rates() -> None:
    fabric = PolicySnapshot(policy(fabric=True), 1)
    state, _ = connect(initial_state(DPID, fabric))
    state, commands = step(state, Tick("ports", 1, 1.0), CONFIG)
    xid = xid_of(state, Ask.PORT_STATS)
    body = wire_bytes.port_stats(1, 1000) + wire_bytes.port_stats(v13.OFPP_LOCAL, 5)
    state, commands = step(
        state, Received(wire_bytes.multipart(xid, v13.OFPMP_PORT_STATS, body), 1.01), CONFIG
    )
    assert not any(isinstance(c, FabricInput) for c in commands)  # one reading: no rate yet
    state, commands = step(state, Tick("ports", 1, 2.0), CONFIG)
    xid = xid_of(state, Ask.PORT_STATS)
    body = wire_bytes.port_stats(1, 126_000)
    state, commands = step(
        state, Received(wire_bytes.multipart(xid, v13.OFPMP_PORT_STATS, body), 2.5), CONFIG
    )
    (told,) = [c.item for c in commands if isinstance(c, FabricInput)]
    assert told.tx_bps == {1: 8 * 125_000 / 1.0}  # type: ignore[union-attr]


def test_a_poll_not_answered_in_time_is_a_warning() -> None:
    fabric = PolicySnapshot(policy(fabric=True), 1)
    state, _ = connect(initial_state(DPID, fabric))
    state, commands = step(state, Tick("ports", 1, 1.0), CONFIG)
    state, commands = step(state, Tick("deadline", 1, 3.0), CONFIG)
    assert any(
        line.startswith(f"switch {DPID:016x}: port counters not read: no reply to xid")
        for line in logs(commands)
    )


def confirmed(state: SwitchState) -> tuple[SwitchState, list[Command]]:
    state, commands = answer_reads(state)
    batches = sends(commands)
    if batches:
        barrier = header(list(codec.split(batches[0]))[-1])[3]
        state, more = step(state, Received(wire_bytes.barrier_reply(barrier), 0.2), CONFIG)
        commands += more
    return state, commands


def test_a_new_job_set_is_not_a_new_policy_for_apply_seconds() -> None:
    state, _ = connect()
    state, commands = confirmed(state)
    assert [m.name for m in commands if isinstance(m, Metric)].count("apply_seconds") == 1
    jobs_only = PolicySnapshot(ONE.policy, ONE.version, (), 1, since=ONE.since)
    state, commands = step(state, PolicyChanged(jobs_only, 1.0), CONFIG)
    assert "apply_seconds" not in [m.name for m in commands if isinstance(m, Metric)]
    state, commands = step(state, PolicyChanged(TWO, 2.0), CONFIG)
    barrier = header(list(codec.split(sends(commands)[0]))[-1])[3]
    state, commands = step(state, Received(wire_bytes.barrier_reply(barrier), 2.5), CONFIG)
    assert Metric("apply_seconds", "observe", 2.5 - TWO.since) in commands


def test_after_a_failure_any_sync_reads_ports_and_tables_again() -> None:
    state, _ = connect()
    state, _ = confirmed(state)
    state, _ = step(state, PolicyChanged(TWO, 1.0), CONFIG)
    state, _ = step(state, Tick("deadline", 1, 5.0), CONFIG)  # the barrier never came
    assert state.installed is None
    state, commands = step(state, PolicyChanged(ONE, 5.1), CONFIG)
    assert len(sends(commands)) == 4  # ports, flows, groups, meters


def test_an_event_of_a_later_issue_changes_nothing() -> None:
    @dataclass(frozen=True)
    class RoleChanged:
        role: str
        now: float = 0.0

    state, _ = connect()
    after, commands = step(state, RoleChanged("slave"), CONFIG)  # type: ignore[arg-type]
    assert after is state and commands == []
