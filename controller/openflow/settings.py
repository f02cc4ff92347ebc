"""What the os-ken app needs from the command line, passed in at instantiation."""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.metrics import ControllerMetrics
from controller.policy.model import Policy
from controller.qos.ovsdb import Ovsdb


@dataclass
class ControllerSettings:
    policy: Policy
    ovsdb: Ovsdb = field(default_factory=Ovsdb)
    metrics: ControllerMetrics = field(default_factory=ControllerMetrics)
    audit_interval_s: float = 5.0
    """How often every switch is checked against its plan (flows, queues, tc filters)."""
    reply_timeout_s: float = 10.0
    manage_qos: bool = True
