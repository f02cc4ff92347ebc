"""Port queues through OVSDB: what flowlane reads and writes there, and the client that does.

The rows are values here (``Replica``) and every decision — what a port's
QoS is, what to create for a plan, which rows are garbage — is a pure
function of them.  ``Ovsdb`` is the thin shell: it runs those functions on
the replica of the process's one OVSDB connection (``controller.qos.idl``)
and turns their answers into IDL transactions.

Every QoS and Queue row flowlane creates carries
``external_ids:flowlane-port=<port>``: QoS and Queue are root tables, so rows
nobody references stay forever unless their owner removes them.  The
controller removes them when a change event shows them unreferenced
(``collect_garbage_on_change``), not on a timer.
"""

from __future__ import annotations

import logging
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, TypeVar

from controller.qos.idl import IdlActor, IdlError, default_remote, vswitch_schema
from controller.qos.plan import PortQos

LOG = logging.getLogger("flowlane.qos")

OWNER_KEY = "flowlane-port"
CLASS_KEY = "flowlane-class"
DEFAULT_TIMEOUT_S = 10

DEFAULT_REVALIDATION_MS = 500
"""ovs-vswitchd's ``max-revalidator`` when ``other_config`` does not set it."""

COLUMNS: dict[str, list[str]] = {
    # next_cfg/cur_cfg: wait until ovs-vswitchd applied a write; other_config: max-revalidator.
    "Open_vSwitch": ["next_cfg", "cur_cfg", "other_config"],
    "Bridge": ["name", "datapath_id", "datapath_type", "flow_tables"],
    "Port": ["name", "qos"],
    # Only the name: a port's interface coming and going is a change event, nothing more.
    "Interface": ["name"],
    "QoS": ["type", "other_config", "external_ids", "queues"],
    "Queue": ["other_config", "external_ids"],
    "Flow_Table": ["name", "flow_limit", "overflow_policy"],
}
"""The monitored tables and columns: the replica holds these and nothing else."""

QOS_TABLES = frozenset({"Port", "QoS", "Queue"})
"""A change to one of these can change a port's QoS, or leave a flowlane row unreferenced."""

T = TypeVar("T")


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


# ---- the rows, as values -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QosRow:
    uuid: str
    external_ids: Mapping[str, str]
    other_config: Mapping[str, str]
    queues: Mapping[int, str]
    """Queue number -> Queue row uuid."""


@dataclass(frozen=True, slots=True)
class QueueRow:
    uuid: str
    external_ids: Mapping[str, str]
    other_config: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Replica:
    """The Port, QoS and Queue rows that matter for queues, as values."""

    port_qos: Mapping[str, str | None]
    """Port name -> its QoS row's uuid (None: no QoS)."""
    qos: Mapping[str, QosRow]
    queues: Mapping[str, QueueRow]


@dataclass(frozen=True, slots=True)
class NewQueue:
    queue_id: int
    other_config: Mapping[str, str]
    external_ids: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class NewQos:
    """The rows that give one port its planned QoS."""

    port_name: str
    other_config: Mapping[str, str]
    external_ids: Mapping[str, str]
    queues: tuple[NewQueue, ...]
    type: str = "linux-htb"


@dataclass(frozen=True, slots=True)
class Garbage:
    qos: tuple[str, ...]
    queues: tuple[str, ...]
    ports: tuple[str, ...]
    """The ports the freed QoS rows were for (for the log)."""


def _int(text: object) -> int | None:
    try:
        return int(str(text))
    except ValueError:
        return None


def port_states(replica: Replica, port_names: Iterable[str]) -> dict[str, PortQosState]:
    """Current QoS of the named ports (a port absent from OVSDB is absent here)."""
    states: dict[str, PortQosState] = {}
    for name in port_names:
        if name not in replica.port_qos:
            continue
        qos_uuid = replica.port_qos[name]
        qos = replica.qos.get(qos_uuid) if qos_uuid else None
        if qos is None:
            states[name] = PortQosState(name, None, False, None, {}, ())
            continue
        queues = {}
        for queue_id, queue_uuid in qos.queues.items():
            row = replica.queues.get(queue_uuid)
            config = row.other_config if row else {}
            queues[queue_id] = QueueState(
                _int(config.get("min-rate")) or 0,
                _int(config.get("max-rate")) or 0,
                _int(config.get("priority")) or 0,
                _int(config.get("burst")) or 0,
            )
        states[name] = PortQosState(
            name,
            qos.uuid,
            qos.external_ids.get(OWNER_KEY) == name,
            _int(qos.other_config["max-rate"]) if "max-rate" in qos.other_config else None,
            queues,
            tuple(qos.queues.values()),
        )
    return states


def new_qos(plan: PortQos) -> NewQos:
    """The QoS and Queue rows that carry ``plan``."""
    owner = {OWNER_KEY: plan.port_name}
    burst = str(plan.burst_bytes * 8)  # bits, and the HTB class's cburst too (see plan)
    queues = tuple(
        NewQueue(
            queue.queue_id,
            {
                "min-rate": str(queue.min_bps),
                "max-rate": str(queue.max_bps),
                "priority": str(queue.priority),
                "burst": burst,
            },
            {**owner, CLASS_KEY: queue.class_name},
        )
        for queue in plan.queues
    )
    return NewQos(plan.port_name, {"max-rate": str(plan.rate_bps)}, owner, queues)


def changed_ports(
    before: Mapping[str, PortQosState], after: Mapping[str, PortQosState]
) -> frozenset[str]:
    """Ports whose QoS differs between two readings (other rows, other contents), or that
    came or went."""
    return frozenset(
        name for name in before.keys() | after.keys() if before.get(name) != after.get(name)
    )


def replaced_rows(state: PortQosState | None) -> tuple[str, ...]:
    """The QoS and Queue rows to destroy with a port's old QoS: only flowlane's own."""
    if state is None or state.qos_uuid is None or not state.owned:
        return ()
    return (state.qos_uuid, *state.queue_uuids)


def shrinking(plans: Iterable[PortQos], current: Mapping[str, PortQosState]) -> list[str]:
    """Ports that lose a queue: OVS (3.1) leaves the dropped queue's HTB class in the kernel
    when a replacement QoS lacks it, so these have their QoS cleared first, which makes OVS
    rebuild the qdisc from scratch."""
    return [
        plan.port_name
        for plan in plans
        if plan.port_name in current
        and current[plan.port_name].queues.keys() - {q.queue_id for q in plan.queues}
    ]


def garbage(replica: Replica) -> Garbage:
    """flowlane's QoS rows no port references, and its Queue rows no kept QoS references
    (ports deleted under us, or a controller that died between writes)."""
    referenced = {uuid for uuid in replica.port_qos.values() if uuid}
    qos_freed: list[str] = []
    ports: list[str] = []
    kept_queues: set[str] = set()
    for row in replica.qos.values():
        if row.uuid in referenced or OWNER_KEY not in row.external_ids:
            kept_queues.update(row.queues.values())
            continue
        qos_freed.append(row.uuid)
        ports.append(row.external_ids[OWNER_KEY])
    queues = [
        row.uuid
        for row in replica.queues.values()
        if OWNER_KEY in row.external_ids and row.uuid not in kept_queues
    ]
    return Garbage(tuple(sorted(qos_freed)), tuple(sorted(queues)), tuple(sorted(ports)))


def revalidation_s(other_config: Mapping[str, str]) -> float:
    """How often ovs-vswitchd refreshes flow counters: it does so when it revalidates its
    datapath flows, at most every ``other_config:max-revalidator`` ms (500 unset)."""
    milliseconds = _int(other_config.get("max-revalidator", ""))
    return (milliseconds if milliseconds is not None else DEFAULT_REVALIDATION_MS) / 1000


def bridge_of(name: str, datapath_id: Sequence[str], datapath_type: str) -> Bridge | None:
    """A Bridge row as flowlane uses it; None until ovs-vswitchd has given it a datapath id."""
    if not datapath_id or not datapath_id[0]:
        return None
    return Bridge(name, int(datapath_id[0], 16), datapath_type or "system")


# ---- the shell: IDL rows in, transactions out (runs on the connection's thread) ------


def _replica(idl: Any) -> Replica:
    tables = idl.tables
    return Replica(
        port_qos={
            row.name: str(row.qos[0].uuid) if row.qos else None
            for row in tables["Port"].rows.values()
        },
        qos={
            str(row.uuid): QosRow(
                str(row.uuid),
                dict(row.external_ids),
                dict(row.other_config),
                {int(key): str(queue.uuid) for key, queue in row.queues.items()},
            )
            for row in tables["QoS"].rows.values()
        },
        queues={
            str(row.uuid): QueueRow(str(row.uuid), dict(row.external_ids), dict(row.other_config))
            for row in tables["Queue"].rows.values()
        },
    )


def _replica_of(idl: Any, port_names: Iterable[str]) -> Replica:
    """``_replica`` of the named ports only: their QoS rows and those rows' queues.

    What a switch's queue check reads, at every audit of every switch: the whole
    replica reads every row of every bridge (a hundred bridges made it about 30 ms
    of the OVSDB thread, twenty times a second at rest), while one switch's ports
    need a few rows.  ``port_states`` reads the same from either."""
    wanted = set(port_names)
    port_qos: dict[str, str | None] = {}
    qos: dict[str, QosRow] = {}
    queues: dict[str, QueueRow] = {}
    for row in idl.tables["Port"].rows.values():
        name = row.name
        if name not in wanted:
            continue
        qos_row = row.qos[0] if row.qos else None
        if qos_row is None:
            port_qos[name] = None
            continue
        qos_uuid = str(qos_row.uuid)
        port_qos[name] = qos_uuid
        queue_rows = dict(qos_row.queues)
        qos[qos_uuid] = QosRow(
            qos_uuid,
            dict(qos_row.external_ids),
            dict(qos_row.other_config),
            {int(key): str(queue.uuid) for key, queue in queue_rows.items()},
        )
        for queue in queue_rows.values():
            queues[str(queue.uuid)] = QueueRow(
                str(queue.uuid), dict(queue.external_ids), dict(queue.other_config)
            )
    return Replica(port_qos=port_qos, qos=qos, queues=queues)


def _row(idl: Any, table: str, row_uuid: str) -> Any:
    return idl.tables[table].rows.get(uuid.UUID(row_uuid))


def _port_row(idl: Any, name: str) -> Any:
    return next((row for row in idl.tables["Port"].rows.values() if row.name == name), None)


def _bridge_row(idl: Any, name: str) -> Any:
    return next((row for row in idl.tables["Bridge"].rows.values() if row.name == name), None)


def _destroy(idl: Any, row_uuids: Iterable[str]) -> None:
    for row_uuid in row_uuids:
        for table in ("QoS", "Queue"):
            row = _row(idl, table, row_uuid)
            if row is not None:
                row.delete()


def _write_qos(idl: Any, txn: Any, rows: NewQos) -> Any:
    queues = {}
    for spec in rows.queues:
        queue = txn.insert(idl.tables["Queue"])
        queue.other_config = dict(spec.other_config)
        queue.external_ids = dict(spec.external_ids)
        queues[spec.queue_id] = queue
    qos = txn.insert(idl.tables["QoS"])
    qos.type = rows.type
    qos.other_config = dict(rows.other_config)
    qos.external_ids = dict(rows.external_ids)
    qos.queues = queues
    return qos


def _apply_txn(plans: Sequence[PortQos]) -> Callable[[Any, Any], None]:
    def build(idl: Any, txn: Any) -> None:
        names = [plan.port_name for plan in plans]
        current = port_states(_replica_of(idl, names), names)
        for plan in plans:
            port = _port_row(idl, plan.port_name)
            if port is None:
                raise OvsdbError([plan.port_name], f"no port named {plan.port_name}")
            # The port's QoS as this transaction read it: OVSDB says "try again" when
            # another client changed it meanwhile, and the IDL rebuilds from fresh rows.
            port.verify("qos")
            port.qos = [_write_qos(idl, txn, new_qos(plan))]
            _destroy(idl, replaced_rows(current.get(plan.port_name)))

    return build


def _clear_txn(port_names: Sequence[str]) -> Callable[[Any, Any], None]:
    def build(idl: Any, txn: Any) -> None:
        current = port_states(_replica_of(idl, port_names), port_names)
        for name in port_names:
            state = current.get(name)
            if state is None or state.qos_uuid is None:
                continue
            port = _port_row(idl, name)
            port.verify("qos")
            port.qos = []
            _destroy(idl, replaced_rows(state))

    return build


def _garbage_txn(idl: Any, txn: Any) -> list[str]:
    found = garbage(_replica(idl))
    # A row another collector (the harness, a second controller) destroyed meanwhile is
    # deleted by uuid and matches nothing: that does not fail the transaction.
    _destroy(idl, (*found.qos, *found.queues))
    return list(found.ports)


def _bridges(idl: Any) -> list[Bridge]:
    found = []
    for row in idl.tables["Bridge"].rows.values():
        bridge = bridge_of(row.name, row.datapath_id, row.datapath_type)
        if bridge is not None:
            found.append(bridge)
    return found


def _flow_table_limit(bridge: str, table_id: int) -> Callable[[Any], int | None]:
    def read(idl: Any) -> int | None:
        row = _bridge_row(idl, bridge)
        table = row.flow_tables.get(table_id) if row is not None else None
        return int(table.flow_limit[0]) if table is not None and table.flow_limit else None

    return read


def _limit_txn(bridge: str, table_id: int, limit: int) -> Callable[[Any, Any], bool]:
    def build(idl: Any, txn: Any) -> bool:
        if _flow_table_limit(bridge, table_id)(idl) == limit:
            return False
        row = _bridge_row(idl, bridge)
        if row is None:
            raise OvsdbError([bridge], f"no bridge named {bridge}")
        table = txn.insert(idl.tables["Flow_Table"])
        table.flow_limit = [limit]
        table.overflow_policy = ["evict"]
        table.name = ["flowlane-count"]
        row.verify("flow_tables")
        row.flow_tables = {**row.flow_tables, table_id: table}
        return True

    return build


class Ovsdb:
    """The OVSDB operations the controller needs, each one transaction on one connection.

    Methods may be called from any thread; they block until the connection's
    thread has answered.  The connection opens on first use and closes with
    ``close`` (or when the object is collected), so a short-lived client
    (a test, the harness) leaves nothing behind.
    """

    def __init__(self, db: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.remote = db or default_remote()
        self._timeout_s = timeout_s
        self._actor = IdlActor(self.remote, COLUMNS, vswitch_schema())
        weakref.finalize(self, self._actor.close, 0.0)

    def __enter__(self) -> Ovsdb:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._actor.close()

    def _wait(self, future: Future[T], ports: Sequence[str]) -> T:
        try:
            # The connection enforces the timeout itself; the margin only guards
            # against its thread being gone.
            return future.result(timeout=self._timeout_s + 5)
        except IdlError as exc:
            raise OvsdbError(ports, str(exc)) from exc
        except FutureTimeout as exc:
            raise OvsdbError(ports, f"no answer from OVSDB at {self.remote}") from exc

    def _read(self, read: Callable[[Any], T], ports: Sequence[str] = ()) -> T:
        return self._wait(self._actor.submit_read(read, self._timeout_s), ports)

    def _write(
        self,
        build: Callable[[Any, Any], T],
        ports: Sequence[str] = (),
        wait_applied: bool = False,
    ) -> T:
        future = self._actor.submit_write(build, self._timeout_s, wait_applied)
        return self._wait(future, ports)

    def bridges(self) -> list[Bridge]:
        return self._read(_bridges)

    def bridge_for(self, datapath_id: int) -> Bridge | None:
        return next((b for b in self.bridges() if b.datapath_id == datapath_id), None)

    def port_qos(self, port_names: Iterable[str]) -> dict[str, PortQosState]:
        """Current QoS of the named ports (a port absent from OVSDB is absent here)."""
        names = list(port_names)
        return self._read(lambda idl: port_states(_replica_of(idl, names), names), names)

    def apply(self, plans: Sequence[PortQos], current: dict[str, PortQosState]) -> None:
        """Give each planned port a fresh QoS and drop the rows it replaces, in one transaction
        that returns once ovs-vswitchd has applied it (the HTB qdisc exists: tc filters can
        go on it)."""
        if not plans:
            return
        clear_first = shrinking(plans, current)
        if clear_first:
            self.clear(clear_first)
        self._write(_apply_txn(plans), [plan.port_name for plan in plans], wait_applied=True)

    def clear(self, port_names: Sequence[str]) -> None:
        """Remove QoS from ports (destroying the rows when they are flowlane's)."""
        self._write(_clear_txn(list(port_names)), port_names, wait_applied=True)

    def collect_garbage(self) -> list[str]:
        """Destroy flowlane QoS/Queue rows no port references now; the ports they were for."""
        return self._write(_garbage_txn)

    def collect_garbage_on_change(
        self, on_done: Callable[[list[str], OvsdbError | None], None]
    ) -> None:
        """Collect garbage whenever a Port, QoS or Queue row changes (and once on connect),
        calling ``on_done(freed ports, error)`` after each collection that freed or failed.

        Runs on the connection's thread: a change queues one collection (more changes
        meanwhile are covered by it, as it reads the rows when it runs)."""
        queued = False  # only the connection's thread reads or writes it
        # Not ``self``: the subscription must not keep this object (whose collection closes
        # the connection) alive.
        actor, timeout_s = self._actor, self._timeout_s

        def done(future: Future[list[str]]) -> None:
            nonlocal queued
            queued = False
            try:
                freed = future.result()
            except IdlError as exc:
                on_done([], OvsdbError([], str(exc)))
                return
            except OvsdbError as exc:
                on_done([], exc)
                return
            if freed:
                on_done(freed, None)

        def changed(_idl: Any, _tables: frozenset[str]) -> None:
            nonlocal queued
            if queued:
                return
            queued = True
            actor.submit_write(_garbage_txn, timeout_s).add_done_callback(done)

        actor.subscribe(QOS_TABLES, changed)

    def watch_port_qos(self, on_change: Callable[[frozenset[str]], None]) -> None:
        """Call ``on_change(port names)`` whenever the QoS of ports changes in OVSDB (anyone's
        write, this process's included) or ports come or go, on the connection's thread
        (``on_change`` must not block on this client).

        OVS re-creates a port's HTB qdisc when its QoS changes, dropping the tc filters
        the userspace datapath needs: this is how the owner of a port hears of it at once.
        """
        last: dict[str, PortQosState] | None = None  # the connection's thread's alone

        def changed(idl: Any, _tables: frozenset[str]) -> None:
            nonlocal last
            replica = _replica(idl)
            now = port_states(replica, replica.port_qos)
            before, last = last, now
            if before is None:  # the first reading is the baseline, not a change
                return
            ports = changed_ports(before, now)
            if ports:
                on_change(ports)

        self._actor.subscribe(QOS_TABLES, changed)

    def revalidation_s(self) -> float:
        """How often ovs-vswitchd refreshes flow counters (``max-revalidator``, 0.5 s unset)."""

        def read(idl: Any) -> float:
            rows = list(idl.tables["Open_vSwitch"].rows.values())
            return revalidation_s(dict(rows[0].other_config) if rows else {})

        return self._read(read)

    def flow_table_limit(self, bridge: str, table_id: int) -> int | None:
        return self._read(_flow_table_limit(bridge, table_id), [bridge])

    def limit_flow_table(self, bridge: str, table_id: int, limit: int) -> bool:
        """Cap an OpenFlow table (the counting table), OVS evicting the oldest entries.

        Without it a flood of new flows would grow the learned table without
        bound; with eviction a full table drops counting entries, never
        forwarding ones.  True when the limit was (re)written.
        """
        return self._write(_limit_txn(bridge, table_id, limit), [bridge])
