"""`flowlane topology` and `flowlane paths` on a real API; fabric events in `flowlane events`."""

from __future__ import annotations

import json
import time

import pytest
import redis
from prometheus_client import CollectorRegistry
from typer.testing import CliRunner, Result

from controller.cli.fabric import freshness, hops_text, port_full, utilization_text
from controller.cli.main import app
from controller.fabric.model import Host, Link, PortRef, Topology
from controller.fabric.placement import Pin
from controller.fabric.snapshot import (
    FabricEvent,
    FabricSnapshot,
    build_snapshot,
    pinned_view,
    topology_events,
)
from controller.flowid import FlowId
from controller.metrics import ControllerMetrics
from controller.openflow.fabric_events import DiscoveryTick
from controller.openflow.fabric_owner import FabricOwner
from controller.policy.load import parse_policy
from controller.store.events import EventStore
from controller.store.fabric import FabricStore

WIDE = {"COLUMNS": "250", "USER": "tester"}
FABRIC_POLICY = {
    "classes": {
        "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
        "training": {"priority": 1, "dscp": 26, "min_rate": "70%"},
    },
    "default_class": "inference",
    "detection": {"elephant": {"bytes": "10MiB", "class": "training"}},
    "forwarding": "fabric",
}
LEAF1, LEAF2, SPINE1, SPINE2 = 1, 2, 11, 12
H1 = Host(0x1, PortRef(LEAF1, 1), 0x0A000001)
H2 = Host(0x2, PortRef(LEAF2, 1), 0x0A000002)
CABLES = (
    (PortRef(LEAF1, 3), PortRef(SPINE1, 1)),
    (PortRef(LEAF1, 4), PortRef(SPINE2, 1)),
    (PortRef(LEAF2, 3), PortRef(SPINE1, 2)),
    (PortRef(LEAF2, 4), PortRef(SPINE2, 2)),
)
TOPOLOGY = Topology(
    switches=frozenset({LEAF1, LEAF2, SPINE1, SPINE2}),
    links=frozenset(link for a, b in CABLES for link in (Link(a, b), Link(b, a))),
    hosts=(H1, H2),
    capacity_bps={PortRef(LEAF1, 3): 1_000_000_000},
)
NAMES = {PortRef(LEAF1, 1): "s1-eth1", PortRef(LEAF1, 3): "s1-eth3", PortRef(SPINE1, 1): "s11-eth1"}


def flat(text: str) -> str:
    return " ".join(text.split())


def rows(text: str) -> list[str]:
    """The table rows of the output, cells apart by single spaces."""
    return [flat(line.replace("\u2502", " ")) for line in text.splitlines() if "\u2502" in line]


def invoke(runner: CliRunner, api_url: str, *args: str) -> Result:
    result = runner.invoke(app, list(args), env={**WIDE, "FLOWLANE_API": api_url})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result


@pytest.fixture
def snapshot(redis_client: redis.Redis) -> FabricSnapshot:
    now = time.time()
    pinned = pinned_view(
        FlowId(0x0800, 17, H1.ipv4 or 0, H2.ipv4 or 0, 5000, 4791),
        traffic_class="training",
        rate_bps=9e8,
        demand_bps=1e9,
        since=now - 75,
        path=((LEAF1, 3), (SPINE1, 2), (LEAF2, 1)),
        port_names=NAMES,
    )
    published = build_snapshot(
        "ctl-1",
        now,
        TOPOLOGY,
        NAMES,
        {Link(PortRef(LEAF1, 3), PortRef(SPINE1, 1)): 9.5e8},
        [pinned],
    )
    FabricStore(redis_client).publish(published)
    return published


# --------------------------------------------------------------------------------------------
# topology
# --------------------------------------------------------------------------------------------


def test_topology_without_a_snapshot(runner: CliRunner, api_url: str) -> None:
    result = invoke(runner, api_url, "topology")
    assert result.exit_code == 1
    assert "error: no fabric snapshot: no controller has published one" in flat(result.stderr)


def test_the_topology_tables(runner: CliRunner, api_url: str, snapshot: FabricSnapshot) -> None:
    result = invoke(runner, api_url, "topology")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "fabric of controller ctl-1, updated" in flat(text)
    assert "stale" not in text
    assert "switches (4)" in text
    assert "links (8 directions)" in text
    [row] = [line for line in rows(text) if line.startswith("s1-eth3 (")]
    for expected in (
        "s1-eth3 (0000000000000001:3)",
        "s11-eth1 (000000000000000b:1)",
        "1Gbit/s",
        "950Mbit/s",
        "95.0%",
        "up",
    ):
        assert expected in row, row
    assert "hosts (2)" in text
    host_rows = [line for line in rows(text) if line.startswith("00:00:00:00:00:0")]
    assert host_rows[0].split()[:5] == [
        "00:00:00:00:00:01",
        "10.0.0.1",
        "0000000000000001",
        "s1-eth1",
        "(1)",
    ]
    assert "pinned elephants (1)" in text
    [pinned] = [line for line in rows(text) if line.startswith("udp 10.0.0.1:5000")]
    for expected in ("-> 10.0.0.2:4791", "training", "900Mbit/s", "1Gbit/s", "1m 15s"):
        assert expected in pinned, pinned
    assert "s1-eth3 > 000000000000000b:2 > 0000000000000002:1" in pinned


def test_a_controllers_pin_shows_how_long_it_has_been_pinned(
    runner: CliRunner, api_url: str, redis_client: redis.Redis
) -> None:
    """The snapshot as the controller's fabric owner publishes it: pins are timed on the
    monotonic clock, whose readings read as Unix time made `pinned for 20792d 4h`."""
    published: list[FabricSnapshot] = []

    class Store:
        def fabric_changed(self, snapshot: FabricSnapshot) -> None:
            published.append(snapshot)

        def fabric_events(self, events: list[FabricEvent]) -> None:
            pass

    owner = FabricOwner(
        parse_policy(FABRIC_POLICY, source="test"),
        send_packet=lambda *_: None,
        publish=lambda *_: None,
        schedule=lambda *_: None,
        metrics=ControllerMetrics(registry=CollectorRegistry()),
        observers=[Store()],
    )
    booted = 3600.0  # the monotonic clock: seconds since boot, not since 1970
    flow = FlowId(0x0800, 17, H1.ipv4 or 0, H2.ipv4 or 0, 5000, 4791)
    owner._topology = TOPOLOGY
    owner._pins[flow] = Pin(((LEAF1, 3), (SPINE1, 2), (LEAF2, 1)), booted - 75)
    owner._pin_info[flow] = ("training", 9e8, 1e9)
    owner.receive(DiscoveryTick(booted))  # every round publishes the snapshot
    FabricStore(redis_client).publish(published[-1])
    result = invoke(runner, api_url, "topology")
    assert result.exit_code == 0, result.output
    [pinned] = [line for line in rows(result.stdout) if line.startswith("udp 10.0.0.1:5000")]
    assert " 1m 15s " in pinned or " 1m 16s " in pinned, pinned


def test_topology_json_is_the_api_body(
    runner: CliRunner, api_url: str, snapshot: FabricSnapshot
) -> None:
    result = invoke(runner, api_url, "topology", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == snapshot.model_dump(mode="json")


def test_an_empty_fabric_says_so(
    runner: CliRunner, api_url: str, redis_client: redis.Redis
) -> None:
    FabricStore(redis_client).publish(
        build_snapshot("ctl-1", time.time() - 120, Topology(frozenset({1})), {}, {}, [])
    )
    result = invoke(runner, api_url, "topology")
    assert result.exit_code == 0
    text = flat(result.stdout)
    assert "stale: is its controller running?" in text
    assert "no switch-to-switch link discovered" in text
    assert "no host learned yet" in text
    assert "no elephant pinned" in text


# --------------------------------------------------------------------------------------------
# paths
# --------------------------------------------------------------------------------------------


def test_paths_between_two_hosts(runner: CliRunner, api_url: str, snapshot: FabricSnapshot) -> None:
    result = invoke(runner, api_url, "paths", "10.0.0.1", "00:00:00:00:00:02")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "src: 10.0.0.1 (00:00:00:00:00:01) at switch s1-eth1 (0000000000000001:1)" in flat(text)
    assert "dst: 10.0.0.2 (00:00:00:00:00:02) at switch 0000000000000002:1" in flat(text)
    assert "ECMP paths (2)" in text
    assert [line for line in rows(text) if line[:2] in ("1 ", "2 ")] == [
        "1 0000000000000001 > 000000000000000b > 0000000000000002"
        " s1-eth3 > 000000000000000b:2 > 0000000000000002:1",
        "2 0000000000000001 > 000000000000000c > 0000000000000002"
        " 0000000000000001:4 > 000000000000000c:2 > 0000000000000002:1",
    ]
    assert "pinned elephants (1)" in text


def test_paths_json(runner: CliRunner, api_url: str, snapshot: FabricSnapshot) -> None:
    result = invoke(runner, api_url, "paths", "10.0.0.2", "10.0.0.1", "--json")
    assert result.exit_code == 0
    body = json.loads(result.stdout)
    assert [len(path) for path in body["ecmp"]] == [3, 3]
    assert [pinned["flow"] for pinned in body["pinned"]] == ["udp 10.0.0.1:5000 > 10.0.0.2:4791"]


def test_paths_with_a_malformed_address(
    runner: CliRunner, api_url: str, snapshot: FabricSnapshot
) -> None:
    result = invoke(runner, api_url, "paths", "h1", "10.0.0.2")
    assert result.exit_code == 1
    stderr = flat(result.stderr)
    assert "invalid query: 1 error(s)" in stderr
    assert "query.src: expected an IPv4 address (10.0.0.1) or a MAC" in stderr
    assert "got 'h1' (SRC)" in stderr


def test_paths_to_an_unknown_host(
    runner: CliRunner, api_url: str, snapshot: FabricSnapshot
) -> None:
    result = invoke(runner, api_url, "paths", "10.0.0.1", "10.0.0.9")
    assert result.exit_code == 1
    assert "error: dst: no host with IPv4 10.0.0.9 is known to controller ctl-1" in flat(
        result.stderr
    )


def test_paths_between_unconnected_switches(
    runner: CliRunner, api_url: str, redis_client: redis.Redis
) -> None:
    alone = Topology(frozenset({1, 2}), hosts=(H1, H2))
    FabricStore(redis_client).publish(build_snapshot("c", time.time(), alone, {}, {}, []))
    result = invoke(runner, api_url, "paths", "10.0.0.1", "10.0.0.2")
    assert result.exit_code == 0
    assert "no path: the two switches are not connected" in flat(result.stdout)
    assert "no elephant between them is pinned" in flat(result.stdout)


@pytest.mark.parametrize("args", [["topology"], ["paths", "10.0.0.1", "10.0.0.2"]])
def test_an_unreachable_api_is_exit_3(runner: CliRunner, unused_port: int, args: list[str]) -> None:
    result = invoke(runner, f"http://127.0.0.1:{unused_port}", *args)
    assert result.exit_code == 3
    assert "cannot reach the flowlane API" in flat(result.stderr)


# --------------------------------------------------------------------------------------------
# events, and the pure helpers
# --------------------------------------------------------------------------------------------


def test_fabric_events_show_in_flowlane_events(
    runner: CliRunner, api_url: str, redis_client: redis.Redis
) -> None:
    store = EventStore(redis_client)
    for event in topology_events(TOPOLOGY, TOPOLOGY.without_port(PortRef(LEAF1, 3))):
        store.append(event.kind, event.data)
    result = invoke(runner, api_url, "events")
    assert result.exit_code == 0
    [line] = [flat(line) for line in result.stdout.splitlines() if line.strip()]
    assert " link " in line
    assert "0000000000000001:3" in line and "000000000000000b:1" in line and "down" in line


def test_helpers_survive_odd_json() -> None:
    assert port_full({"dpid": 1, "port": 2, "name": None}) == "0000000000000001:2"
    assert port_full(None) == "?"
    assert hops_text([]) == "-"
    assert utilization_text(None) == "-"
    assert utilization_text(0.95) == "[red]95.0%[/]"
    assert utilization_text(0.75) == "[yellow]75.0%[/]"
    assert freshness(None, 0.0) == "updated: unknown"
