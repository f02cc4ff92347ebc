"""What a switch tells the rest of the controller when it confirmed a plan."""

from __future__ import annotations

from controller.openflow.observer import SyncReport
from controller.switch.events import PolicySnapshot
from controller.switch.state import Applying, SwitchConfig, SwitchState


def same_policy(applied: PolicySnapshot | None, snapshot: PolicySnapshot) -> bool:
    """Whether ``snapshot`` carries the policy already applied (a new job set alone is not a
    new policy: ``apply_seconds`` counts from the policy's arrival)."""
    return (
        applied is not None
        and applied.policy is snapshot.policy
        and applied.version == snapshot.version
        and applied.since == snapshot.since
    )


def sync_report(state: SwitchState, applied: Applying, config: SwitchConfig) -> SyncReport:
    """The confirmed plan with the inputs it was computed from; queues once the bridge is
    known (a switch outside the local OVSDB has none of ours)."""
    bridge = state.bridge if config.manage_qos else None
    return SyncReport(
        dpid=state.dpid,
        policy_version=applied.snapshot.version,
        connected_at=state.connected_at,
        ports=applied.inputs.ports,
        flows=applied.plan.desired.flows,
        groups=applied.plan.desired.groups,
        meters=applied.plan.desired.meters,
        queues=tuple(applied.plan.qos.values()) if bridge is not None else (),
        datapath_type=bridge.datapath_type if bridge is not None else None,
        inputs=applied.inputs,
    )
