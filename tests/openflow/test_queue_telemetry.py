"""Queue telemetry from a real bridge: each port's class queues read from their HTB classes,
published to Redis and exported to Prometheus; frames marked for a class count in its queue.
"""

from __future__ import annotations

import socket
import struct
import urllib.request
from pathlib import Path

import pytest
from flowlane_bench import harness
from prometheus_client.parser import text_string_to_metric_families

from controller.store.client import connect
from controller.store.queues import QueueStore
from tests.support.ovs_bridge import OvsBridge
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.ovs

POLICY = """
classes:
  inference: {priority: 0, dscp: 46, min_rate: 20%}
  training:  {priority: 1, dscp: 26, min_rate: 80%}
default_class: inference
rules:
  - {name: bulk, match: {udp_dst: 40001}, class: training}
ports: {rate: 100Mbit}
"""


def udp_frame(dscp: int) -> bytes:
    """A broadcast IPv4/UDP frame to port 40001 (the policy's training rule): the bridge
    marks it with the training DSCP and floods it out of every other port, where the tc
    filters steer it into the training class's HTB queue."""
    payload = b"x" * 1000
    ip_header = struct.pack(
        "!BBHHHBBH4s4s",
        0x45,
        dscp << 2,
        20 + 8 + len(payload),
        1,
        0,
        64,
        17,
        0,
        socket.inet_aton("10.99.0.1"),
        socket.inet_aton("10.99.0.255"),
    )
    udp_header = struct.pack("!HHHH", 40000, 40001, 8 + len(payload), 0)
    ethernet = b"\xff" * 6 + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00"
    return ethernet + ip_header + udp_header + payload


def queue_bytes(metrics_port: int, port: str, name: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read()
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            if (
                sample.name == "flowlane_queue_sent_bytes_total"
                and sample.labels.get("port") == port
                and sample.labels.get("class") == name
            ):
                return sample.value
    return -1.0


def test_queues_are_read_published_and_exported(
    bridge: OvsBridge, tmp_path: Path, redis_server: RedisServer
) -> None:
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(POLICY)
    metrics_port = harness.free_port()
    with harness.controller(
        policy_file,
        tmp_path / "ctl.log",
        bridge.ofp_port,
        redis_url=redis_server.url,
        metrics_port=metrics_port,
    ) as ctl:
        harness.wait_in_sync(bridge.name, ctl.policy, bridge.ports)
        store = QueueStore(connect(redis_server.url))
        dpid = harness.datapath_id(bridge.name)

        def published() -> dict[tuple[str, str], int]:
            read = store.get(dpid)
            return {(q.port, q.traffic_class): q.bytes for q in read[1]} if read else {}

        wanted = {(port, name) for port in bridge.ports for name in ("inference", "training")}
        harness.wait_for("the queue telemetry", lambda: set(published()) == wanted, 15)
        egress, ingress = bridge.ports[1], f"{bridge.ports[0]}x"  # frames enter at port 1
        before = published()
        with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as raw:
            raw.bind((ingress, 0))
            for _ in range(50):
                raw.send(udp_frame(dscp=0))
        harness.wait_for(
            "the training queue's bytes",
            lambda: published()[(egress, "training")] >= before[(egress, "training")] + 50_000,
            10,
        )
        harness.wait_for(
            "the exported counter",
            lambda: (
                queue_bytes(metrics_port, egress, "training")
                >= before[(egress, "training")] + 50_000
            ),
            5,
        )
        assert ctl.problems() == []
