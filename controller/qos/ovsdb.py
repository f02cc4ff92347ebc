"""Port queues through OVSDB, using ``ovs-vsctl`` as the OVSDB client.

``ovs-vsctl`` runs each call as one OVSDB transaction and, by default, waits
until ovs-vswitchd has applied it, so when a call returns the port's HTB
qdisc exists and tc filters can go on it.  Every QoS and Queue row flowlane
creates carries ``external_ids:flowlane-port=<port>``: QoS and Queue are root
tables, so rows nobody references stay forever unless their owner removes
them.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from controller.qos.plan import PortQos

OWNER_KEY = "flowlane-port"
DEFAULT_TIMEOUT_S = 10


DEFAULT_REVALIDATION_MS = 500
"""ovs-vswitchd's ``max-revalidator`` when ``other_config`` does not set it."""


class OvsdbError(RuntimeError):
    """An OVSDB transaction failed; ``ports`` names the ports it was for."""

    def __init__(self, ports: Sequence[str], detail: str) -> None:
        self.ports = tuple(ports)
        self.detail = detail
        super().__init__(f"OVSDB failed for port(s) {', '.join(self.ports) or '-'}: {detail}")


@dataclass(frozen=True, slots=True)
class Bridge:
    name: str
    datapath_id: int
    datapath_type: str

    @property
    def userspace(self) -> bool:
        """The netdev datapath ignores ``set_queue``; its ports need tc filters."""
        return self.datapath_type == "netdev"


@dataclass(frozen=True, slots=True)
class QueueState:
    min_bps: int
    max_bps: int
    priority: int
    burst_bits: int = 0
    """``other_config:burst``, which OVS's linux-htb takes in bits (0: unset, one frame)."""


@dataclass(frozen=True, slots=True)
class PortQosState:
    """A port's QoS as OVSDB holds it, comparable with a plan."""

    port_name: str
    qos_uuid: str | None
    owned: bool
    rate_bps: int | None
    queues: dict[int, QueueState]
    queue_uuids: tuple[str, ...]

    def satisfies(self, plan: PortQos) -> bool:
        burst = plan.burst_bytes * 8
        wanted = {
            q.queue_id: QueueState(q.min_bps, q.max_bps, q.priority, burst) for q in plan.queues
        }
        return self.owned and self.rate_bps == plan.rate_bps and self.queues == wanted


def _cell(value: Any) -> Any:
    """Decode one OVSDB JSON cell (``["uuid", x]``, ``["map", ...]``, ``["set", ...]``)."""
    if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str):
        kind, payload = value
        if kind == "map":
            return {_cell(k): _cell(v) for k, v in payload}
        if kind == "set":
            return [_cell(v) for v in payload]
        if kind in ("uuid", "named-uuid"):
            return payload
    return value


def _int(text: object) -> int | None:
    try:
        return int(str(text))
    except ValueError:
        return None


class Ovsdb:
    """The few OVSDB operations the controller needs, each one transaction."""

    def __init__(self, db: str | None = None, timeout_s: int = DEFAULT_TIMEOUT_S) -> None:
        self._base = ["ovs-vsctl", f"--timeout={timeout_s}"]
        if db:
            self._base.append(f"--db={db}")
        self._timeout_s = timeout_s

    def _run(self, args: Sequence[str], ports: Sequence[str] = ()) -> str:
        try:
            done = subprocess.run(
                [*self._base, *args],
                capture_output=True,
                text=True,
                timeout=self._timeout_s + 5,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise OvsdbError(ports, str(exc)) from exc
        if done.returncode != 0:
            raise OvsdbError(ports, done.stderr.strip() or f"exit code {done.returncode}")
        return done.stdout

    def _table(self, table: str, columns: str, ports: Sequence[str] = ()) -> list[dict[str, Any]]:
        text = self._run(["--format=json", f"--columns={columns}", "list", table], ports)
        document = json.loads(text)
        headings: list[str] = document["headings"]
        return [
            {heading: _cell(cell) for heading, cell in zip(headings, row, strict=True)}
            for row in document["data"]
        ]

    def bridges(self) -> list[Bridge]:
        rows = self._table("bridge", "name,datapath_id,datapath_type")
        found = []
        for row in rows:
            dpid = row["datapath_id"]
            if isinstance(dpid, str) and dpid:
                found.append(Bridge(row["name"], int(dpid, 16), row["datapath_type"] or "system"))
        return found

    def bridge_for(self, datapath_id: int) -> Bridge | None:
        return next((b for b in self.bridges() if b.datapath_id == datapath_id), None)

    def port_qos(self, port_names: Iterable[str]) -> dict[str, PortQosState]:
        """Current QoS of the named ports (a port absent from OVSDB is absent here)."""
        names = set(port_names)
        ports = [p for p in self._table("port", "name,qos", list(names)) if p["name"] in names]
        qos_rows = {
            q["_uuid"]: q for q in self._table("qos", "_uuid,external_ids,other_config,queues")
        }
        queue_rows = {q["_uuid"]: q for q in self._table("queue", "_uuid,other_config")}
        states: dict[str, PortQosState] = {}
        for port in ports:
            qos_uuid = port["qos"] if isinstance(port["qos"], str) else None
            qos = qos_rows.get(qos_uuid) if qos_uuid else None
            if qos is None:
                states[port["name"]] = PortQosState(port["name"], None, False, None, {}, ())
                continue
            queue_map: dict[int, str] = qos["queues"] if isinstance(qos["queues"], dict) else {}
            queues = {}
            for queue_id, uuid in queue_map.items():
                config = queue_rows.get(uuid, {}).get("other_config", {})
                queues[int(queue_id)] = QueueState(
                    _int(config.get("min-rate")) or 0,
                    _int(config.get("max-rate")) or 0,
                    _int(config.get("priority")) or 0,
                    _int(config.get("burst")) or 0,
                )
            owner = qos["external_ids"] if isinstance(qos["external_ids"], dict) else {}
            states[port["name"]] = PortQosState(
                port["name"],
                qos_uuid,
                owner.get(OWNER_KEY) == port["name"],
                _int(qos["other_config"].get("max-rate")) if qos["other_config"] else None,
                queues,
                tuple(queue_map.values()),
            )
        return states

    def apply(self, plans: Sequence[PortQos], current: dict[str, PortQosState]) -> None:
        """Give each planned port a fresh QoS and drop the rows it replaces, in one transaction.

        OVS leaves the HTB class of a queue that a replacement QoS no longer
        has in the kernel (seen with OVS 3.1), so a port that loses queues has
        its QoS cleared first, which makes OVS rebuild the qdisc from scratch.
        """
        if not plans:
            return
        shrinking = [
            plan.port_name
            for plan in plans
            if plan.port_name in current
            and current[plan.port_name].queues.keys() - {q.queue_id for q in plan.queues}
        ]
        if shrinking:
            self.clear(shrinking)
            current = {name: state for name, state in current.items() if name not in shrinking}
        args: list[str] = []
        for index, plan in enumerate(plans):
            qos_id = f"@qos{index}"
            queue_refs = []
            for queue in plan.queues:
                queue_id = f"@q{index}_{queue.queue_id}"
                queue_refs.append(f"{queue.queue_id}={queue_id}")
                args += [
                    "--",
                    f"--id={queue_id}",
                    "create",
                    "queue",
                    f"other-config:min-rate={queue.min_bps}",
                    f"other-config:max-rate={queue.max_bps}",
                    f"other-config:priority={queue.priority}",
                    # Bits, and the HTB class's cburst too (see plan.htb_burst_bytes).
                    f"other-config:burst={plan.burst_bytes * 8}",
                    f"external-ids:{OWNER_KEY}={plan.port_name}",
                    f"external-ids:flowlane-class={queue.class_name}",
                ]
            args += [
                "--",
                f"--id={qos_id}",
                "create",
                "qos",
                "type=linux-htb",
                f"other-config:max-rate={plan.rate_bps}",
                f"external-ids:{OWNER_KEY}={plan.port_name}",
                *(f"queues:{ref}" for ref in queue_refs),
                "--",
                "set",
                "port",
                plan.port_name,
                f"qos={qos_id}",
            ]
            args += self._destroy_args(current.get(plan.port_name))
        self._run(args, [plan.port_name for plan in plans])

    @staticmethod
    def _destroy_args(state: PortQosState | None) -> list[str]:
        if state is None or state.qos_uuid is None or not state.owned:
            return []
        args = ["--", "destroy", "qos", state.qos_uuid]
        for uuid in state.queue_uuids:
            args += ["--", "destroy", "queue", uuid]
        return args

    def clear(self, port_names: Sequence[str]) -> None:
        """Remove QoS from ports (destroying the rows when they are flowlane's)."""
        current = self.port_qos(port_names)
        args: list[str] = []
        for name in port_names:
            state = current.get(name)
            if state and state.qos_uuid:
                args += ["--", "clear", "port", name, "qos", *self._destroy_args(state)]
        if args:
            self._run(args, port_names)

    def collect_garbage(self) -> list[str]:
        """Destroy flowlane QoS/Queue rows no port references (ports deleted under us)."""
        referenced = {p["qos"] for p in self._table("port", "qos") if isinstance(p["qos"], str)}
        args: list[str] = []
        freed: list[str] = []
        qos_queues: set[str] = set()
        for qos in self._table("qos", "_uuid,external_ids,queues"):
            owner = qos["external_ids"] if isinstance(qos["external_ids"], dict) else {}
            queues = qos["queues"] if isinstance(qos["queues"], dict) else {}
            if qos["_uuid"] in referenced:
                qos_queues.update(queues.values())
                continue
            if OWNER_KEY in owner:
                freed.append(owner[OWNER_KEY])
                # --if-exists: another collector (the harness, a second controller) may have
                # destroyed it since the read, and that must not fail this transaction.
                args += ["--", "--if-exists", "destroy", "qos", qos["_uuid"]]
        for queue in self._table("queue", "_uuid,external_ids"):
            owner = queue["external_ids"] if isinstance(queue["external_ids"], dict) else {}
            if OWNER_KEY in owner and queue["_uuid"] not in qos_queues:
                args += ["--", "--if-exists", "destroy", "queue", queue["_uuid"]]
        if args:
            self._run(args, freed)
        return freed

    def revalidation_s(self) -> float:
        """How often ovs-vswitchd refreshes flow counters: it does so when it revalidates
        its datapath flows, at most every ``other_config:max-revalidator`` ms (500 unset)."""
        text = self._run(
            ["--if-exists", "get", "Open_vSwitch", ".", "other_config:max-revalidator"]
        )
        milliseconds = _int(text.strip().strip('"'))
        return (milliseconds if milliseconds is not None else DEFAULT_REVALIDATION_MS) / 1000

    def flow_table_limit(self, bridge: str, table_id: int) -> int | None:
        for row in self._table("bridge", "name,flow_tables"):
            if row["name"] == bridge and isinstance(row["flow_tables"], dict):
                uuid = row["flow_tables"].get(table_id)
                for table in self._table("flow_table", "_uuid,flow_limit"):
                    if uuid and table["_uuid"] == uuid and isinstance(table["flow_limit"], int):
                        return int(table["flow_limit"])
        return None

    def limit_flow_table(self, bridge: str, table_id: int, limit: int) -> bool:
        """Cap an OpenFlow table (the counting table), OVS evicting the oldest entries.

        Without it a flood of new flows would grow the learned table without
        bound; with eviction a full table drops counting entries, never
        forwarding ones.  True when the limit was (re)written.
        """
        if self.flow_table_limit(bridge, table_id) == limit:
            return False
        self._run(
            [
                "--",
                "--id=@table",
                "create",
                "flow_table",
                f"flow_limit={limit}",
                "overflow_policy=evict",
                "name=flowlane-count",
                "--",
                "set",
                "bridge",
                bridge,
                f"flow_tables:{table_id}=@table",
            ],
            [bridge],
        )
        return True
