"""What flowlane reads from and writes to OVSDB, decided on rows as values (no OVS needed).

The OVSDB client (``Ovsdb``) only runs these functions on its replica and
turns their answers into transactions, so the decisions are checked here:
what a port's QoS is, what a plan writes, when a port is replaced rather
than kept, and which rows are garbage.
"""

from __future__ import annotations

import pytest

from controller.policy.load import parse_policy
from controller.qos.ovsdb import (
    CLASS_KEY,
    OWNER_KEY,
    Bridge,
    NewQos,
    PortQosState,
    QosRow,
    QueueRow,
    QueueState,
    Replica,
    bridge_of,
    changed_ports,
    garbage,
    new_qos,
    port_states,
    replaced_rows,
    revalidation_s,
    shrinking,
)
from controller.qos.plan import PortQos, plan_port_qos

POLICY = parse_policy(
    {
        "classes": {
            "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
            "training": {"priority": 1, "dscp": 26, "min_rate": "70%"},
        },
        "default_class": "inference",
        "ports": {"rate": "1Gbit"},
    },
    source="test",
)


def written(rows: NewQos, qos_uuid: str = "qos-1") -> Replica:
    """The replica after OVSDB took ``rows`` for their port (uuids made up)."""
    queues = {
        f"{qos_uuid}-q{q.queue_id}": QueueRow(
            f"{qos_uuid}-q{q.queue_id}", q.external_ids, q.other_config
        )
        for q in rows.queues
    }
    qos = QosRow(
        qos_uuid,
        rows.external_ids,
        rows.other_config,
        {q.queue_id: f"{qos_uuid}-q{q.queue_id}" for q in rows.queues},
    )
    return Replica({rows.port_name: qos_uuid}, {qos_uuid: qos}, queues)


def test_a_plan_is_written_as_htb_rows_owned_by_its_port_with_the_burst_in_bits() -> None:
    plan = plan_port_qos(POLICY, "s1-eth1", None)
    rows = new_qos(plan)
    assert rows.type == "linux-htb"
    assert rows.other_config == {"max-rate": "1000000000"}
    assert rows.external_ids == {OWNER_KEY: "s1-eth1"}
    inference, training = rows.queues
    assert (inference.queue_id, training.queue_id) == (0, 1)
    assert inference.other_config == {
        "min-rate": "200000000",
        "max-rate": "1000000000",
        "priority": "0",
        "burst": str(250_000 * 8),  # 2 ms at 1 Gbit/s, in bits
    }
    assert training.external_ids == {OWNER_KEY: "s1-eth1", CLASS_KEY: "training"}
    # OVSDB takes strings in other_config: every value is one
    assert all(isinstance(v, str) for q in rows.queues for v in q.other_config.values())


def test_what_a_plan_writes_reads_back_as_satisfying_it() -> None:
    """So a port is re-created only when its rows went stale, never on every audit."""
    plan = plan_port_qos(POLICY, "s1-eth1", None)
    state = port_states(written(new_qos(plan)), ["s1-eth1"])["s1-eth1"]
    assert state.owned and state.qos_uuid == "qos-1"
    assert state.queues[0] == QueueState(200_000_000, 1_000_000_000, 0, 2_000_000)
    assert state.satisfies(plan)
    slower = plan_port_qos(POLICY, "s1-eth1", 100_000_000)  # the link got slower
    assert not state.satisfies(slower)


def test_a_port_without_qos_a_foreign_qos_and_an_absent_port() -> None:
    foreign = QosRow("qos-f", {"owner": "someone"}, {"max-rate": "5"}, {})
    replica = Replica({"a": None, "b": "qos-f", "c": "qos-gone"}, {"qos-f": foreign}, {})
    states = port_states(replica, ["a", "b", "c", "d"])
    assert states["a"] == PortQosState("a", None, False, None, {}, ())
    assert states["b"].qos_uuid == "qos-f" and not states["b"].owned
    assert states["b"].rate_bps == 5
    # a reference the replica cannot resolve reads as no QoS: the plan replaces it
    assert states["c"].qos_uuid is None
    assert "d" not in states  # not in OVSDB (deleted, or not yet added)


def test_a_queue_missing_its_burst_reads_as_zero_and_is_stale() -> None:
    plan = plan_port_qos(POLICY, "s1-eth1", None)
    rows = new_qos(plan)
    replica = written(rows)
    queues = {
        uuid: QueueRow(
            uuid, row.external_ids, {k: v for k, v in row.other_config.items() if k != "burst"}
        )
        for uuid, row in replica.queues.items()
    }
    state = port_states(Replica(replica.port_qos, replica.qos, queues), ["s1-eth1"])["s1-eth1"]
    assert state.queues[0].burst_bits == 0
    assert not state.satisfies(plan)


def test_a_port_changed_when_its_qos_rows_or_their_contents_did() -> None:
    plan = plan_port_qos(POLICY, "p", None)
    before = port_states(written(new_qos(plan)), ["p"])
    same = port_states(written(new_qos(plan)), ["p"])
    assert changed_ports(before, same) == frozenset()
    replaced = port_states(written(new_qos(plan), qos_uuid="qos-2"), ["p"])
    assert changed_ports(before, replaced) == {"p"}  # same contents, new rows: a new qdisc
    slower = port_states(written(new_qos(plan_port_qos(POLICY, "p", 10**8))), ["p"])
    assert changed_ports(before, slower) == {"p"}
    cleared = {"p": PortQosState("p", None, False, None, {}, ())}
    assert changed_ports(before, cleared) == {"p"}
    assert changed_ports(before, {}) == {"p"}  # the port went
    assert changed_ports({}, cleared) == {"p"}  # a port came


def test_only_flowlanes_own_rows_are_destroyed_with_a_replaced_qos() -> None:
    owned = PortQosState("p", "qos-1", True, 1, {}, ("q0", "q1"))
    assert replaced_rows(owned) == ("qos-1", "q0", "q1")
    assert replaced_rows(PortQosState("p", "qos-2", False, 1, {}, ("q9",))) == ()
    assert replaced_rows(PortQosState("p", None, False, None, {}, ())) == ()
    assert replaced_rows(None) == ()


def test_a_port_that_loses_a_queue_is_cleared_first() -> None:
    three = PortQosState("p", "qos", True, 1, {i: QueueState(1, 1, 0) for i in (0, 1, 2)}, ())
    two = PortQos("p", 1, plan_port_qos(POLICY, "p", None).queues)  # queues 0 and 1
    assert shrinking([two], {"p": three}) == ["p"]
    one = PortQosState("p", "qos", True, 1, {0: QueueState(1, 1, 0)}, ())
    assert shrinking([two], {"p": one}) == []  # growing is a plain replacement
    assert shrinking([two], {}) == []


def test_garbage_is_flowlanes_unreferenced_rows_and_nothing_else() -> None:
    def qos(uuid: str, owner: str | None, queues: dict[int, str]) -> QosRow:
        return QosRow(uuid, {OWNER_KEY: owner} if owner else {}, {}, queues)

    def queue(uuid: str, owner: str | None) -> QueueRow:
        return QueueRow(uuid, {OWNER_KEY: owner} if owner else {}, {})

    replica = Replica(
        port_qos={"live": "qos-live", "bare": None},
        qos={
            "qos-live": qos("qos-live", "live", {0: "q-live"}),
            "qos-dead": qos("qos-dead", "gone", {0: "q-dead0", 1: "q-dead1"}),
            "qos-foreign": qos("qos-foreign", None, {0: "q-shared"}),
        },
        queues={
            "q-live": queue("q-live", "live"),
            "q-dead0": queue("q-dead0", "gone"),
            "q-dead1": queue("q-dead1", "gone"),
            "q-orphan": queue("q-orphan", "older"),  # its QoS went in an earlier collection
            "q-shared": queue("q-shared", "other"),  # referenced by a QoS someone else owns
            "q-foreign": queue("q-foreign", None),
        },
    )
    found = garbage(replica)
    assert found.qos == ("qos-dead",)
    assert found.queues == ("q-dead0", "q-dead1", "q-orphan")
    assert found.ports == ("gone",)
    # once collected, nothing is left to collect
    after = Replica(
        replica.port_qos,
        {k: v for k, v in replica.qos.items() if k not in found.qos},
        {k: v for k, v in replica.queues.items() if k not in found.queues},
    )
    assert garbage(after).qos == () and garbage(after).queues == ()


@pytest.mark.parametrize(
    ("other_config", "seconds"),
    [({}, 0.5), ({"max-revalidator": "100"}, 0.1), ({"max-revalidator": "junk"}, 0.5)],
)
def test_the_counter_refresh_is_max_revalidator_in_seconds(
    other_config: dict[str, str], seconds: float
) -> None:
    assert revalidation_s(other_config) == seconds


def test_a_bridge_has_its_datapath_id_once_ovs_vswitchd_gave_it_one() -> None:
    assert bridge_of("s1", ["0000000000000011"], "netdev") == Bridge("s1", 17, "netdev")
    assert bridge_of("s1", ["0000000000000011"], "") == Bridge("s1", 17, "system")
    assert bridge_of("s1", [], "netdev") is None
    assert Bridge("s1", 1, "netdev").userspace and not Bridge("s1", 1, "system").userspace
