"""Group and meter entries as plain values, and the diff that brings a switch to a plan.

Groups carry fabric multipath: one ``select`` group per distinct set of next
hops, each bucket watching its port so the datapath itself skips a dead
link before the controller hears of it.  A group's id is derived from its
buckets, as a flow's cookie is from its content, so two switches (or two
plans) that want the same spread share the same id and a re-plan that keeps
a spread sends nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from controller.pipeline.flows import Action

MAX_GROUP_ID = 0xFFFFFF00
"""OpenFlow reserves ids above this (``OFPG_ALL``, ``OFPG_ANY``)."""


class GroupType(StrEnum):
    ALL = "all"
    SELECT = "select"
    FAST_FAILOVER = "ff"


@dataclass(frozen=True, slots=True, order=True)
class Bucket:
    """One bucket: its actions, applied only while ``watch_port`` is live (None: always)."""

    actions: tuple[Action, ...]
    watch_port: int | None = None
    weight: int = 1


@dataclass(frozen=True, slots=True)
class GroupEntry:
    """A group as planned; ``group_id`` comes from the type and buckets unless given."""

    type: GroupType
    buckets: tuple[Bucket, ...]
    group_id: int = field(default=0)

    def __post_init__(self) -> None:
        if self.group_id == 0:
            digest = hashlib.blake2b(repr((self.type, self.buckets)).encode(), digest_size=4)
            group_id = int.from_bytes(digest.digest(), "big") % (MAX_GROUP_ID - 1) + 1
            object.__setattr__(self, "group_id", group_id)


@dataclass(frozen=True, slots=True)
class MeterEntry:
    """A packet-rate meter with a drop band (what OVS's userspace datapath implements)."""

    meter_id: int
    rate_pps: int
    burst: int


@dataclass(frozen=True, slots=True)
class GroupDiff:
    """``add`` before the flows that use them; ``delete`` after the flows that used them."""

    add: tuple[GroupEntry, ...] = ()
    modify: tuple[GroupEntry, ...] = ()
    delete: tuple[int, ...] = ()
    unchanged: int = 0

    @property
    def empty(self) -> bool:
        return not self.add and not self.modify and not self.delete


def diff_groups(installed: Mapping[int, GroupEntry], planned: Iterable[GroupEntry]) -> GroupDiff:
    """Groups by id: new ones added, changed ones modified, unplanned ones deleted.

    Like flows, groups the plan does not name are removed whoever made them:
    the plan owns the switch.
    """
    want: dict[int, GroupEntry] = {}
    for group in planned:
        if group.group_id in want and want[group.group_id] != group:
            raise ValueError(f"plan has two different groups with id {group.group_id:#x}")
        want[group.group_id] = group
    add = tuple(group for gid, group in sorted(want.items()) if gid not in installed)
    modify = tuple(
        group for gid, group in sorted(want.items()) if gid in installed and installed[gid] != group
    )
    delete = tuple(sorted(gid for gid in installed if gid not in want))
    return GroupDiff(add, modify, delete, len(want) - len(add) - len(modify))
