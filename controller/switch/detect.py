"""Elephant detection and port counters: polls of the switch and what follows from them."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from controller.classify.detector import Detector
from controller.classify.reclassify import (
    Claimed,
    adopted_overrides,
    apply_decisions,
    observed_flows,
    split_samples,
)
from controller.openflow.fabric_events import FlowsSeen, PortRates
from controller.openflow.flowstats import FlowStatsError, decode_count_replies
from controller.pipeline.flows import FlowEntry, InstalledFlow
from controller.switch import codec
from controller.switch.commands import (
    Command,
    FabricInput,
    FlowsObserved,
    Log,
    Metric,
    Reclassified,
    Timer,
)
from controller.switch.events import Tick
from controller.switch.fastreplace import replace
from controller.switch.requests import ask, asked
from controller.switch.state import Ask, Request, SwitchConfig, SwitchState, may_write, want

VIEW_INTERVAL_S = 1.0
"""The flow view for people is published at most this often."""


def detector_for(state: SwitchState) -> SwitchState:
    """The state with a detector for the policy's detection section (which must be set).

    A new threshold or class starts over: overrides of the old spec go with it. The
    counters stay (``retune``): a new detector judged every entry still in the counting
    table on its whole life, and demoted flows that had ended.
    """
    policy = state.snapshot.policy
    spec = policy.detection
    assert spec is not None
    if state.detector is not None and state.detector_spec == spec:
        return state
    if state.detector is None:
        detector = Detector(spec, policy.ports.rate.bps)
    else:
        detector = state.detector
        detector.retune(spec, policy.ports.rate.bps)
    had_overrides = bool(state.overrides)
    # The counting table's cap is OVSDB work.
    state = replace(state, detector=detector, detector_spec=spec, overrides={}, qos_wanted=True)
    # The dropped overrides' entries go at once, not at the next audit.
    return want(state, "detection") if had_overrides else state


def adopt(
    state: SwitchState,
    installed: Iterable[InstalledFlow | FlowEntry],
    now: float,
    out: list[Command],
) -> SwitchState:
    """Elephants a previous controller demoted stay demoted (the switch remembers them)."""
    policy = state.snapshot.policy
    spec = policy.detection
    flows = [flow for flow in installed if isinstance(flow, InstalledFlow)]
    adopted = adopted_overrides(policy, flows)
    if spec is None or not adopted:
        return state
    state = detector_for(state)
    assert state.detector is not None
    state.detector.adopt(adopted, now)
    state = replace(state, overrides={**adopted, **state.overrides})
    out.append(
        Log(
            logging.INFO,
            "switch %s: kept %d elephant override(s) found on the switch",
            (state.tag, len(adopted)),
        )
    )
    return state


def tick(state: SwitchState, config: SwitchConfig, now: float, out: list[Command]) -> SwitchState:
    """Time for a detection poll: read the counting table (one poll out at a time)."""
    spec = state.snapshot.policy.detection
    interval = spec.interval if spec is not None else 1.0
    out.append(Timer(interval, Tick("detect", state.epoch, now + interval)))
    if spec is None or asked(state, Ask.DETECT) or not may_write(state, config):
        return state  # a slave's detection acts on nothing: the master's does
    state = detector_for(state)
    return ask(state, Ask.DETECT, codec.COUNT_FLOWS, now, config, out)


def polled(
    state: SwitchState, request: Request, bodies: list[bytes], now: float, out: list[Command]
) -> SwitchState:
    """The counting table as read: judge its flows, move elephants, publish the flow view."""
    policy = state.snapshot.policy
    spec = policy.detection
    if spec is None:
        return state  # detection was turned off while the poll was out
    try:
        entries = decode_count_replies(bodies)
    except FlowStatsError as exc:
        out.append(
            Log(logging.WARNING, "switch %s: %s not read: %s", (state.tag, "detection", exc))
        )
        return state
    state = detector_for(state)
    detector = state.detector
    assert detector is not None
    # The switch dates entries (``duration``) when it answers, right after we ask: the poll's
    # time is the request's.
    at = request.sent_at
    samples, claimed = split_samples(entries)
    decisions = detector.observe(samples, at)
    tag = state.tag
    out.append(Metric("detection_poll_seconds", "observe", now - at))
    out.append(Metric("tracked_flows", "set", decisions.tracked, (tag,)))
    out.append(Metric("overrides_active", "set", decisions.overrides, (tag,)))
    if decisions.dropped:
        out.append(Metric("untracked_flows", "inc", decisions.dropped, (tag,)))
    outcome = apply_decisions(
        state.dpid, state.overrides, decisions, spec.elephant.traffic_class, policy.default_class
    )
    for demotion in decisions.demote:
        out.append(Metric("detections", "inc", 1, (tag, str(demotion.reason))))
    for release in decisions.release:
        out.append(Metric("releases", "inc", 1, (tag, str(release.reason))))
    if outcome.changes:
        state = want(replace(state, overrides=outcome.overrides), "detection")
        for change in outcome.changes:
            after = (
                f", {change.latency_s:.3f} s after its first packet"
                if change.latency_s is not None
                else ""
            )
            out.append(
                Log(
                    logging.INFO,
                    "switch %s: %s %s -> %s (%s%s)",
                    (tag, change.flow, change.from_class, change.to_class, change.reason, after),
                )
            )
        out.append(Reclassified(outcome.changes))
    return _view(state, claimed, at, out)


def _view(
    state: SwitchState, claimed: list[Claimed], now: float, out: list[Command]
) -> SwitchState:
    """The flow view, every poll for placement and at most once a second for people.

    Building it ranks every tracked flow (a fifth of a 10 000-flow poll's CPU), so
    without placement to feed (``forwarding: normal``, or placement off) it is built
    only when people get it."""
    detector = state.detector
    assert detector is not None
    snapshot = state.snapshot
    forwarding = snapshot.policy.forwarding
    placing = forwarding.fabric and forwarding.placement is not None
    publish = now - state.views_published >= VIEW_INTERVAL_S
    if not placing and not publish:
        return state
    view = observed_flows(
        detector,
        snapshot.policy,
        snapshot.jobs,
        claimed,
        state.claimed_bytes,
        now,
        state.wall_offset,
    )
    state = replace(state, claimed_bytes=view.claimed_bytes)
    out.append(FabricInput(FlowsSeen(state.dpid, view.flows)))
    if publish:
        state = replace(state, views_published=now)
        out.append(FlowsObserved(view.flows))
    return state


def ports_tick(
    state: SwitchState, config: SwitchConfig, now: float, out: list[Command]
) -> SwitchState:
    """Time to read the port counters (fabric forwarding: link utilisation for placement)."""
    forwarding = state.snapshot.policy.forwarding
    interval = forwarding.placement.interval if forwarding.placement is not None else 1.0
    out.append(Timer(interval, Tick("ports", state.epoch, now + interval)))
    if not forwarding.fabric or asked(state, Ask.PORT_STATS):
        return state
    return ask(state, Ask.PORT_STATS, codec.PORT_STATS, now, config, out)


def port_counters(
    state: SwitchState, request: Request, stats: tuple[object, ...], out: list[Command]
) -> SwitchState:
    """Transmit rates since the previous reading, to the fabric owner."""
    at = request.sent_at
    tx_bytes = dict(state.tx_bytes)
    rates: dict[int, float] = {}
    for stat in stats:
        port_no, sent = int(stat.port_no), int(stat.tx_bytes)  # type: ignore[attr-defined]
        if port_no > codec.OFPP_MAX:
            continue
        before = tx_bytes.get(port_no)
        tx_bytes[port_no] = (sent, at)
        if before is not None and sent >= before[0] and at > before[1]:
            rates[port_no] = 8 * (sent - before[0]) / (at - before[1])
    if rates:
        out.append(FabricInput(PortRates(state.dpid, rates)))
    return replace(state, tx_bytes=tx_bytes)
