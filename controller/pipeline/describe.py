"""Flows, queues and the changes between two states of a switch, as text an operator can read.

The API's plan endpoint and the CLI show what a policy would do to a switch
before it is applied; both speak through this module so that a flow reads the
same everywhere.  The text follows ``ovs-ofctl dump-flows`` in spirit, but
keeps flowlane's OXM field names, the names the policy file uses::

    table=0 priority=4194 eth_type=0x0800,ip_proto=6,tcp_dst=8000/0xfffe \
        actions=write_metadata:0x1/0xff,goto_table:1 cookie=0xf102a1b2c3d4e5f6

- fields appear in prerequisite order (``in_port``, ``metadata``, ``eth_type``,
  ``ip_proto``, addresses, ports), not in ``make_match``'s alphabetical order;
- ``eth_type``, ``vlan_vid`` and ``metadata`` are hexadecimal, ``in_port``,
  ``ip_proto``, ``ip_dscp`` and L4 ports decimal, masks hexadecimal;
- IPv4 addresses are dotted quads with a prefix length (``10.0.0.0/24``) when
  the mask is contiguous;
- an empty match (every packet) is left out, as ``ovs-ofctl`` does.

Pure: no I/O, so the diff shown to an operator can be unit-tested exactly.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from controller.pipeline.diff import diff_flows
from controller.pipeline.flows import (
    OFPP_CONTROLLER,
    OFPP_NORMAL,
    Action,
    ApplyActions,
    FlowEntry,
    GotoTable,
    Group,
    InstalledFlow,
    Learn,
    Match,
    MatchField,
    Meter,
    Resubmit,
    SetField,
    SetQueue,
    WriteMetadata,
)
from controller.pipeline.groups import GroupEntry, MeterEntry
from controller.policy.units import format_rate
from controller.qos.plan import PortQos, QueueSpec

FIELD_ORDER = (
    "in_port",
    "metadata",
    "eth_type",
    "vlan_vid",
    "ip_proto",
    "ip_dscp",
    "ipv4_src",
    "ipv4_dst",
    "tcp_src",
    "tcp_dst",
    "udp_src",
    "udp_dst",
)
"""Display order: a field's prerequisites come before it, as in an OpenFlow match."""

_HEX_FIELDS = {"metadata": 0, "eth_type": 4, "vlan_vid": 4}
"""Fields shown in hexadecimal, with the zero-padded width of their value."""


def _field_rank(match_field: MatchField) -> tuple[int, str]:
    name = match_field.name
    return (FIELD_ORDER.index(name) if name in FIELD_ORDER else len(FIELD_ORDER), name)


def _ipv4_text(value: int, mask: int | None) -> str:
    address = str(ipaddress.IPv4Address(value & 0xFFFFFFFF))
    if mask is None:
        return address
    try:
        prefix = ipaddress.IPv4Network(f"0.0.0.0/{ipaddress.IPv4Address(mask)}").prefixlen
    except ValueError:  # a non-contiguous mask has no prefix length
        return f"{address}/{ipaddress.IPv4Address(mask & 0xFFFFFFFF)}"
    return f"{address}/{prefix}"


def format_field(match_field: MatchField) -> str:
    """One ``name=value[/mask]`` term of a match."""
    name, value, mask = match_field.name, match_field.value, match_field.mask
    if name in ("ipv4_src", "ipv4_dst"):
        return f"{name}={_ipv4_text(value, mask)}"
    text = f"0x{value:0{_HEX_FIELDS[name]}x}" if name in _HEX_FIELDS else str(value)
    return f"{name}={text}" if mask is None else f"{name}={text}/{mask:#x}"


def format_match(match: Match) -> str:
    """``eth_type=0x0800,ip_proto=6,tcp_dst=8000/0xfffe``; ``""`` for the match-all."""
    return ",".join(format_field(f) for f in sorted(match, key=_field_rank))


def _format_action(action: Action) -> str:
    if isinstance(action, SetField):
        return f"set_field:{action.value}->{action.field}"
    if isinstance(action, SetQueue):
        return f"set_queue:{action.queue_id}"
    if isinstance(action, Learn):
        return (
            f"learn(table={action.table_id},idle_timeout={action.idle_timeout},"
            f"eth_type={action.eth_type:#06x},ip_proto={action.ip_proto},5-tuple)"
        )
    if isinstance(action, Resubmit):
        return f"resubmit(,{action.table_id})"
    if isinstance(action, Group):
        return f"group:{action.group_id}"
    if action.port == OFPP_CONTROLLER:
        return "CONTROLLER:65535"
    return "NORMAL" if action.port == OFPP_NORMAL else f"output:{action.port}"


def format_actions(flow: FlowEntry) -> str:
    """Instructions in ``ovs-ofctl`` order and spelling; ``drop`` when there are none."""
    parts: list[str] = []
    for instruction in flow.instructions:
        if isinstance(instruction, ApplyActions):
            parts.extend(_format_action(action) for action in instruction.actions)
        elif isinstance(instruction, Meter):
            parts.append(f"meter:{instruction.meter_id}")
        elif isinstance(instruction, WriteMetadata):
            parts.append(f"write_metadata:{instruction.value:#x}/{instruction.mask:#x}")
        elif isinstance(instruction, GotoTable):
            parts.append(f"goto_table:{instruction.table_id}")
    return ",".join(parts) or "drop"


def format_flow(flow: FlowEntry | InstalledFlow, *, previous_cookie: int | None = None) -> str:
    """A planned entry (with its actions) or an installed one (key and cookie only).

    ``previous_cookie`` shows a changed entry as ``cookie=0xold->0xnew``.
    """
    key = flow.key
    parts = [f"table={key.table_id}", f"priority={key.priority}"]
    match = format_match(key.match)
    if match:
        parts.append(match)
    if isinstance(flow, FlowEntry):
        parts.append(f"actions={format_actions(flow)}")
    cookie = f"{flow.cookie:#x}"
    if previous_cookie is not None and previous_cookie != flow.cookie:
        cookie = f"{previous_cookie:#x}->{cookie}"
    parts.append(f"cookie={cookie}")
    return " ".join(parts)


def format_group(group: GroupEntry) -> str:
    """``group_id=0x1a2b3c4d type=select bucket=watch_port:3,actions=output:3 bucket=...``,
    as ``ovs-ofctl dump-groups`` spells a group, one ``bucket=`` per bucket."""
    parts = [f"group_id={group.group_id:#x}", f"type={group.type}"]
    for bucket in group.buckets:
        terms = [] if bucket.watch_port is None else [f"watch_port:{bucket.watch_port}"]
        if bucket.weight != 1:
            terms.append(f"weight:{bucket.weight}")
        actions = ",".join(_format_action(action) for action in bucket.actions) or "drop"
        terms.append(f"actions={actions}")
        parts.append("bucket=" + ",".join(terms))
    return " ".join(parts)


def format_meter(meter: MeterEntry) -> str:
    """``meter=1 pktps bands=type=drop rate=100 burst_size=10``, as ``ovs-ofctl dump-meters``."""
    return (
        f"meter={meter.meter_id} pktps bands=type=drop rate={meter.rate_pps}"
        f" burst_size={meter.burst}"
    )


# --------------------------------------------------------------------------------------------
# Flow changes
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChangedFlow:
    """An entry whose key stays but whose content (so its cookie) changes."""

    installed: InstalledFlow
    planned: FlowEntry

    def __str__(self) -> str:
        return format_flow(self.planned, previous_cookie=self.installed.cookie)


@dataclass(frozen=True, slots=True)
class FlowChanges:
    """What applying a plan would do to a switch's flow table.

    ``added`` and ``changed`` keep plan order (classification rules first, in
    rule order); ``removed`` is in key order.
    """

    added: tuple[FlowEntry, ...]
    changed: tuple[ChangedFlow, ...]
    removed: tuple[InstalledFlow, ...]
    unchanged: int

    @property
    def empty(self) -> bool:
        return not self.added and not self.changed and not self.removed


def flow_changes(installed: Iterable[InstalledFlow], planned: Iterable[FlowEntry]) -> FlowChanges:
    """Split the controller's own diff into added, changed and removed entries.

    Built on ``diff_flows`` so that what an operator is shown is exactly what
    the controller would send: an entry is *added* when its key is not
    installed, *changed* when its key is installed with another cookie, and
    *removed* when an installed key is not planned (whoever installed it).
    """
    have = {flow.key: flow for flow in installed}
    diff = diff_flows(have.values(), planned)
    added = tuple(flow for flow in diff.add if flow.key not in have)
    changed = tuple(ChangedFlow(have[flow.key], flow) for flow in diff.add if flow.key in have)
    removed = tuple(have[key] for key in diff.delete)
    return FlowChanges(added, changed, removed, diff.unchanged)


# --------------------------------------------------------------------------------------------
# Queue changes
# --------------------------------------------------------------------------------------------


class QueueLike(Protocol):
    """A queue as planned or as a switch reports it: the same record, ``QueueSpec``."""

    @property
    def queue_id(self) -> int: ...
    @property
    def class_name(self) -> str: ...
    @property
    def min_bps(self) -> int: ...
    @property
    def max_bps(self) -> int: ...
    @property
    def priority(self) -> int: ...
    @property
    def dscp(self) -> int: ...


QUEUE_FIELDS = ("class_name", "min_bps", "max_bps", "priority", "dscp")
"""What must match for a reported queue to be the planned one (``queue_id`` is the key)."""


def _queue_value(name: str, value: object) -> str:
    if name in ("min_bps", "max_bps") and isinstance(value, int):
        return format_rate(value)
    return str(value)


def format_queue(queue: QueueLike) -> str:
    """``queue 0 (inference): min 2Gbit, max 10Gbit, priority 0, dscp 46``; a job queue of a
    per-job class ends with its jobs: ``, jobs a, b``."""
    jobs: tuple[str, ...] = getattr(queue, "jobs", ())
    return (
        f"queue {queue.queue_id} ({queue.class_name}): min {format_rate(queue.min_bps)},"
        f" max {format_rate(queue.max_bps)}, priority {queue.priority}, dscp {queue.dscp}"
        + (f", jobs {', '.join(jobs)}" if jobs else "")
    )


@dataclass(frozen=True, slots=True)
class ChangedQueue:
    current: QueueLike
    planned: QueueSpec
    fields: tuple[str, ...]
    """The fields of ``QUEUE_FIELDS`` that differ."""

    def __str__(self) -> str:
        changes = ", ".join(
            f"{name} {_queue_value(name, getattr(self.current, name))}"
            f"->{_queue_value(name, getattr(self.planned, name))}"
            for name in self.fields
        )
        return f"queue {self.planned.queue_id} ({self.planned.class_name}): {changes}"


@dataclass(frozen=True, slots=True)
class QueueChanges:
    """What applying a plan would do to one port's queues, by queue id."""

    added: tuple[QueueSpec, ...]
    changed: tuple[ChangedQueue, ...]
    removed: tuple[QueueLike, ...]
    unchanged: int

    @property
    def empty(self) -> bool:
        return not self.added and not self.changed and not self.removed


def queue_changes(current: Iterable[QueueLike], planned: PortQos) -> QueueChanges:
    """Compare the queues a port reports with the ones its plan wants, by queue id."""
    have = {queue.queue_id: queue for queue in current}
    want = {queue.queue_id: queue for queue in planned.queues}
    added: list[QueueSpec] = []
    changed: list[ChangedQueue] = []
    unchanged = 0
    for queue_id, spec in sorted(want.items()):
        reported = have.get(queue_id)
        if reported is None:
            added.append(spec)
            continue
        differing = tuple(
            name for name in QUEUE_FIELDS if getattr(reported, name) != getattr(spec, name)
        )
        if differing:
            changed.append(ChangedQueue(reported, spec, differing))
        else:
            unchanged += 1
    removed = tuple(queue for queue_id, queue in sorted(have.items()) if queue_id not in want)
    return QueueChanges(tuple(added), tuple(changed), removed, unchanged)
