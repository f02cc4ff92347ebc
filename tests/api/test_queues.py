"""GET /v1/switches/{dpid}/queues: the queue telemetry a live controller published."""

from __future__ import annotations

import redis
from fastapi.testclient import TestClient

from controller.qos.telemetry import QueueStats
from controller.store.queues import QueueStore
from tests.api.conftest import ReportSwitch


def stats(port: str, name: str, queue: int, drops: int = 0) -> QueueStats:
    return QueueStats(
        port=port,
        traffic_class=name,
        queue_id=queue,
        bytes=1000 * (queue + 1),
        packets=10,
        drops=drops,
        overlimits=2,
        backlog_bytes=1514,
        backlog_packets=1,
        rate_bps=8000.0 if queue else None,
        at=1_700_000_001.0,
    )


def test_a_live_switchs_queues_by_port_and_class(
    client: TestClient, redis_client: redis.Redis, report_switch: ReportSwitch
) -> None:
    report_switch(0x2A)
    published = [stats("s1-eth1", "inference", 0, drops=3), stats("s1-eth1", "training", 1)]
    QueueStore(redis_client).publish(0x2A, published, now=1_700_000_002.0)
    for dpid in ("000000000000002a", "0x2a", "42"):
        response = client.get(f"/v1/switches/{dpid}/queues")
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["dpid"] == "000000000000002a" and body["updated_at"] == 1_700_000_002.0
        assert body["queues"] == [queue.to_dict() for queue in published]


def test_unknown_dead_or_unread_switches_are_404(
    client: TestClient, redis_client: redis.Redis, report_switch: ReportSwitch
) -> None:
    store = QueueStore(redis_client)
    store.publish(0x3, [stats("p", "inference", 0)])
    report_switch(0x3, controller="ctl-dead", beat=1.0)  # its controller stopped beating
    report_switch(0x4)  # live, nothing read yet
    assert "no live switch" in client.get("/v1/switches/3/queues").json()["detail"]
    assert "no queue telemetry" in client.get("/v1/switches/4/queues").json()["detail"]
    assert client.get("/v1/switches/zz/queues").status_code == 422
    store.remove(0x3)
    assert store.get("0000000000000003") is None
