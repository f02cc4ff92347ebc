"""A sync's reads of the switch, decoded as they complete (ports, flows, groups, meters)."""

from __future__ import annotations

from controller.openflow import messages
from controller.openflow.installed import installed_entries
from controller.pipeline import tables
from controller.pipeline.groups import GroupEntry, GroupType, MeterEntry
from controller.switch import codec
from controller.switch.fastreplace import replace
from controller.switch.state import Ask, Sync

FOREIGN_GROUP = GroupEntry(type=GroupType.ALL, buckets=(), group_id=0xFFFFFF00 - 1)
"""Stands for a group flowlane cannot decode: never equal to a planned one, so it is deleted."""


def taken(sync: Sync, what: Ask, parts: tuple[object, ...]) -> Sync:
    """``sync`` with the complete answer to one of its reads (raises if it cannot be decoded)."""
    if what is Ask.PORTS:
        return replace(sync, ports=codec.own_ports(parts))
    if what is Ask.FLOWS:
        bodies = [part for part in parts if isinstance(part, bytes)]
        return replace(sync, flows=tuple(installed_entries(bodies, tables.COUNT)))
    if what is Ask.GROUPS:
        groups: dict[int, GroupEntry] = {}
        for desc in parts:
            group = messages.installed_group(desc)
            # Undecodable groups are someone else's: keep their id so the diff deletes them.
            group_id = int(desc.group_id)  # type: ignore[attr-defined]
            groups[group_id] = group if group is not None else FOREIGN_GROUP
        return replace(sync, groups=groups)
    if what is Ask.METERS:
        meters: dict[int, MeterEntry] = {}
        for entry in parts:
            meter_id = int(entry.meter_id)  # type: ignore[attr-defined]
            # A meter we cannot decode still holds its id: a planned one is sent as a modify.
            meters[meter_id] = messages.installed_meter(entry) or MeterEntry(meter_id, 0, 0)
        return replace(sync, meters=meters)
    return sync
