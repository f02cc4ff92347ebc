"""The groups a switch holds, as its report stores them.

A group's buckets hold actions, a union of plain dataclasses; several of them
share field names (``table_id``), so a JSON object alone does not say which
one it is unless the union is told how to tell: ``action_kind`` reads it from
the object's fields, and the JSON stays the dataclass's own fields.  Meters
are plain numbers and are stored as ``MeterEntry`` itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from pydantic import ConfigDict, Discriminator, Tag

from controller.pipeline.flows import Group, Learn, Output, Resubmit, SetField, SetQueue
from controller.pipeline.groups import Bucket, GroupEntry, GroupType
from controller.records import RECORD_CONFIG

_KINDS: dict[type, str] = {
    SetField: "set_field",
    SetQueue: "set_queue",
    Output: "output",
    Learn: "learn",
    Resubmit: "resubmit",
    Group: "group",
}
_BY_FIELD = (
    ("idle_timeout", "learn"),  # before ``table_id``: a learn action has one too
    ("table_id", "resubmit"),
    ("field", "set_field"),
    ("queue_id", "set_queue"),
    ("port", "output"),
    ("group_id", "group"),
)


def action_kind(value: Any) -> str | None:
    """Which action a value is: its class, or for JSON the field only that action has."""
    if isinstance(value, dict):
        return next((kind for name, kind in _BY_FIELD if name in value), None)
    return _KINDS.get(type(value))


ActionRecord = Annotated[
    Annotated[SetField, Tag("set_field")]
    | Annotated[SetQueue, Tag("set_queue")]
    | Annotated[Output, Tag("output")]
    | Annotated[Learn, Tag("learn")]
    | Annotated[Resubmit, Tag("resubmit")]
    | Annotated[Group, Tag("group")],
    Discriminator(action_kind),
]
"""An ``Action``, told apart by its fields."""


@dataclass(frozen=True, slots=True)
class BucketRecord:
    __pydantic_config__: ClassVar[ConfigDict] = RECORD_CONFIG

    actions: tuple[ActionRecord, ...]
    watch_port: int | None = None
    weight: int = 1


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """One group a switch holds: its id, type and buckets."""

    __pydantic_config__: ClassVar[ConfigDict] = RECORD_CONFIG

    group_id: int
    type: GroupType
    buckets: tuple[BucketRecord, ...] = ()

    @staticmethod
    def of(group: GroupEntry) -> GroupRecord:
        return GroupRecord(
            group.group_id,
            group.type,
            tuple(BucketRecord(b.actions, b.watch_port, b.weight) for b in group.buckets),
        )

    def entry(self) -> GroupEntry:
        buckets = tuple(Bucket(b.actions, b.watch_port, b.weight) for b in self.buckets)
        return GroupEntry(self.type, buckets, self.group_id)
