"""Real Open vSwitch fixtures: a userspace bridge with veth ports, torn down after each test."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from flowlane_bench import harness

from controller.qos.ovsdb import Ovsdb
from tests.support.ovs_bridge import OvsBridge, owned_qos_ports, sh
from tests.support.redis_server import RedisServer

_ids = itertools.count(1)


@pytest.fixture
def bridge() -> Iterator[OvsBridge]:
    harness.check_prerequisites()
    index = f"{os.getpid() % 1000}{next(_ids)}"
    test_bridge = OvsBridge(f"flt{index}", harness.free_port())
    sh(
        "ovs-vsctl",
        "add-br",
        test_bridge.name,
        "--",
        "set",
        "bridge",
        test_bridge.name,
        "datapath_type=netdev",
        "protocols=OpenFlow13",
        "fail-mode=secure",
        "--",
        "set-controller",
        test_bridge.name,
        f"tcp:127.0.0.1:{test_bridge.ofp_port}",
    )
    controller_uuid = sh("ovs-vsctl", "get", "bridge", test_bridge.name, "controller").strip(
        "[]\n "
    )
    sh("ovs-vsctl", "set", "controller", controller_uuid, "max_backoff=1000")
    try:
        for number in (1, 2):
            test_bridge.add_port(f"flt{index}p{number}")
        yield test_bridge
    finally:
        sh("ovs-vsctl", "--if-exists", "del-br", test_bridge.name, check=False)
        for port in list(test_bridge.ports):
            sh("ip", "link", "del", port, check=False)
        Ovsdb().collect_garbage()
        leftovers = owned_qos_ports() & set(test_bridge.ports)
        assert not leftovers, f"QoS rows left behind for {leftovers}"


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis of the test's own, on a free port, stopped by PID after."""
    server = RedisServer(harness.free_port(), tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()
