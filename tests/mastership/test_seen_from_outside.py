"""Two real controller processes sharing one Redis and one (scripted) switch, seen from
outside: ``mastership`` events, ``flowlane_switch_master`` on each instance's /metrics,
and ``GET /v1/controllers`` before and after the master is killed.

The switch is ``ScriptedSwitch`` (grants every role request): no Open vSwitch needed.
"""

from __future__ import annotations

import contextlib
import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient
from flowlane_bench import harness
from prometheus_client import CollectorRegistry

from controller.api.app import create_app
from controller.api.settings import ApiSettings
from controller.auth.model import Role
from controller.store.events import EventStore
from tests.api.conftest import bearer
from tests.support.openflow_peer import ScriptedSwitch

DPID = 0x5E
POLICY = Path(__file__).resolve().parents[2] / "policies" / "examples" / "fifo.yaml"


def master_value(metrics_port: int) -> float | None:
    """The instance's ``flowlane_switch_master`` for DPID, None without a series."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    for line in text.splitlines():
        if line.startswith(f'flowlane_switch_master{{dpid="{DPID:016x}"}}'):
            return float(line.split()[-1])
    return None


def mastership(events: EventStore) -> list[dict[str, Any]]:
    return [e.data for e in events.read(limit=1000) if e.kind == "mastership"]


@contextlib.contextmanager
def instance(
    name: str, tmp_path: Path, redis_url: str, metrics_port: int
) -> Iterator[harness.ControllerProcess]:
    args = ["--no-qos", "--instance-id", name, "--lease-ttl", "1.5"]
    with harness.controller(
        POLICY,
        tmp_path / f"{name}.log",
        harness.free_port(),
        metrics_port=metrics_port,
        redis_url=redis_url,
        extra_args=args,
    ) as ctl:
        yield ctl


@pytest.fixture
def client(redis_url: str, redis_client: redis.Redis) -> Iterator[TestClient]:
    """The API on the controllers' Redis, read with a viewer's token."""
    app = create_app(ApiSettings(redis_url=redis_url, registry=CollectorRegistry()))
    with TestClient(app, headers=bearer(redis_client, Role.viewer)) as test_client:
        yield test_client


def test_the_master_killed_its_switch_taken_and_everyone_can_see_it(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis, client: TestClient
) -> None:
    events = EventStore(redis_client)
    ports = {"ctl-a": harness.free_port(), "ctl-b": harness.free_port()}
    with (
        instance("ctl-a", tmp_path, redis_url, ports["ctl-a"]) as a,
        instance("ctl-b", tmp_path, redis_url, ports["ctl-b"]) as b,
    ):
        switches = [ScriptedSwitch.connect(ctl.ofp_port, DPID) for ctl in (a, b)]
        try:
            harness.wait_for("a took the switch", lambda: len(mastership(events)) >= 1, 15)
            [took] = mastership(events)
            master = took["instance"]
            other = "ctl-b" if master == "ctl-a" else "ctl-a"
            first = took.pop("generation")
            assert first > 10**12  # the time floor: Redis's clock in ms (leases.py)
            assert took == {
                "op": "took",
                "switch": f"{DPID:016x}",
                "instance": master,
                "from": None,
            }
            harness.wait_for(
                "both instances' gauges",
                lambda: (master_value(ports[master]), master_value(ports[other])) == (1.0, 0.0),
                10,
            )
            body = client.get("/v1/controllers").json()
            seen = {c["id"]: c for c in body["controllers"]}
            assert seen.keys() == {"ctl-a", "ctl-b"}
            assert all(c["alive"] and c["connected"] == [f"{DPID:016x}"] for c in seen.values())
            assert [m["dpid"] for m in seen[master]["masters"]] == [f"{DPID:016x}"]
            assert seen[other]["masters"] == [] and body["unmastered"] == []

            killed = a if master == "ctl-a" else b
            killed.process.send_signal(signal.SIGKILL)
            killed.process.wait(5)
            harness.wait_for(
                "the other to take the switch", lambda: len(mastership(events)) >= 2, 15
            )
            second = mastership(events)[1]
            assert second.pop("generation") > first
            assert second == {
                "op": "took",
                "switch": f"{DPID:016x}",
                "instance": other,
                "from": master,
            }
            harness.wait_for("its gauge", lambda: master_value(ports[other]) == 1.0, 10)
            body = client.get("/v1/controllers").json()
            seen = {c["id"]: c for c in body["controllers"]}
            assert seen[other]["last_takeover"]["previous"] == master
            assert seen[other]["masters"][0]["taken_from"] == master
            assert seen[other]["masters"][0]["generation"] > first
            assert master not in seen or not seen[master]["alive"]
            assert body["unmastered"] == []
        finally:
            for switch in switches:
                switch.close()
        assert not (a if master == "ctl-b" else b).problems()
