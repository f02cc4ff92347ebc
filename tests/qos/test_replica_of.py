"""The named ports' replica (what a queue check reads) says what the whole replica says.

``_replica_of`` reads only the named ports' rows, for speed at a hundred bridges; fed the
same IDL rows as ``_replica``, ``port_states`` must come out the same for those ports.
"""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

from controller.qos.ovsdb import OWNER_KEY, _replica, _replica_of, port_states


def _queue(min_rate: int) -> SimpleNamespace:
    return SimpleNamespace(
        uuid=uuid.uuid4(), external_ids={}, other_config={"min-rate": str(min_rate)}
    )


def _qos(port: str, queues: dict[int, SimpleNamespace]) -> SimpleNamespace:
    return SimpleNamespace(
        uuid=uuid.uuid4(),
        external_ids={OWNER_KEY: port},
        other_config={"max-rate": "1000000"},
        queues=queues,
    )


def _idl(ports: list[SimpleNamespace], qos: list[SimpleNamespace], queues: list[Any]) -> Any:
    def table(rows: list[Any]) -> SimpleNamespace:
        return SimpleNamespace(rows={row.uuid: row for row in rows})

    return SimpleNamespace(tables={"Port": table(ports), "QoS": table(qos), "Queue": table(queues)})


def test_the_named_ports_read_alone_are_read_as_from_the_whole_replica() -> None:
    queues = [_queue(rate) for rate in (10, 20, 30, 40)]
    with_two = _qos("b1p1", {0: queues[0], 1: queues[1]})
    with_one = _qos("b2p1", {0: queues[2]})
    foreign = _qos("elsewhere", {0: queues[3]})
    ports = [
        SimpleNamespace(uuid=uuid.uuid4(), name="b1p1", qos=[with_two]),
        SimpleNamespace(uuid=uuid.uuid4(), name="b2p1", qos=[with_one]),
        SimpleNamespace(uuid=uuid.uuid4(), name="b3p1", qos=[]),
        SimpleNamespace(uuid=uuid.uuid4(), name="b4p1", qos=[foreign]),
    ]
    idl = _idl(ports, [with_two, with_one, foreign], queues)
    for names in (["b1p1"], ["b2p1", "b3p1"], ["b3p1", "missing"], ["b1p1", "b4p1"], []):
        assert port_states(_replica_of(idl, names), names) == port_states(_replica(idl), names)
    partial = _replica_of(idl, ["b1p1"])
    assert set(partial.port_qos) == {"b1p1"}
    assert set(partial.queues) == {str(queues[0].uuid), str(queues[1].uuid)}
