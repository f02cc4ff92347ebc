"""Per-class counters from the marking table's flow statistics (pure).

Every packet of a class passes exactly one table-1 entry of that class, so
summing their counters by class metadata counts the class without any
extra flows or packet-ins.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from controller.pipeline import tables
from controller.pipeline.flows import InstalledFlow
from controller.policy.model import Policy
from controller.qos.shares import queue_classes


@dataclass(frozen=True, slots=True)
class FlowCounters:
    flow: InstalledFlow
    packets: int
    bytes: int


def class_counters(policy: Policy, flows: Iterable[FlowCounters]) -> dict[str, tuple[int, int]]:
    """Class name → (packets, bytes) from the marking table's entries."""
    # A per-job class's job queues count for the class (``controller.qos.shares``).
    by_metadata = {
        tables.class_metadata(queue): name for queue, name in queue_classes(policy).items()
    }
    totals = dict.fromkeys(policy.class_names, (0, 0))
    for counters in flows:
        if counters.flow.key.table_id != tables.MARK:
            continue
        metadata = next((f.value for f in counters.flow.key.match if f.name == "metadata"), None)
        name = by_metadata.get(metadata) if metadata is not None else None
        if name is not None:
            packets, octets = totals[name]
            totals[name] = (packets + counters.packets, octets + counters.bytes)
    return totals
