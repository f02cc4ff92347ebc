"""``flowlane top``: one view of switches, their queues by class and the top flows, read
from a real API, as a table (``--once``) and as JSON (``--json``)."""

from __future__ import annotations

import json
import time

import redis
from typer.testing import CliRunner

from controller.cli.main import app
from controller.cli.top import top_view
from controller.qos.telemetry import QueueStats
from controller.store.flows import FlowRecord, FlowStore
from controller.store.queues import QueueStore
from controller.store.switches import SwitchReport, SwitchStore


def queue(port: str, name: str, queue_id: int, rate: float, drops: int = 0) -> QueueStats:
    return QueueStats(
        port, name, queue_id, 10_000, 100, drops, 0, 3000, 2, rate, 1.0, 20_000_000, 0
    )


def flow(port: int, rate: float, name: str, why: str) -> FlowRecord:
    return FlowRecord(
        "000000000000002a",
        0x0800,
        6,
        "10.0.0.1",
        "10.0.0.2",
        port,
        5201,
        name,
        why,
        1_000_000,
        rate,
        1.0,
        2.0,
    )


def seed(redis_client: redis.Redis) -> None:
    switches = SwitchStore(redis_client)
    switches.heartbeat("ctl-1")
    switches.report(SwitchReport(0x2A, "ctl-1", time.time(), 1))
    switches.report(SwitchReport(0x2B, "ctl-1", time.time(), 1))  # remote: no telemetry
    QueueStore(redis_client).publish(
        0x2A,
        [queue("s1-eth1", "inference", 0, 1e6, drops=4), queue("s1-eth1", "training", 1, 4e7)],
    )
    FlowStore(redis_client).publish(
        0x2A,
        [flow(1, 1e3, "inference", "rule:triton"), flow(2, 9e7, "training", "detected")]
        + [flow(10 + n, float(n), "inference", "default") for n in range(20)],
    )


def test_top_once_shows_queues_and_the_fastest_flows(
    runner: CliRunner, api_url: str, redis_client: redis.Redis
) -> None:
    seed(redis_client)
    result = runner.invoke(app, ["top", "--once", "--api", api_url])
    assert result.exit_code == 0, result.output
    for text in ("000000000000002a", "s1-eth1", "inference", "training", "40Mbit/s", "detected"):
        assert text in result.output
    assert "no queue telemetry from 000000000000002b" in result.output


def test_top_json_is_the_view_for_scripts(
    runner: CliRunner, api_url: str, redis_client: redis.Redis
) -> None:
    seed(redis_client)
    result = runner.invoke(app, ["top", "--json", "--api", api_url])
    assert result.exit_code == 0, result.output
    view = json.loads(result.output)
    assert [(q["port"], q["traffic_class"], q["drops"]) for q in view["queues"]] == [
        ("s1-eth1", "inference", 4),
        ("s1-eth1", "training", 0),
    ]
    assert len(view["flows"]) == 10
    assert view["flows"][0]["why"] == "detected"  # the fastest first
    assert view["missing_queues"] == ["000000000000002b"]


def test_the_view_orders_flows_by_rate_then_bytes() -> None:
    flows = {
        "flows": [
            {
                "switch": "a",
                "eth_type": 0x0800,
                "ip_proto": 17,
                "src": "1",
                "dst": "2",
                "src_port": 1,
                "dst_port": 2,
                "class": "c",
                "why": "w",
                "bytes": b,
                "rate_bps": r,
                "first_seen": 1.0,
                "last_seen": 2.0,
            }
            for r, b in ((None, 5), (10.0, 1), (10.0, 9), (99.0, 0))
        ]
    }
    view = top_view({"switches": []}, {}, flows, top=3)
    assert [(f.rate_bps, f.bytes) for f in view.flows] == [(99.0, 0), (10.0, 9), (10.0, 1)]


def test_top_without_an_api_says_so(runner: CliRunner) -> None:
    result = runner.invoke(app, ["top", "--once", "--api", "http://127.0.0.1:1"])
    assert result.exit_code == 3
    assert "cannot reach the flowlane API" in result.output
