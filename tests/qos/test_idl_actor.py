"""The OVSDB connection's own behaviour, against a private ``ovsdb-server`` (no switch).

Each test runs its own ovsdb-server on a database file and socket in its
temporary directory, so it can stop the server, restart it, or play
ovs-vswitchd, without touching the machine's Open vSwitch: a reconnect, a
transaction OVSDB asks to try again, and a write ovs-vswitchd never applies.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.policy.load import parse_policy
from controller.qos.idl import IdlActor, vswitch_schema
from controller.qos.ovsdb import Ovsdb, OvsdbError
from controller.qos.plan import plan_port_qos

POLICY = parse_policy(
    {
        "classes": {"inference": {"priority": 0, "dscp": 46, "min_rate": "20%"}},
        "default_class": "inference",
        "ports": {"rate": "10Mbit"},
    },
    source="test",
)


class Server:
    """An ovsdb-server of the test's own, stopped by PID."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.db = directory / "conf.db"
        self.remote = f"unix:{directory}/db.sock"
        self.process: subprocess.Popen[bytes] | None = None
        for tool in ("ovsdb-server", "ovsdb-tool", "ovsdb-client"):
            assert shutil.which(tool), f"{tool} missing: run `make setup`"
        subprocess.run(["ovsdb-tool", "create", self.db, vswitch_schema()], check=True)

    def start(self) -> None:
        sock = self.directory / "db.sock"
        sock.unlink(missing_ok=True)
        self.process = subprocess.Popen(
            [
                "ovsdb-server",
                self.db,
                f"--remote=p{self.remote}",
                f"--unixctl={self.directory}/ctl",
                "--no-chdir",
                f"--log-file={self.directory}/ovsdb-server.log",
            ]
        )
        deadline = time.monotonic() + 10
        while not sock.exists():
            assert time.monotonic() < deadline, "ovsdb-server did not listen"
            time.sleep(0.01)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None

    def transact(self, *operations: dict[str, Any]) -> Any:
        done = subprocess.run(
            ["ovsdb-client", "transact", self.remote,
             json.dumps(["Open_vSwitch", *operations])],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return json.loads(done.stdout)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A database with the root row, one bridge and its port ``p1``, as ovs-vsctl makes it."""
    db = Server(tmp_path)
    db.start()
    try:
        db.transact(
            {"op": "insert", "table": "Interface", "row": {"name": "p1"}, "uuid-name": "i"},
            {"op": "insert", "table": "Port", "uuid-name": "p",
             "row": {"name": "p1", "interfaces": ["named-uuid", "i"]}},
            {"op": "insert", "table": "Bridge", "uuid-name": "b",
             "row": {"name": "b1", "ports": ["named-uuid", "p"],
                     "datapath_id": "0000000000000001", "datapath_type": "netdev"}},
            {"op": "insert", "table": "Open_vSwitch", "row": {"bridges": ["named-uuid", "b"]}},
        )  # fmt: skip
        yield db
    finally:
        db.stop()


def play_vswitchd(server: Server) -> IdlActor:
    """A second connection that does what ovs-vswitchd does with ``next_cfg``: applies it."""
    actor = IdlActor(server.remote, {"Open_vSwitch": ["next_cfg", "cur_cfg"]}, vswitch_schema())

    def catch_up(idl: Any, txn: Any) -> None:
        for row in idl.tables["Open_vSwitch"].rows.values():
            if row.cur_cfg != row.next_cfg:
                row.cur_cfg = row.next_cfg

    actor.subscribe({"Open_vSwitch"}, lambda *_: actor.submit_write(catch_up, 5))
    return actor


def test_a_write_returns_once_ovs_vswitchd_applied_it(server: Server) -> None:
    vswitchd = play_vswitchd(server)
    try:
        with Ovsdb(server.remote, timeout_s=5) as ovsdb:
            plan = plan_port_qos(POLICY, "p1", None)
            ovsdb.apply([plan], ovsdb.port_qos(["p1"]))
            assert ovsdb.port_qos(["p1"])["p1"].satisfies(plan)
            [row] = server.transact(
                {"op": "select", "table": "Open_vSwitch", "where": [],
                 "columns": ["next_cfg", "cur_cfg"]}
            )[0]["rows"]  # fmt: skip
            assert row["cur_cfg"] == row["next_cfg"] >= 1
    finally:
        vswitchd.close()


def test_a_write_ovs_vswitchd_never_applies_fails_and_holds_up_nothing(server: Server) -> None:
    with Ovsdb(server.remote, timeout_s=1) as ovsdb:
        plan = plan_port_qos(POLICY, "p1", None)
        started = time.monotonic()
        with pytest.raises(OvsdbError, match="ovs-vswitchd did not apply it") as failure:
            ovsdb.apply([plan], ovsdb.port_qos(["p1"]))
        assert failure.value.ports == ("p1",)
        assert time.monotonic() - started < 3
        assert ovsdb.port_qos(["p1"])["p1"].satisfies(plan)  # committed all the same
        assert ovsdb.limit_flow_table("b1", 3, 100)  # the next write goes through


def test_the_connection_comes_back_after_ovsdb_server_restarts(server: Server) -> None:
    with Ovsdb(server.remote, timeout_s=1) as ovsdb:
        assert list(ovsdb.port_qos(["p1"])) == ["p1"]
        server.stop()
        # The IDL's thread sees the hang-up when it next runs: on a busy machine a read can
        # still be answered from its replica just after the stop, so wait for the refusal.
        deadline = time.monotonic() + 10
        while True:
            try:
                ovsdb.port_qos(["p1"])
            except OvsdbError as exc:
                assert "not connected" in str(exc), exc
                break
            assert time.monotonic() < deadline, "reads still answered 10 s after the stop"
            time.sleep(0.02)
        server.start()
        deadline = time.monotonic() + 20  # the IDL reconnects with back-off (up to 8 s)
        while True:
            try:
                assert list(ovsdb.port_qos(["p1"])) == ["p1"]
                break
            except OvsdbError:
                assert time.monotonic() < deadline, "no reconnect"


def test_a_transaction_outdated_by_another_client_is_rebuilt_and_committed(
    server: Server,
) -> None:
    """The IDL verifies what a write read; OVSDB says try again when another client changed
    it in between, and the write is built again from the fresh rows."""
    actor = IdlActor(server.remote, {"Port": ["name", "external_ids"]}, vswitch_schema())
    seen: list[str | None] = []

    def build(idl: Any, txn: Any) -> int:
        [port] = idl.tables["Port"].rows.values()
        seen.append(port.external_ids.get("who"))
        if len(seen) == 1:  # another client writes after this one read
            server.transact(
                {"op": "update", "table": "Port", "where": [["name", "==", "p1"]],
                 "row": {"external_ids": ["map", [["who", "other"]]]}}
            )  # fmt: skip
        port.verify("external_ids")
        port.external_ids = {**port.external_ids, "n": str(len(seen))}
        return len(seen)

    try:
        assert actor.submit_write(build, 5).result(10) == 2
    finally:
        actor.close()
    assert seen == [None, "other"]
    [row] = server.transact(
        {"op": "select", "table": "Port", "where": [], "columns": ["external_ids"]}
    )[0]["rows"]
    assert row["external_ids"] == ["map", [["n", "2"], ["who", "other"]]]
