"""Bring a bridge's port queues (and, on netdev bridges, their tc filters) to the plan.

Per-port failures are collected, not raised: one broken port must not keep
the others from their queues, and the caller retries the rest later.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from controller.policy.jobs import JobSpec
from controller.policy.model import Policy
from controller.qos import tc
from controller.qos.ovsdb import Bridge, Ovsdb, OvsdbError
from controller.qos.plan import PortQos, htb_classid, plan_port_qos, tc_filters

LOG = logging.getLogger("flowlane.qos")


@dataclass
class QosOutcome:
    changed_ports: list[str] = field(default_factory=list)
    filtered_ports: list[str] = field(default_factory=list)
    burst_ports: list[str] = field(default_factory=list)
    """Ports whose root HTB class got its burst back (OVS resets it on reconfiguration)."""
    queue_ports: list[str] = field(default_factory=list)
    """Ports whose classes got their queue length (new classes come with the kernel's)."""
    failed: dict[str, str] = field(default_factory=dict)
    vanished: list[str] = field(default_factory=list)
    """Ports the switch reported that were gone by the time queues were set (being deleted)."""

    @property
    def ok(self) -> bool:
        return not self.failed

    def tc_failed(self, port_name: str, exc: tc.TcError) -> None:
        """Record a tc error on a port: a device already gone (the port is being deleted)
        counts as vanished, not failed, as it does for OVSDB; anything else is a failure."""
        if exc.missing_device:
            self.vanished.append(port_name)
        else:
            self.failed[port_name] = str(exc)


def plan_ports(
    policy: Policy, link_bps: Mapping[str, int | None], jobs: Sequence[JobSpec] = ()
) -> dict[str, PortQos]:
    return {name: plan_port_qos(policy, name, speed, jobs) for name, speed in link_bps.items()}


def reconcile_bridge(ovsdb: Ovsdb, bridge: Bridge, plans: Mapping[str, PortQos]) -> QosOutcome:
    """Make every planned port's QoS (and, on netdev bridges, tc filters) match its plan."""
    outcome = QosOutcome()
    try:
        current = ovsdb.port_qos(plans)
    except OvsdbError as exc:
        outcome.failed.update(dict.fromkeys(plans, exc.detail))
        return outcome
    stale = [
        plan
        for name, plan in plans.items()
        if name in current and not current[name].satisfies(plan)
    ]
    outcome.vanished.extend(sorted(plans.keys() - current.keys()))
    if stale:
        try:
            ovsdb.apply(stale, current)
            outcome.changed_ports.extend(plan.port_name for plan in stale)
        except OvsdbError:
            # One transaction failed; retry port by port to find the culprit(s).
            for plan in stale:
                _apply_one(ovsdb, plan, outcome)
    for name, plan in plans.items():
        if name in current and name not in outcome.failed:
            if bridge.userspace:
                _ensure_filters(plan, outcome)
            _ensure_root_burst(plan, outcome)
            _ensure_leaf_queues(plan, outcome)
    return outcome


def _apply_one(ovsdb: Ovsdb, plan: PortQos, outcome: QosOutcome) -> None:
    try:
        current = ovsdb.port_qos([plan.port_name])
        if plan.port_name not in current:
            outcome.vanished.append(plan.port_name)
            return
        ovsdb.apply([plan], current)
        outcome.changed_ports.append(plan.port_name)
    except OvsdbError as exc:
        outcome.failed[plan.port_name] = exc.detail


def _ensure_filters(plan: PortQos, outcome: QosOutcome) -> None:
    try:
        if tc.ensure(plan.port_name, tc_filters(plan)):
            outcome.filtered_ports.append(plan.port_name)
    except tc.TcError as exc:
        outcome.tc_failed(plan.port_name, exc)


def _ensure_root_burst(plan: PortQos, outcome: QosOutcome) -> None:
    if plan.port_name in outcome.failed or plan.port_name in outcome.vanished:
        return
    try:
        if tc.ensure_root_burst(plan.port_name, plan.rate_bps, plan.burst_bytes):
            outcome.burst_ports.append(plan.port_name)
    except tc.TcError as exc:
        outcome.tc_failed(plan.port_name, exc)


def _ensure_leaf_queues(plan: PortQos, outcome: QosOutcome) -> None:
    if plan.port_name in outcome.failed or plan.port_name in outcome.vanished:
        return
    try:
        planned = [htb_classid(queue.queue_id) for queue in plan.queues]
        if tc.ensure_leaf_queues(plan.port_name, plan.queue_bytes, planned):
            outcome.queue_ports.append(plan.port_name)
    except tc.TcError as exc:
        outcome.tc_failed(plan.port_name, exc)
