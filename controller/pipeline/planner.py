"""Policy → the complete set of flows one switch should hold.

Pure: the same policy and port map always give the same flows (and so the
same cookies), which is what makes re-planning after a reconnect a no-op.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar, cast

from controller.flowid import FlowId
from controller.pipeline import tables
from controller.pipeline.flows import (
    OFPP_NORMAL,
    ApplyActions,
    FlowEntry,
    GotoTable,
    Instruction,
    Learn,
    Match,
    MatchField,
    Output,
    Owner,
    Resubmit,
    SetField,
    SetQueue,
    WriteMetadata,
    cookie_owner,
    make_match,
    owner_cookie,
)
from controller.pipeline.rules import expand_match
from controller.policy.jobs import JobSpec
from controller.policy.match import (
    ETH_TYPE_IPV4,
    ETH_TYPE_IPV6,
    IP_PROTO_TCP,
    IP_PROTO_UDP,
    MatchSpec,
)
from controller.policy.model import Policy, Rule
from controller.qos.shares import job_queue_ids, job_slots

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SwitchPlan:
    """Every flow a switch should have, plus the rules that could not apply there."""

    flows: tuple[FlowEntry, ...]
    unresolved_rules: tuple[str, ...] = ()


def _classify_to(queue_id: int) -> tuple[WriteMetadata, GotoTable]:
    metadata = tables.class_metadata(queue_id)
    return (
        WriteMetadata(metadata, tables.CLASS_METADATA_MASK),
        GotoTable(tables.MARK),
    )


def classification_flows(
    policy: Policy, port_numbers: Mapping[str, int]
) -> tuple[list[FlowEntry], list[str]]:
    """Table 0: one priority per rule, earlier rules higher, so the first match wins.

    Priorities count down from a fixed ceiling, so appending a rule leaves
    every existing entry (and its cookie) as it was.
    """
    flows: list[FlowEntry] = []
    unresolved: list[str] = []
    idle = _learn_idle(policy)
    for index, rule in enumerate(policy.rules):
        in_port = rule.match.in_port
        number: int | None = None
        if isinstance(in_port, str):
            if in_port not in port_numbers:
                unresolved.append(rule.name)
                continue
            number = port_numbers[in_port]
        flows.extend(_rule_flows(rule, index, policy.queue_id(rule.traffic_class), idle, number))
    flows.append(
        FlowEntry(
            tables.CLASSIFY,
            tables.DEFAULT_CLASS_PRIORITY,
            make_match(),
            _classify_to(policy.queue_id(policy.default_class)),
            Owner.POLICY,
        )
    )
    flows.extend(learning_flows(policy))
    return flows, unresolved


@functools.lru_cache(maxsize=16_384)
def _rule_flows(
    rule: Rule, index: int, queue_id: int, idle: int | None, in_port: int | None
) -> tuple[FlowEntry, ...]:
    """One rule's entries, from everything they depend on and nothing else.

    A policy change usually edits one rule of many, and every switch re-plans
    at once: building a 100-rule plan took about 10 ms of CPU per switch,
    nearly all of it for entries that did not change.  Rules are immutable
    and hashable, so the entries of an unchanged rule (same place, same
    class queue, same detection timeout, same port) come from this cache;
    its size bounds the memory to about that many rules' entries.
    """
    name = rule.match.in_port
    ports = {name: in_port} if isinstance(name, str) and in_port is not None else {}
    matches = expand_match(rule.match, ports, rule.bidirectional)
    return _counted_entries(
        tables.rule_priority(index),
        matches,
        idle,
        learned_cookie(Origin.RULE, index),
        _classify_to(queue_id),
        Owner.POLICY,
    )


def _counted_entries(
    priority: int,
    matches: Iterable[Match],
    idle: int | None,
    cookie: int,
    then: tuple[Instruction, ...],
    owner: Owner,
) -> tuple[FlowEntry, ...]:
    """Table-0 entries classifying ``matches`` (and counting them, see ``_counted``)."""
    return tuple(
        FlowEntry(tables.CLASSIFY, priority, match, _counted(idle, match, cookie, then), owner)
        for match in matches
    )


class Origin(IntEnum):
    """What classified a counted flow; kept in its learned entry's cookie (``why``)."""

    DEFAULT = 0
    RULE = 1
    JOB = 2


def learned_cookie(origin: Origin, index: int = 0) -> int:
    return owner_cookie(Owner.LEARNED, (int(origin) << 40) | (index & 0xFFFFFFFFFF))


@functools.lru_cache(maxsize=65_536)
def learned_origin(cookie: int) -> tuple[Origin, int] | None:
    """(origin, rule or job index) of a counting entry's cookie; None if not one of ours.

    Asked for every counted flow at every poll, of a few distinct cookies (one per rule
    and job): remembered, as the two enum look-ups were a tenth of a poll's CPU."""
    if cookie_owner(cookie) is not Owner.LEARNED:
        return None
    try:
        return Origin((cookie >> 40) & 0xFF), cookie & 0xFFFFFFFFFF
    except ValueError:
        return None


LEARNED_COOKIE = learned_cookie(Origin.DEFAULT)


def _learn_idle(policy: Policy) -> int | None:
    """The counting entries' idle timeout; None when detection is off (nothing is counted)."""
    if policy.detection is None:
        return None
    return max(1, math.ceil(policy.detection.release_after))


def _counted(
    idle: int | None, match: Match, cookie: int, then: tuple[Instruction, ...]
) -> tuple[Instruction, ...]:
    """``then``, preceded by learn + resubmit into the counting table when the match is one
    TCP or UDP flow family and detection is on (``idle`` set), so the flow view can say why."""
    if idle is None:
        return then
    fields = {f.name: f.value for f in match}
    eth_type, ip_proto = fields.get("eth_type"), fields.get("ip_proto")
    if eth_type not in (ETH_TYPE_IPV4, ETH_TYPE_IPV6) or ip_proto not in (
        IP_PROTO_TCP,
        IP_PROTO_UDP,
    ):
        return then
    assert eth_type is not None and ip_proto is not None
    learn = Learn(tables.COUNT, eth_type, ip_proto, idle, cookie)
    return (ApplyActions((learn, Resubmit(tables.COUNT))), *then)


def learning_flows(policy: Policy) -> list[FlowEntry]:
    """Unclaimed TCP/UDP flows: default class, and a counting entry learned per direction.

    Only with detection on.  The learned entries are what the detector
    polls; they expire on their own when a flow goes quiet for as long as an
    override would be kept.
    """
    idle = _learn_idle(policy)
    if idle is None:
        return []
    flows = []
    for eth_type in (ETH_TYPE_IPV4, ETH_TYPE_IPV6):
        for ip_proto in (IP_PROTO_TCP, IP_PROTO_UDP):
            learn = Learn(tables.COUNT, eth_type, ip_proto, idle, LEARNED_COOKIE)
            flows.append(
                FlowEntry(
                    tables.CLASSIFY,
                    tables.LEARN_PRIORITY,
                    make_match(MatchField("eth_type", eth_type), MatchField("ip_proto", ip_proto)),
                    (
                        ApplyActions((learn, Resubmit(tables.COUNT))),
                        *_classify_to(policy.queue_id(policy.default_class)),
                    ),
                    Owner.POLICY,
                )
            )
    return flows


def override_flows(policy: Policy, overrides: Mapping[FlowId, str]) -> list[FlowEntry]:
    """Exact-match entries moving detected elephants to their class.

    They keep feeding the flow's counting entry (learn + resubmit, as the
    default entries do): the detector must go on seeing an elephant's bytes
    to know when it goes idle, or every override would end after one
    ``release_after`` and the flow would flap back and forth.
    """
    idle = _learn_idle(policy)
    if idle is None:
        return []
    return [
        FlowEntry(
            tables.CLASSIFY,
            tables.OVERRIDE_PRIORITY,
            make_match(*(MatchField(n, v) for n, v in flow.oxm_fields().items())),
            (
                ApplyActions(
                    (
                        Learn(tables.COUNT, flow.eth_type, flow.ip_proto, idle, LEARNED_COOKIE),
                        Resubmit(tables.COUNT),
                    )
                ),
                *_classify_to(policy.queue_id(class_name)),
            ),
            Owner.DETECTOR,
        )
        for flow, class_name in sorted(overrides.items())
        if class_name in policy.classes
    ]


def marking_flows(policy: Policy) -> list[FlowEntry]:
    """Table 1: DSCP and queue per class.

    ``set_queue`` serves kernel-datapath OVS; the DSCP serves the userspace
    datapath, whose tc filters steer by DSCP.  Emitting both lets one
    pipeline work on either.  Non-IP packets (ARP) keep their bytes and only
    get the queue.
    """
    flows: list[FlowEntry] = []
    marks = [(policy.queue_id(name), c.dscp) for name, c in policy.classes.items()]
    # A per-job class's job queues: each its own DSCP, which the port's tc filters map to
    # the queue (``controller.qos.shares``). All of them, used or not, so that jobs coming
    # and going change their own entries only.
    marks += [(slot.queue_id, slot.dscp) for slots in job_slots(policy).values() for slot in slots]
    for queue_id, dscp in marks:
        metadata = MatchField(
            "metadata", tables.class_metadata(queue_id), tables.CLASS_METADATA_MASK
        )
        forward = GotoTable(tables.FORWARD)
        for eth_type in (ETH_TYPE_IPV4, ETH_TYPE_IPV6):
            flows.append(
                FlowEntry(
                    tables.MARK,
                    tables.MARK_IP_PRIORITY,
                    make_match(metadata, MatchField("eth_type", eth_type)),
                    (
                        ApplyActions((SetField("ip_dscp", dscp), SetQueue(queue_id))),
                        forward,
                    ),
                    Owner.PIPELINE,
                )
            )
        flows.append(
            FlowEntry(
                tables.MARK,
                tables.MARK_OTHER_PRIORITY,
                make_match(metadata),
                (ApplyActions((SetQueue(queue_id),)), forward),
                Owner.PIPELINE,
            )
        )
    return flows


def forwarding_flows() -> list[FlowEntry]:
    """Table 2: hand the packet to OVS's own L2 learning switch.

    With no controller on the path of a first packet, ``NORMAL`` is the
    fastest correct L2 forwarding a single OVS bridge can do.
    """
    return [
        FlowEntry(
            tables.FORWARD,
            tables.FORWARD_PRIORITY,
            make_match(),
            (ApplyActions((Output(OFPP_NORMAL),)),),
            Owner.FORWARDING,
        )
    ]


def job_flows(policy: Policy, jobs: Sequence[JobSpec]) -> list[FlowEntry]:
    """Entries classifying every flow between a job's endpoints before its first byte.

    For each ordered pair of endpoints (a, b): traffic from a to b, limited to
    b's ports (TCP and UDP, with their replies) when b names ports.  TCP and
    UDP entries also count their flows (with detection on) so the flow view
    can name the job; other IP traffic between the endpoints gets an entry one
    priority below.  A job whose class the policy lacks is skipped (the API
    refuses those; a policy change can orphan one).  A job of a ``per-job``
    class goes to its job queue rather than the class's (``controller.qos.shares``).
    """
    flows: list[FlowEntry] = []
    idle = _learn_idle(policy)
    own_queue = job_queue_ids(policy, jobs)
    for index, job in enumerate(sorted(jobs, key=lambda j: j.name)):
        if job.traffic_class not in policy.classes:
            continue
        queue_id = own_queue.get(job.name, policy.queue_id(job.traffic_class))
        instructions = _classify_to(queue_id)
        priority = tables.job_priority(index)
        cookie = learned_cookie(Origin.JOB, index)
        l4: dict[Match, None] = {}
        other: dict[Match, None] = {}
        for source in job.endpoints:
            for target in job.endpoints:
                pair: dict[str, object] = {
                    "ipv4_src": str(source.ipv4),
                    "ipv4_dst": str(target.ipv4),
                }
                ports = (
                    [f"{low}-{high}" for low, high in target.ports]
                    if target.ports is not None
                    else None
                )
                for proto in ("tcp", "udp"):
                    fields = (
                        {**pair, f"{proto}_dst": ports} if ports else {**pair, "ip_proto": proto}
                    )
                    spec = MatchSpec.model_validate(fields)
                    # Replies of flows to a target's ports share the class; a target
                    # without ports takes any flow from the others (its mirror would
                    # lift the other endpoints' port limits).
                    l4.update(dict.fromkeys(expand_match(spec, {}, bidirectional=bool(ports))))
                if ports is None:
                    spec = MatchSpec.model_validate(pair)
                    other.update(dict.fromkeys(expand_match(spec, {}, bidirectional=False)))
        flows.extend(_counted_entries(priority, l4, idle, cookie, instructions, Owner.JOB))
        flows.extend(
            FlowEntry(tables.CLASSIFY, priority - 1, match, instructions, Owner.JOB)
            for match in other
        )
    return flows


class BasePlans:
    """One policy's plans without overrides or jobs, by the port numbers its rules name.

    Such a plan depends on the switch only through the ports that rules name
    (``in_port``): after a policy change every switch re-plans at once, and
    switches whose named ports have the same numbers (all of them, for a
    policy that names none) get one plan, built once. A policy is not
    hashable (it holds dicts), so the cache lives with the policy's holder
    rather than in an ``lru_cache``.
    """

    MAX_PLANS = 1024
    """Distinct port assignments kept; a fabric of many port layouts starts over past it."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._named = frozenset(
            rule.match.in_port for rule in policy.rules if isinstance(rule.match.in_port, str)
        )
        self._plans: dict[tuple[tuple[str, int], ...], SwitchPlan] = {}
        self._lock = threading.Lock()
        self._memo: dict[Hashable, tuple[object, object]] = {}

    def plan(self, port_numbers: Mapping[str, int]) -> SwitchPlan:
        named = tuple(
            sorted((name, port_numbers[name]) for name in self._named if name in port_numbers)
        )
        # Under the lock: ten switch actors asking at once wait for one plan instead of making ten.
        with self._lock:
            plan = self._plans.get(named)
            if plan is None:
                if len(self._plans) >= self.MAX_PLANS:
                    self._plans.clear()
                plan = self._plans[named] = _base_plan(self.policy, dict(named))
        return plan

    def memo(self, key: Hashable, keep: object, build: Callable[[], T]) -> T:
        """``build()``, once per ``key`` and ``keep`` for this policy: what every switch
        alike plans with it (the queues of its ports, with the jobs of one snapshot).

        ``keep`` is an input compared by identity, not hashed (a tuple of jobs, which
        hold lists); the entry is built again when it is another object.  Past
        ``MAX_PLANS`` entries the memo starts over."""
        with self._lock:
            found = self._memo.get(key)
            if found is not None and found[0] is keep:
                return cast(T, found[1])
        value = build()  # outside the lock: at worst two actors build it once each
        with self._lock:
            if len(self._memo) >= self.MAX_PLANS:
                self._memo.clear()
            self._memo[key] = (keep, value)
        return value


def plan_switch(
    policy: Policy,
    port_numbers: Mapping[str, int],
    overrides: Mapping[FlowId, str] | None = None,
    jobs: Sequence[JobSpec] = (),
    base_plans: BasePlans | None = None,
) -> SwitchPlan:
    """The whole pipeline for one switch, given its ports (name → OpenFlow number).

    A policy change re-plans every switch at once; each rule's entries come
    from a cache of unchanged rules (``_rule_flows``), so only what the change
    touched is built, and with ``base_plans`` (of this policy) switches alike
    share one plan.
    """
    if base_plans is not None and base_plans.policy is not policy:
        raise ValueError("base_plans belong to another policy")
    base = (
        base_plans.plan(port_numbers)
        if base_plans is not None
        else _base_plan(policy, port_numbers)
    )
    if not overrides and not jobs:
        return base
    extra = [*job_flows(policy, jobs), *override_flows(policy, overrides or {})]
    return SwitchPlan((*base.flows, *extra), base.unresolved_rules)


def _base_plan(policy: Policy, port_numbers: Mapping[str, int]) -> SwitchPlan:
    classification, unresolved = classification_flows(policy, port_numbers)
    flows = [*classification, *marking_flows(policy), *forwarding_flows()]
    return SwitchPlan(tuple(flows), tuple(unresolved))
