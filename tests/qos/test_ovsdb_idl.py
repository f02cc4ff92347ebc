"""The OVSDB client against the real Open vSwitch: one IDL connection, transactions, events.

Each test makes its own netdev bridge with veth ports (unique names) and
deletes it after; the QoS and Queue rows it made are collected and checked
gone.  No test here spawns ``ovs-vsctl`` through the client: ``subprocess``
is made to fail while the client works (the test itself uses ``ovs-vsctl``
to play another OVSDB client).
"""

from __future__ import annotations

import itertools
import os
import subprocess
import threading
import time
import traceback
from collections.abc import Iterator
from typing import Any

import pytest
from flowlane_bench import harness

from controller.policy.load import parse_policy
from controller.qos.ovsdb import OWNER_KEY, Ovsdb, OvsdbError
from controller.qos.plan import plan_port_qos
from controller.qos.provision import reconcile_bridge
from tests.support.ovs_bridge import OvsBridge, owned_qos_ports, sh

pytestmark = pytest.mark.ovs

POLICY = parse_policy(
    {
        "classes": {
            "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
            "training": {"priority": 1, "dscp": 26, "min_rate": "60%"},
            "best-effort": {"priority": 2, "dscp": 0, "min_rate": "10%"},
        },
        "default_class": "inference",
        "ports": {"rate": "100Mbit"},
    },
    source="test",
)
TWO_CLASSES = parse_policy(
    {
        "classes": {
            "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
            "training": {"priority": 1, "dscp": 26, "min_rate": "60%"},
        },
        "default_class": "inference",
        "ports": {"rate": "100Mbit"},
    },
    source="test",
)
_ids = itertools.count(1)


@pytest.fixture
def bridge() -> Iterator[OvsBridge]:
    harness.check_prerequisites()
    test_bridge = OvsBridge(f"flq{os.getpid() % 1000}{next(_ids)}", 0)
    sh("ovs-vsctl", "add-br", test_bridge.name, "--", "set", "bridge", test_bridge.name,
       "datapath_type=netdev")  # fmt: skip
    try:
        for number in (1, 2):
            test_bridge.add_port(f"{test_bridge.name}p{number}")
        yield test_bridge
    finally:
        sh("ovs-vsctl", "--if-exists", "del-br", test_bridge.name, check=False)
        for port in list(test_bridge.ports):
            sh("ip", "link", "del", port, check=False)
        with Ovsdb() as ovsdb:
            ovsdb.collect_garbage()
        leftovers = owned_qos_ports() & {f"{test_bridge.name}p{n}" for n in (1, 2, 3)}
        assert not leftovers, f"QoS rows left behind for {leftovers}"


CLIENT_FILES = ("controller/qos/ovsdb.py", "controller/qos/idl.py")


@pytest.fixture
def ovsdb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Ovsdb]:
    """A client; a process spawned from inside it (its thread, or a call into it) fails the
    test."""
    client = Ovsdb()
    spawned: list[Any] = []
    real_popen = subprocess.Popen

    def refuse(args: Any, *rest: Any, **kwargs: Any) -> Any:
        stack = traceback.extract_stack()
        if threading.current_thread().name == "ovsdb" or any(
            frame.filename.endswith(CLIENT_FILES) for frame in stack
        ):
            spawned.append(args)
        return real_popen(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", refuse)
    try:
        yield client
    finally:
        client.close()
        monkeypatch.undo()
    assert spawned == [], f"the OVSDB client spawned {spawned}"


def htb_classes(port: str) -> list[str]:
    text = sh("tc", "class", "show", "dev", port)
    return sorted(line.split()[2] for line in text.splitlines() if line.startswith("class htb"))


def qos_uuid(port: str) -> str:
    return sh("ovs-vsctl", "get", "port", port, "qos").strip()


def test_queues_are_set_applied_and_kept_while_they_match(bridge: OvsBridge, ovsdb: Ovsdb) -> None:
    found = ovsdb.bridge_for(int(sh("ovs-vsctl", "get", "bridge", bridge.name,
                                    "datapath_id").strip('"\n '), 16))  # fmt: skip
    assert found is not None and found.name == bridge.name and found.userspace
    plans = {port: plan_port_qos(POLICY, port, None) for port in bridge.ports}
    outcome = reconcile_bridge(ovsdb, found, plans)
    assert outcome.ok and sorted(outcome.changed_ports) == sorted(bridge.ports)
    # apply returned after ovs-vswitchd applied it: the HTB classes exist and took filters
    for port in bridge.ports:
        assert htb_classes(port) == ["1:1", "1:2", "1:3", "1:fffe"]
    assert sorted(outcome.filtered_ports) == sorted(bridge.ports)
    states = ovsdb.port_qos(bridge.ports)
    assert all(states[port].satisfies(plans[port]) for port in bridge.ports)
    rows = {port: qos_uuid(port) for port in bridge.ports}
    # a second pass finds every port as planned: no row is re-created
    again = reconcile_bridge(ovsdb, found, plans)
    assert again.ok and again.changed_ports == []
    assert {port: qos_uuid(port) for port in bridge.ports} == rows


def test_a_port_that_loses_a_class_loses_its_htb_class(bridge: OvsBridge, ovsdb: Ovsdb) -> None:
    port = bridge.ports[0]
    ovsdb.apply([plan_port_qos(POLICY, port, None)], ovsdb.port_qos([port]))
    assert "1:3" in htb_classes(port)
    two = plan_port_qos(TWO_CLASSES, port, None)
    ovsdb.apply([two], ovsdb.port_qos([port]))
    assert htb_classes(port) == ["1:1", "1:2", "1:fffe"]
    assert ovsdb.port_qos([port])[port].satisfies(two)
    ovsdb.clear([port])
    assert ovsdb.port_qos([port])[port].qos_uuid is None
    assert port not in owned_qos_ports()  # cleared rows are destroyed, not left to collect


def test_a_refused_transaction_names_its_ports(bridge: OvsBridge, ovsdb: Ovsdb) -> None:
    """Replacing a QoS row that another port still uses breaks referential integrity."""
    port = bridge.ports[0]
    sh("ovs-vsctl", "--", "--id=@q", "create", "qos", "type=linux-htb",
       f"external-ids:{OWNER_KEY}={port}", "--", "set", "port", port, "qos=@q",
       "--", "set", "port", bridge.name, "qos=@q")  # fmt: skip
    try:
        plan = plan_port_qos(POLICY, port, None)
        with pytest.raises(OvsdbError, match="referential integrity") as failure:
            ovsdb.apply([plan], ovsdb.port_qos([port]))
        assert failure.value.ports == (port,)
        assert not ovsdb.port_qos([port])[port].satisfies(plan)  # nothing half-written
    finally:
        sh("ovs-vsctl", "clear", "port", bridge.name, "qos")


def test_the_counting_table_cap_is_written_once(bridge: OvsBridge, ovsdb: Ovsdb) -> None:
    assert ovsdb.flow_table_limit(bridge.name, 3) is None
    assert ovsdb.limit_flow_table(bridge.name, 3, 5000)
    assert ovsdb.flow_table_limit(bridge.name, 3) == 5000
    assert not ovsdb.limit_flow_table(bridge.name, 3, 5000)
    tables = sh("ovs-vsctl", "get", "bridge", bridge.name, "flow_tables").strip("{}\n ")
    assert tables.startswith("3=")
    assert sh("ovs-vsctl", "get", "flow_table", tables[2:], "overflow_policy").strip() == "evict"


def test_one_connection_serves_every_thread(bridge: OvsBridge, ovsdb: Ovsdb) -> None:
    """The switch workers' QoS threads share the process's one IDL, owned by one thread."""
    plans = {port: plan_port_qos(POLICY, port, None) for port in bridge.ports}
    errors: list[BaseException] = []
    assert ovsdb.bridges()  # the connection is up: its thread exists

    def connection_threads() -> set[int | None]:
        return {t.ident for t in threading.enumerate() if t.name == "ovsdb"}

    before = connection_threads()

    def work(port: str) -> None:
        try:
            for _ in range(20):
                ovsdb.apply([plans[port]], ovsdb.port_qos([port]))
                assert ovsdb.bridges()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(port,)) for port in bridge.ports * 3]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert connection_threads() <= before  # no thread or connection per caller
    states = ovsdb.port_qos(bridge.ports)
    assert all(states[port].satisfies(plans[port]) for port in bridge.ports)


def test_a_deleted_ports_rows_are_collected_on_the_change_event(
    bridge: OvsBridge, ovsdb: Ovsdb
) -> None:
    """No timer and no caller: the port's deletion, seen on the connection, triggers it."""
    collected: list[tuple[list[str], OvsdbError | None]] = []

    def on_done(freed: list[str], error: OvsdbError | None) -> None:
        collected.append((freed, error))

    extra = f"{bridge.name}p3"
    bridge.add_port(extra)
    ovsdb.apply([plan_port_qos(POLICY, extra, None)], ovsdb.port_qos([extra]))
    ovsdb.collect_garbage_on_change(on_done)
    time.sleep(0.3)  # the collection on connect (of other runs' leftovers, if any) is over
    assert extra in owned_qos_ports()
    assert all(extra not in freed for freed, _ in collected)
    started = time.monotonic()
    sh("ovs-vsctl", "del-port", bridge.name, extra)  # another OVSDB client deletes the port
    harness.wait_for(
        "the deleted port's rows to be collected",
        lambda: ([extra], None) in collected,
        2.0,
        0.005,
    )
    took = time.monotonic() - started
    assert extra not in owned_qos_ports()
    queues = sh("ovs-vsctl", "--columns=external_ids", "list", "queue")
    assert f'{OWNER_KEY}="{extra}"' not in queues and f"{OWNER_KEY}={extra}" not in queues
    print(f"\nQoS rows of a deleted port collected {took * 1000:.0f} ms after the deletion")
    sh("ip", "link", "del", extra, check=False)
    bridge.ports.remove(extra)


def test_a_qos_change_by_another_client_is_told_with_its_port(
    bridge: OvsBridge, ovsdb: Ovsdb
) -> None:
    port, other = bridge.ports
    ovsdb.apply([plan_port_qos(POLICY, port, None)], ovsdb.port_qos([port]))
    told: list[frozenset[str]] = []
    ovsdb.watch_port_qos(told.append)
    assert ovsdb.bridges()  # connected, the first reading taken (a baseline, not a change)
    time.sleep(0.2)
    assert told == []
    sh("ovs-vsctl", "clear", "port", port, "qos")
    harness.wait_for("the change to be told", lambda: frozenset({port}) in told, 2.0, 0.005)
    ovsdb.apply([plan_port_qos(POLICY, other, None)], ovsdb.port_qos([other]))  # ours too
    harness.wait_for("our own change to be told", lambda: frozenset({other}) in told, 2.0, 0.005)
    assert all(change <= {port, other} for change in told)


def test_an_unreachable_ovsdb_fails_within_the_timeout(tmp_path: Any) -> None:
    with Ovsdb(f"unix:{tmp_path}/nothing.sock", timeout_s=1) as ovsdb:
        started = time.monotonic()
        with pytest.raises(OvsdbError, match="not connected") as failure:
            ovsdb.port_qos(["p1"])
        assert failure.value.ports == ("p1",)
        assert time.monotonic() - started < 3
