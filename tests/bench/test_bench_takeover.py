"""The pure parts of flowlane_bench.bench_takeover: reading dump-flows, the canary, the
stale-master count from a resumed controller's log. No Open vSwitch needed."""

from __future__ import annotations

from flowlane_bench import bench_takeover
from flowlane_bench.bench_takeover import Canary, flows_of, pick_canary, stale_counts

DUMP = "\n".join(
    [
        "OFPST_FLOW reply (OF1.3) (xid=0x2):",
        " cookie=0x10, duration=0.010s, table=0, n_packets=0, n_bytes=0,"
        " priority=4196,ip,nw_dst=10.0.0.1 actions=drop",
        " cookie=0x10, duration=2.5s, table=0, n_packets=3, n_bytes=180, priority=1"
        " actions=goto_table:2",
        " cookie=0x20, duration=1.000s, table=2, n_packets=0, n_bytes=0, send_flow_rem"
        " priority=9000,udp actions=NORMAL",
    ]
)

TAG = "0000b90000000000"


def test_dump_lines_become_entries_with_their_age() -> None:
    assert flows_of(DUMP) == [
        (0.010, Canary(0, 4196, "ip,nw_dst=10.0.0.1")),
        (2.5, Canary(0, 1, "")),
        (1.0, Canary(2, 9000, "udp")),
    ]
    assert pick_canary(DUMP) == Canary(0, 4196, "ip,nw_dst=10.0.0.1")
    assert Canary(0, 1, "").spec == "table=0,priority=1"
    assert pick_canary("OFPST_FLOW reply (OF1.3) (xid=0x2):\n") is None


def test_a_resumed_master_s_writes_count_until_it_is_granted_again() -> None:
    log = "\n".join(
        [
            f"switch {TAG}: stepping down (was master, generation 5): a write was refused",
            f"switch {TAG} in sync (audit): +1 -0 =4 flows",  # accepted while stale: counted
            f"switch {TAG} in sync (audit): +0 -0 =5 flows",
            f"switch {TAG}: master (generation 9)",
            f"switch {TAG} in sync (mastership): +1 -0 =4 flows",  # legitimate again
            "switch 0000b90000000001 in sync (audit): +3 -0 =4 flows",  # not one of its own
        ]
    )
    assert stale_counts(log, [TAG]) == (1, 1)


def test_figures_are_in_milliseconds() -> None:
    figures = bench_takeover.summary([0.05, 0.1, 0.2])
    assert figures == {"p50": 100.0, "p99": 200.0, "max": 200.0, "count": 3.0}
    assert bench_takeover.summary([]) == {}
