"""GET /v1/switches: the live switches, their ports, queues and applied versions."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from controller.qos.plan import QueueSpec
from controller.store.switches import PortReport, SwitchReport, SwitchStore


def test_no_switches(client: TestClient) -> None:
    response = client.get("/v1/switches")
    assert response.status_code == 200
    assert response.json() == {"active_version": None, "switches": []}


def test_live_switches_with_ports_and_queues(
    client: TestClient, switches: SwitchStore, document: dict[str, Any]
) -> None:
    client.put("/v1/policy", json=document)
    switches.heartbeat("ctl-1")
    switches.heartbeat("ctl-dead", now=1.0)
    queue = QueueSpec(0, "inference", 2_000_000_000, 10_000_000_000, 0, 46)
    switches.report(
        SwitchReport(
            dpid=0x2A,
            controller="ctl-1",
            connected_at=1_700_000_000.0,
            applied_version=1,
            ports=(
                PortReport("s1-eth1", 1, 10_000_000_000, 10_000_000_000, (queue,)),
                PortReport("s1-eth2", 2, None),
            ),
            flows=((0, 1, (), 0xF1), (2, 0, (), 0xF2)),
            datapath_type="netdev",
            updated_at=1_700_000_005.0,
        )
    )
    switches.report(SwitchReport(0x2B, "ctl-dead", 0.0, 1))
    assert client.get("/v1/switches").json() == {
        "active_version": 1,
        "switches": [
            {
                "dpid": "000000000000002a",
                "controller": "ctl-1",
                "datapath_type": "netdev",
                "connected_at": 1_700_000_000.0,
                "updated_at": 1_700_000_005.0,
                "applied_version": 1,
                "flow_count": 2,
                "ports": [
                    {
                        "name": "s1-eth1",
                        "number": 1,
                        "link_bps": 10_000_000_000,
                        "rate_bps": 10_000_000_000,
                        "queues": [
                            {
                                "queue_id": 0,
                                "class_name": "inference",
                                "min_bps": 2_000_000_000,
                                "max_bps": 10_000_000_000,
                                "priority": 0,
                                "dscp": 46,
                                "jobs": [],
                            }
                        ],
                    },
                    {
                        "name": "s1-eth2",
                        "number": 2,
                        "link_bps": None,
                        "rate_bps": None,
                        "queues": [],
                    },
                ],
            }
        ],
    }


def test_applied_version_comes_from_the_applied_hash(
    client: TestClient, report_switch: Any, switches: SwitchStore
) -> None:
    report_switch(0x1, applied=None)
    assert client.get("/v1/switches").json()["switches"][0]["applied_version"] is None
    report_switch(0x1, applied=3)
    assert client.get("/v1/switches").json()["switches"][0]["applied_version"] == 3
