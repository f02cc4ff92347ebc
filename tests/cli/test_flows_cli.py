"""`flowlane flows` and `flowlane events [--follow]` on a real API."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import redis
from typer.testing import CliRunner, Result

import controller.cli.flows as flows_cli
from controller.cli.flows import (
    event_line,
    event_summary,
    five_tuple,
    human_age,
    human_bytes,
    human_rate,
)
from controller.cli.main import app
from controller.store.events import EventStore
from controller.store.flows import FlowRecord, FlowStore
from controller.store.switches import SwitchReport, SwitchStore

REPO = Path(__file__).resolve().parents[2]
DEFAULT_POLICY = REPO / "policies" / "default.yaml"
WIDE = {"COLUMNS": "250", "USER": "tester"}

FLOW = FlowRecord(
    switch="000000000000002a",
    eth_type=0x0800,
    ip_proto=6,
    src="10.0.0.1",
    dst="10.0.0.2",
    src_port=40000,
    dst_port=8000,
    traffic_class="inference",
    why="rule:triton",
    bytes=1500,
    rate_bps=12_000.0,
    first_seen=1000.0,
    last_seen=1001.5,
)


def flat(text: str) -> str:
    return " ".join(text.split())


def invoke(runner: CliRunner, api_url: str, *args: str) -> Result:
    result = runner.invoke(app, list(args), env={**WIDE, "FLOWLANE_API": api_url})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result


@pytest.fixture
def events(redis_client: redis.Redis) -> EventStore:
    return EventStore(redis_client)


@pytest.fixture
def fabric(redis_client: redis.Redis) -> FlowStore:
    """Two live switches, 0x2a and 0x10, with flows; a third whose controller is gone."""
    switches = SwitchStore(redis_client)
    switches.heartbeat("ctl-1")
    switches.heartbeat("ctl-dead", now=1.0)
    for dpid, controller in ((0x2A, "ctl-1"), (0x10, "ctl-1"), (0x3, "ctl-dead")):
        switches.report(SwitchReport(dpid, controller, time.time(), 1))
    store = FlowStore(redis_client)
    now = time.time()
    store.publish(
        0x2A,
        [
            replace(FLOW, first_seen=now - 75),
            replace(
                FLOW,
                ip_proto=17,
                src_port=5000,
                dst_port=4791,
                traffic_class="training",
                why="job:train-1",
                bytes=9_000_000,
                rate_bps=8e8,
                first_seen=now - 3700,
            ),
        ],
    )
    store.publish(0x10, [replace(FLOW, switch="0000000000000010", bytes=50_000, why="default")])
    store.publish(0x3, [replace(FLOW, switch="0000000000000003", bytes=10**12)])
    return store


# --------------------------------------------------------------------------------------------
# flows
# --------------------------------------------------------------------------------------------


def test_no_flows(runner: CliRunner, api_url: str) -> None:
    result = invoke(runner, api_url, "flows")
    assert result.exit_code == 0
    assert "no tracked flow matches" in result.stdout


def test_the_flows_table(runner: CliRunner, api_url: str, fabric: FlowStore) -> None:
    result = invoke(runner, api_url, "flows")
    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if "0000000000" in line]
    assert len(rows) == 3  # not the switch of the dead controller
    first, second, third = (flat(row) for row in rows)
    for expected in (
        "000000000000002a",
        "udp 10.0.0.1:5000 -> 10.0.0.2:4791",
        "training",
        "job:train-1",
        "9MB",
        "800Mbit/s",
        "1h 1m",
    ):
        assert expected in first, expected
    assert "0000000000000010" in second and "50KB" in second and "default" in second
    for expected in ("tcp 10.0.0.1:40000 -> 10.0.0.2:8000", "rule:triton", "1.5KB", "1m 15s"):
        assert expected in third, expected


def test_flow_filters(runner: CliRunner, api_url: str, fabric: FlowStore) -> None:
    def switches(*args: str) -> list[str]:
        result = invoke(runner, api_url, "flows", "--json", *args)
        assert result.exit_code == 0, result.output
        return [f"{f['switch'][-2:]} {f['bytes']}" for f in json.loads(result.stdout)["flows"]]

    assert switches() == ["2a 9000000", "10 50000", "2a 1500"]
    assert switches("--class", "training") == ["2a 9000000"]
    assert switches("--switch", "0x10") == ["10 50000"]
    assert switches("--switch", "42") == ["2a 9000000", "2a 1500"]
    assert switches("--min-bytes", "2000") == ["2a 9000000", "10 50000"]
    assert switches("--limit", "1") == ["2a 9000000"]


def test_a_bad_switch_is_refused_with_its_path(runner: CliRunner, api_url: str) -> None:
    result = invoke(runner, api_url, "flows", "--switch", "s1")
    assert result.exit_code == 1
    assert "invalid query: 1 error(s) query.switch: String should match pattern" in flat(
        result.stderr
    )


def test_the_cli_checks_its_own_bounds(runner: CliRunner, api_url: str) -> None:
    assert invoke(runner, api_url, "flows", "--limit", "0").exit_code == 2
    assert invoke(runner, api_url, "flows", "--min-bytes", "-1").exit_code == 2


# --------------------------------------------------------------------------------------------
# events
# --------------------------------------------------------------------------------------------


@pytest.fixture
def history(runner: CliRunner, api_url: str) -> str:
    """A policy version and a job registered, through the CLI: two events."""
    assert (
        invoke(runner, api_url, "policy", "apply", str(DEFAULT_POLICY), "--no-wait").exit_code == 0
    )
    added = invoke(
        runner, api_url, "jobs", "add", "train-1", "--class", "training", "-e", "10.0.0.0/24:4791"
    )
    assert added.exit_code == 0, added.output
    return api_url


def test_no_events(runner: CliRunner, api_url: str) -> None:
    result = invoke(runner, api_url, "events")
    assert (result.exit_code, result.stdout.strip()) == (0, "no events")
    after = invoke(runner, api_url, "events", "--since", "5-0")
    assert after.stdout.strip() == "no events after 5-0"


def test_events_oldest_first(runner: CliRunner, history: str) -> None:
    result = invoke(runner, history, "events")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert flat(lines[0]).endswith("policy version 1 by cli-admin")
    assert flat(lines[1]).endswith("job train-1 registered: class training, 10.0.0.0/24:4791")


def test_events_kind_since_and_json(runner: CliRunner, history: str) -> None:
    body = json.loads(invoke(runner, history, "events", "--json").stdout)
    first, second = body["events"]
    assert body["last_id"] == second["id"]
    jobs = invoke(runner, history, "events", "--kind", "job").stdout.splitlines()
    assert len(jobs) == 1 and "train-1" in jobs[0]
    after = invoke(runner, history, "events", "--since", first["id"]).stdout.splitlines()
    assert len(after) == 1 and "train-1" in after[0]


def test_a_full_page_says_more_may_follow(runner: CliRunner, history: str) -> None:
    result = invoke(runner, history, "events", "--limit", "1", "--json")
    first_id = json.loads(result.stdout)["last_id"]
    result = invoke(runner, history, "events", "--limit", "1")
    assert (
        result.stdout.splitlines()[-1] == f"(more may follow: flowlane events --since {first_id})"
    )


def test_a_bad_since_is_refused(runner: CliRunner, api_url: str) -> None:
    for args in (["--since", "yesterday"], ["--since", "yesterday", "--follow"]):
        result = invoke(runner, api_url, "events", *args)
        assert result.exit_code == 1
        assert "invalid query: 1 error(s) query.since:" in flat(result.stderr)


def test_follow_prints_new_events_as_they_come(
    runner: CliRunner, history: str, events: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits: list[float] = []

    def sleep(seconds: float) -> None:  # between polls, something happens
        waits.append(seconds)
        events.append("job", {"name": f"j{len(waits)}", "op": "deleted"})

    monkeypatch.setattr(flows_cli, "sleep", sleep)
    result = invoke(runner, history, "events", "--follow", "--max-polls", "3")
    assert result.exit_code == 0, result.output
    lines = [flat(line) for line in result.stdout.splitlines()]
    assert [line.split(" ", 2)[-1] for line in lines] == [
        "policy version 1 by cli-admin",
        "job train-1 registered: class training, 10.0.0.0/24:4791",
        "job j1 deleted",
        "job j2 deleted",
    ]
    assert waits == [0.5, 0.5]  # every 0.5 s; the third poll ended it


def test_follow_reads_a_full_page_again_at_once(
    runner: CliRunner, history: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits: list[float] = []
    monkeypatch.setattr(flows_cli, "sleep", waits.append)
    result = invoke(runner, history, "events", "-f", "--limit", "1", "--max-polls", "4", "--json")
    assert result.exit_code == 0, result.output
    kinds = [json.loads(line)["kind"] for line in result.stdout.splitlines()]
    assert kinds == ["policy", "job"]  # one JSON event per line
    assert waits == [0.5]  # polls 1 and 2 read full pages: only the empty poll 3 waited


def test_ctrl_c_ends_follow_normally(
    runner: CliRunner, history: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(flows_cli, "sleep", interrupted)
    result = invoke(runner, history, "events", "--follow", "--kind", "job")
    assert result.exit_code == 0
    assert "job train-1 registered" in flat(result.stdout)
    assert "policy" not in result.stdout


# --------------------------------------------------------------------------------------------
# rendering, alone
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flow", "text"),
    [
        ({}, "tcp 10.0.0.1:40000 -> 10.0.0.2:8000"),
        ({"ip_proto": 1}, "icmp 10.0.0.1 -> 10.0.0.2"),
        ({"ip_proto": 132}, "proto 132 10.0.0.1 -> 10.0.0.2"),
        (
            {"eth_type": 0x86DD, "ip_proto": 17, "src": "fe80::1", "dst": "fe80::2"},
            "udp [fe80::1]:40000 -> [fe80::2]:8000",
        ),
        ({"eth_type": 0x0806, "ip_proto": 0}, "eth 0x0806 10.0.0.1 -> 10.0.0.2"),
    ],
)
def test_five_tuple(flow: dict[str, Any], text: str) -> None:
    assert five_tuple(FlowRecord.from_dict({**FLOW.to_dict(), **flow})) == text


def test_human_units() -> None:
    assert [human_bytes(n) for n in (0, 999, 1500, 9_000_000, 2.5e12, None)] == [
        "0B",
        "999B",
        "1.5KB",
        "9MB",
        "2.5TB",
        "-",
    ]
    assert [human_rate(r) for r in (12_000.0, 8e8, 0, "x")] == [
        "12Kbit/s",
        "800Mbit/s",
        "0bit/s",
        "-",
    ]
    assert [human_age(s) for s in (-3, 0, 59.9, 75, 3700, 90_061)] == [
        "0s",
        "0s",
        "59s",
        "1m 15s",
        "1h 1m",
        "1d 1h",
    ]


@pytest.mark.parametrize(
    ("event", "text"),
    [
        (
            {"kind": "policy", "version": 3, "author": "cy", "rollback_of": 1, "comment": "oops"},
            "version 3 by cy, a rollback to version 1: oops",
        ),
        (  # a rollback's default comment repeats the note: said once
            {
                "kind": "policy",
                "version": 3,
                "author": "cy",
                "rollback_of": 1,
                "comment": "rollback to version 1",
            },
            "version 3 by cy, a rollback to version 1",
        ),
        ({"kind": "policy", "version": 2, "author": "cy", "comment": "x"}, "version 2 by cy: x"),
        (  # released by a controller that sent no class and a zero rate: no blanks
            {
                "kind": "placement",
                "op": "released",
                "flow": "udp 10.0.0.1:5000 > 10.0.0.2:4791",
                "class": "",
                "rate_bps": 0.0,
                "demand_bps": 0.0,
                "path": "s1-eth3 > s11-eth2",
                "reason": "gone",
            },
            "udp 10.0.0.1:5000 > 10.0.0.2:4791 released: s1-eth3 > s11-eth2 (gone)",
        ),
        (
            {
                "kind": "placement",
                "op": "released",
                "flow": "udp 10.0.0.1:5000 > 10.0.0.2:4791",
                "class": "training",
                "rate_bps": 9.5e8,
                "path": "s1-eth3 > s11-eth2",
                "reason": "gone",
            },
            "udp 10.0.0.1:5000 > 10.0.0.2:4791 [training, 950Mbit/s] released:"
            " s1-eth3 > s11-eth2 (gone)",
        ),
        ({"kind": "job", "name": "t", "op": "expired"}, "t expired"),
        (
            {
                "kind": "reclassified",
                "switch": "000000000000002a",
                "flow": "tcp 10.0.0.1:1 > 10.0.0.2:2",
                "from": "inference",
                "to": "training",
                "reason": "bytes",
                "bytes": 10,
            },
            "switch 000000000000002a tcp 10.0.0.1:1 > 10.0.0.2:2: inference -> training"
            " (reason=bytes bytes=10)",
        ),
        ({"kind": "new", "id": "1-0", "time": 1.0, "a": 1, "b": "x"}, "a=1 b=x"),
    ],
)
def test_event_summary(event: dict[str, Any], text: str) -> None:
    assert event_summary(event) == text


def test_event_line_has_time_and_kind() -> None:
    line = event_line({"id": "1-0", "kind": "job", "time": 0, "name": "t", "op": "deleted"})
    assert line.endswith("  job           t deleted")


def test_no_flow_under_a_policy_without_detection_says_detection_is_off(
    runner: CliRunner, api_url: str, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "classes: {inference: {priority: 0, dscp: 46, min_rate: 20%}}\ndefault_class: inference\n"
    )
    stored = runner.invoke(app, ["policy", "apply", str(policy), "--api", api_url, "--no-wait"])
    assert stored.exit_code == 0, stored.output
    result = runner.invoke(app, ["flows", "--api", api_url])
    assert result.exit_code == 0, result.output
    assert "detection is off in the active policy (version 1)" in result.output


def test_event_floats_are_rounded_for_people() -> None:
    line = event_summary(
        {
            "kind": "reclassified",
            "switch": "01",
            "flow": "f",
            "from": "a",
            "to": "b",
            "latency_s": 0.5460000000000491,
        }
    )
    assert "latency_s=0.546" in line and "0.54600000" not in line
