"""What is valid but does nothing: settings that can never take effect on some port.

An error stops a policy; a warning names a setting that the controller will
carry out faithfully and that will still never act.  The two found the hard
way, with every tool silent about them:

- an elephant rate at or above a port's ceiling.  The detector resolves a
  share (``10%``, the default) against ``ports.rate``, once per switch: the
  counting table learns a flow's 5-tuple, not the port it leaves by (under
  ``forwarding: normal`` only OVS's MAC learning knows that), so the share
  cannot follow each port.  On a port overridden to 100 Mbit a 1 Gbit/s
  threshold is never reached and bulk flows stay in the latency queue.
- ``forwarding: fabric`` with placement on (its default) and no
  ``detection``: placement moves detected elephants, so nothing is placed.

Pure: ``policy_warnings`` is what ``flowlane policy validate`` prints, what
``POST /v1/policy/plan`` returns in ``warnings`` and what the controller
logs once per policy version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from controller.policy.model import Policy
from controller.policy.units import ShareRate, format_rate

MAX_NAMED_PORTS = 5
"""Ports named in one warning; a fabric can have hundreds at the same speed."""


@dataclass(frozen=True, slots=True)
class PolicyWarning:
    """One setting that will not act, and why; ``path`` is the field, as errors name it."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def policy_warnings(policy: Policy, ports: Mapping[str, int] | None = None) -> list[PolicyWarning]:
    """Every warning for ``policy``, in document order.

    ``ports`` maps live port names to their HTB ceilings in bit/s (an override,
    or the policy rate capped at the link speed: ``controller.qos.plan.port_rate``).
    Without it (``validate``, no switch known) the policy's own rates are the
    ceilings: ``ports.rate`` and each override.
    """
    return [*_detection_warnings(policy, ports or {}), *_placement_warnings(policy)]


def _ceilings(policy: Policy, ports: Mapping[str, int]) -> list[tuple[str, int]]:
    """(what, ceiling) of every port rate the policy sets or a live port has."""
    found = [("ports.rate", policy.ports.rate.bps)]
    found += [
        (f"ports.overrides.{name}", rate.bps) for name, rate in policy.ports.overrides.items()
    ]
    found += [
        (f"port {name}", bps)
        for name, bps in sorted(ports.items())
        if name not in policy.ports.overrides
    ]
    return found


def _detection_warnings(policy: Policy, ports: Mapping[str, int]) -> list[PolicyWarning]:
    spec = policy.detection
    if spec is None:
        return []
    rate = spec.elephant.rate
    port_rate = policy.ports.rate.bps
    threshold = max(1, rate.resolve(port_rate))  # as Thresholds.from_spec resolves it
    # A flow's rate is bounded by the ceiling of the port it leaves by: reaching the
    # ceiling exactly is as good as never (TCP settles a few per cent under it).
    blocked = [(what, bps) for what, bps in _ceilings(policy, ports) if threshold >= bps]
    if not blocked:
        return []
    described = (
        f"{rate} of ports.rate {format_rate(port_rate)} = {format_rate(threshold)}/s"
        if isinstance(rate, ShareRate)
        else f"{format_rate(threshold)}/s"
    )
    named = ", ".join(f"{what} ({format_rate(bps)})" for what, bps in blocked[:MAX_NAMED_PORTS])
    if len(blocked) > MAX_NAMED_PORTS:
        named += f" and {len(blocked) - MAX_NAMED_PORTS} more"
    slowest = min(bps for _, bps in blocked)
    placed = " (nor placed)" if policy.forwarding.placement_classes(policy.detection) else ""
    share = (
        " (a share is of ports.rate: the detector does not know the port a flow leaves by)"
        if isinstance(rate, ShareRate)
        else ""
    )
    return [
        PolicyWarning(
            "detection.elephant.rate",
            f"{described} is at or above the ceiling of {named}: a flow through"
            f" {'that port' if len(blocked) == 1 else 'those ports'} can never keep it up,"
            f" so it is never detected{placed}; set an absolute rate below"
            f" {format_rate(slowest)}{share}",
        )
    ]


def _placement_warnings(policy: Policy) -> list[PolicyWarning]:
    forwarding = policy.forwarding
    if not forwarding.fabric or forwarding.placement is None or policy.detection is not None:
        return []
    # Placement with named classes and no detection is an error (forwarding_errors); this
    # is the default placement, which follows the detection's elephant class.
    return [
        PolicyWarning(
            "forwarding.placement",
            "placement is on (the default with `forwarding: fabric`) but there is no"
            " `detection` section: placement moves detected elephants, so it never runs and"
            " every flow stays on its hashed path; add a `detection` section, or write"
            " `placement: null` to hash every flow",
        )
    ]
