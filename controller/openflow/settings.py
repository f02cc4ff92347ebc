"""What the controller (``controller.shell``) needs from the command line."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from controller.metrics import ControllerMetrics
from controller.openflow.observer import SwitchObserver
from controller.pipeline.planner import BasePlans
from controller.policy.jobs import JobSpec
from controller.policy.model import Policy
from controller.qos.ovsdb import Ovsdb


@dataclass(frozen=True)
class ActivePolicy:
    """A policy with its store version (None when it came from a file); swapped as one value
    so a sync never plans with one policy and reports another's version."""

    policy: Policy
    version: int | None = None
    since: float = field(default_factory=time.monotonic)
    plans: BasePlans = field(init=False, repr=False, compare=False)
    """Every switch actor plans from here: switches alike share one plan."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "plans", BasePlans(self.policy))


@dataclass
class ControllerSettings:
    active: ActivePolicy
    ovsdb: Ovsdb = field(default_factory=Ovsdb)
    metrics: ControllerMetrics = field(default_factory=ControllerMetrics)
    observers: list[SwitchObserver] = field(default_factory=list)
    audit_interval_s: float = 5.0
    """How often every switch is checked against its plan (flows, queues, tc filters)."""
    reply_timeout_s: float = 10.0
    manage_qos: bool = True
    jobs: tuple[JobSpec, ...] = ()
    """Registered jobs (from Redis); planned above the policy's rules."""
    bind_dpid: bool = False
    """OpenFlow over TLS: serve a switch only under a datapath id its certificate names."""
