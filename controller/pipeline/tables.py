"""The OpenFlow table layout every switch gets, in packet order.

Three small tables instead of one cross product: a class decision (table 0)
is independent of how the class is marked (table 1) and of where the packet
goes (table 2), so changing a class's DSCP rewrites one flow per class, not
one per rule.
"""

from __future__ import annotations

from typing import Protocol

CLASSIFY = 0
"""Policy rules, first match wins, write the class id into the metadata register."""

MARK = 1
"""One entry per class: set its DSCP and its queue (``set_queue``)."""

FORWARD = 2
"""Forwarding. On one switch the OVS L2 learning switch (``NORMAL``) does it."""

COUNT = 3
"""Counting entries OVS learns, one per unclaimed TCP/UDP flow direction (detection)."""

TABLE_NAMES = {CLASSIFY: "classify", MARK: "mark", FORWARD: "forward", COUNT: "count"}

CLASS_METADATA_MASK = 0xFF
"""Low metadata byte holds ``class index + 1``; 0 means "not classified"."""

RULE_PRIORITY_BASE = 100
MAX_RULES = 4096
DEFAULT_CLASS_PRIORITY = 1
LEARN_PRIORITY = 2
"""Unclaimed TCP/UDP: default class, and learned into COUNT when detection is on."""
OVERRIDE_PRIORITY = 50
"""Detected elephants: above the default entries, below every operator rule."""
MARK_IP_PRIORITY = 20
MARK_OTHER_PRIORITY = 10
FORWARD_PRIORITY = 0


def class_metadata(class_index: int) -> int:
    return class_index + 1


def rule_priority(index: int) -> int:
    """Rule ``index`` (0 first) gets the highest priority left: first match wins."""
    return RULE_PRIORITY_BASE + MAX_RULES - index


JOB_PRIORITY_BASE = 5000
MAX_JOBS = 1000
"""Registered jobs sit above every operator rule: a scheduler naming the exact hosts of a
training run knows more about those flows than a port rule does."""


def job_priority(index: int) -> int:
    """Job ``index`` in name order; two jobs covering one flow resolve by name, stably.

    Two priorities per job: TCP/UDP entries at this one, other IP one below.
    """
    return JOB_PRIORITY_BASE + 2 * (MAX_JOBS - min(index, MAX_JOBS - 1))


# ---- fabric forwarding (``forwarding: fabric``) -------------------------------------------

PUNT_PRIORITY = 65000
"""LLDP and ARP to the controller, in table CLASSIFY above every rule and job: discovery and
proxy ARP must see these frames whatever the policy says."""
PLACEMENT_PRIORITY = 200
"""Placed elephants' exact-match paths, above the per-destination entries they override."""
HOST_PRIORITY = 100
"""One entry per known host MAC: its port here, or a select group over the next hops."""
FLOOD_PRIORITY = 50
"""Broadcast and multicast along the flood tree, per in_port; one below drops off-tree copies."""


class HasTable(Protocol):
    @property
    def table_id(self) -> int: ...


_COUNTED: dict[int, tuple[tuple[HasTable, ...], dict[int, int]]] = {}


def entries_per_table(flows: tuple[HasTable, ...]) -> dict[int, int]:
    """How many of ``flows`` each table of ``TABLE_NAMES`` holds (0 for an empty one).

    Every switch reports this for its confirmed plan, and switches alike confirm the same
    plan (one tuple): counted once per tuple, the last few kept by identity."""
    known = _COUNTED.get(id(flows))
    if known is not None and known[0] is flows:
        return known[1]
    counts = dict.fromkeys(TABLE_NAMES, 0)
    for flow in flows:
        if flow.table_id in counts:
            counts[flow.table_id] += 1
    if len(_COUNTED) >= 16:
        _COUNTED.clear()
    _COUNTED[id(flows)] = (flows, counts)
    return counts
