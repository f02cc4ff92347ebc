"""The ``control`` reference: the training load beside inference, but off inference's path.

On a two-core machine the Mininet hosts, iperf3, the load generator and
ovs-vswitchd share the CPUs, so part of an inference tail under load is CPU
contention, not queueing.  The control phase separates the two: inference
runs exactly as in every phase, and every training sender runs as in the
loaded phases (same host, same destination port, at the rate it reached in
the ``alone`` phase), but sends to a *sink*: a host the runner adds to the
sender's own switch, on a port of its own.  Packets of training then cross
the sender's host link and one switch, and never a port inference uses, in
either direction (the sink's acknowledgements go back to the sender only).

An all-reduce cannot send to a sink (its ring needs its peers), so each
worker is replaced by one paced TCP stream from the same host at the rate it
reached alone: the same bytes per second from the same hosts, carried by
iperf3 instead of the worker's Python process.

What this leaves out is said in ``docs/benchmarks.md``: a control path is one
switch long where the loaded path may cross three, so ovs-vswitchd does less
per training packet in control than under load.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from flowlane_bench.suite.report import PhaseResult
from flowlane_bench.suite.spec import AllReduceWorkload, BulkWorkload, Scenario
from flowlane_bench.suite.topology import TopologyPlan, with_hosts

SINK_PREFIX = "sink"


@dataclass(frozen=True)
class ControlFlow:
    """One training sender of the control phase: from its own host to its switch's sink."""

    workload: str
    stands_for: str
    """The label of the loaded flow it replaces: ``src->dst``, or ``rank<i>`` of an all-reduce."""
    src: str
    sink: str
    port: int
    """The sink's iperf3 server port: the loaded flow's port when free on that sink."""
    protocol: Literal["tcp", "udp"]
    rate: str | None = None
    """iperf3 ``-b``: bit/s reached alone (TCP), the workload's rate (UDP); None: not yet known."""

    @property
    def label(self) -> str:
        return f"{self.stands_for}@{self.sink}"


def host_switch(plan: TopologyPlan, host: str) -> str:
    """The switch ``host`` is linked to."""
    switches = {switch.name for switch in plan.switches}
    for link in plan.links:
        for node, peer in ((link.a, link.b), (link.b, link.a)):
            if node == host and peer in switches:
                return peer
    raise KeyError(f"host '{host}' is linked to no switch")


def _senders(
    scenario: Scenario,
) -> list[tuple[str, str, str, int, Literal["tcp", "udp"], str | None]]:
    """(workload, stands for, source host, loaded port, protocol, UDP rate) of every sender."""
    senders: list[tuple[str, str, str, int, Literal["tcp", "udp"], str | None]] = []
    for workload in scenario.training:
        if isinstance(workload, BulkWorkload):
            for index, flow in enumerate(workload.flows):
                senders.append(
                    (
                        workload.name,
                        f"{flow.src}->{flow.dst}",
                        flow.src,
                        workload.first_port + index,
                        workload.protocol,
                        workload.udp_rate,
                    )
                )
        elif isinstance(workload, AllReduceWorkload):
            for rank, host in enumerate(workload.workers):
                senders.append(
                    (workload.name, f"rank{rank}", host, workload.port + rank, "tcp", None)
                )
    return senders


def sinks(scenario: Scenario, plan: TopologyPlan) -> dict[str, str]:
    """Switch to sink host, for every switch with a training sender, in the plan's switch order."""
    sending = {host_switch(plan, src) for _, _, src, _, _, _ in _senders(scenario)}
    ordered = [switch.name for switch in plan.switches if switch.name in sending]
    return {switch: f"{SINK_PREFIX}{index + 1}" for index, switch in enumerate(ordered)}


def control_plan(scenario: Scenario, plan: TopologyPlan) -> TopologyPlan:
    """The scenario's topology with its sinks, linked last: every named port keeps its name."""
    return with_hosts(plan, [(sink, switch) for switch, sink in sinks(scenario, plan).items()])


def control_flows(scenario: Scenario, plan: TopologyPlan) -> list[ControlFlow]:
    """Every sender's control flow, rates of TCP flows unknown until the ``alone`` phase ran.

    Each flow keeps its loaded destination port, so the policy's rules class
    it as they class the loaded flow; an iperf3 server serves one test at a
    time, so a port already taken on the same sink moves up to the next free one.
    """
    by_switch = sinks(scenario, plan)
    inference_ports = {w.port for w in scenario.inference}
    taken: dict[str, set[int]] = {sink: set(inference_ports) for sink in by_switch.values()}
    flows = []
    for workload, stands_for, src, port, protocol, udp_rate in _senders(scenario):
        sink = by_switch[host_switch(plan, src)]
        while port in taken[sink]:
            port += 1
        taken[sink].add(port)
        flows.append(ControlFlow(workload, stands_for, src, sink, port, protocol, udp_rate))
    return flows


def with_rates(flows: list[ControlFlow], alone: PhaseResult) -> list[ControlFlow]:
    """TCP flows paced at what the flow they stand for reached in the ``alone`` phase.

    Alone, training has the fabric to itself: it sends at least as much as
    in any loaded phase, so the control phase never asks the CPUs for less.
    """
    reached: Mapping[tuple[str, str], float] = {
        (flow.workload, flow.label): flow.goodput_bps for flow in alone.training_flows
    }
    paced = []
    for flow in flows:
        if flow.rate is not None:
            paced.append(flow)
            continue
        goodput = reached.get((flow.workload, flow.stands_for))
        if not goodput:
            raise ValueError(
                f"{flow.workload} {flow.stands_for}: the alone phase has no goodput for it,"
                " so the control phase cannot pace it"
            )
        paced.append(dataclasses.replace(flow, rate=str(round(goodput))))
    return paced


def control_pairs(flows: list[ControlFlow]) -> list[tuple[str, str]]:
    """(source, sink) pairs that must answer a ping before the control phase starts."""
    return sorted({(flow.src, flow.sink) for flow in flows})
