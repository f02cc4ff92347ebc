"""``FabricOwner`` and jobs: a job's elephants placed together, placed again at once when a job
registers or ends or a link under them fails, and the pins naming their job for the API.

The fabric: leaves 11 and 12 under spines 1, 2 (and 3); host A on leaf 11, host B on leaf
12; links of 1 Gbit/s.  Job ``ring-b`` has a flow B -> A that crosses leaf 12's uplinks,
which something else loads to 80 %: whatever happens, its slowest flow sees 90 %.  Its three
A -> B flows (300 Mbit/s each) can fill one spine to 90 % at no cost to it, leaving the
other to job ``ring-a``'s four A -> B flows (200 Mbit/s each): 80 %.  Balancing flow by
flow spreads both jobs over both spines and puts ``ring-a``'s slowest flow at 90 %.
UDP flows keep their measured rate as their demand, so the numbers are the test's.
"""

from __future__ import annotations

from collections import Counter

import pytest

from controller.classify.records import ObservedFlow
from controller.fabric.placement import LINK_DOWN, REGROUPED
from controller.fabric.snapshot import REROUTE
from controller.flowid import ETH_TYPE_IPV4, IP_PROTO_UDP, FlowId
from controller.openflow.fabric_events import JobsChanged
from controller.policy.jobs import JobSpec
from tests.openflow.fabric_harness import (
    IP_A,
    IP_B,
    LEAF_A,
    LEAF_B,
    Fabric,
    new_fabric,
    port,
    spines,
)

MBIT = 1_000_000
RING_A, RING_B = "ring-a", "ring-b"


def job(name: str) -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": name,
            "class": "training",
            "endpoints": [{"ipv4": "10.0.0.1"}, {"ipv4": "10.0.0.2"}],
        }
    )


def udp(src: int, dst: int, sport: int) -> FlowId:
    return FlowId(ETH_TYPE_IPV4, IP_PROTO_UDP, src, dst, sport, 4791)


A_FLOWS = [udp(IP_A, IP_B, 40000 + n) for n in range(4)]
B_FLOWS = [udp(IP_A, IP_B, 41000 + n) for n in range(3)]
B_HOT = udp(IP_B, IP_A, 42000)


def seen(flow: FlowId, rate_bps: float, job_name: str) -> ObservedFlow:
    """A flow the classifier put in a job: its job entry counted it (``why``)."""
    return ObservedFlow(flow, "training", f"job:{job_name}", 10**9, rate_bps, 0.0, 0.0)


def traffic(fabric: Fabric, count: int) -> None:
    """What the switches count: the jobs' flows at their source leaf, and leaf 12's uplinks
    carrying 800 Mbit/s besides ``ring-b``'s flow from B."""
    fabric.flows(
        LEAF_A,
        [
            *(seen(flow, 200 * MBIT, RING_A) for flow in A_FLOWS),
            *(seen(flow, 300 * MBIT, RING_B) for flow in B_FLOWS),
        ],
    )
    fabric.flows(LEAF_B, [seen(B_HOT, 100 * MBIT, RING_B)])
    fabric.rates(LEAF_B, {spine: 900 * MBIT for spine in range(1, count + 1)})


def spine_of(fabric: Fabric, flow: FlowId) -> int:
    return fabric.inputs(LEAF_A).pinned[flow][1][0]


def used(fabric: Fabric, flows: list[FlowId]) -> set[int]:
    return {spine_of(fabric, flow) for flow in flows}


@pytest.fixture
def fabric() -> Fabric:
    return new_fabric()


def test_jobs_registering_places_their_flows_together_at_once(fabric: Fabric) -> None:
    spines(fabric, 2)
    traffic(fabric, 2)
    fabric.place()  # no job registered yet: flow by flow
    assert len(used(fabric, A_FLOWS)) == 2  # ring-a spread over both spines
    assert all(view.job is None for view in fabric.pinned())

    fabric.sent.clear()
    fabric.clock.now += 0.1
    fabric.tell(JobsChanged((job(RING_A), job(RING_B)), fabric.clock.now))  # no round needed
    assert len(used(fabric, A_FLOWS)) == 1 and len(used(fabric, B_FLOWS)) == 1
    assert used(fabric, A_FLOWS) != used(fabric, B_FLOWS)
    moved = [event for event in fabric.placement_events() if event.kind == REROUTE]
    assert moved and {event.data["reason"] for event in moved} == {REGROUPED}
    assert fabric.sent.publishes  # the switches hear of the new pins in the same event
    jobs = {view.flow: view.job for view in fabric.pinned()}
    assert Counter(jobs.values()) == Counter({RING_A: 4, RING_B: 4})
    fabric.discover()  # the snapshot the API reads names each pin's job
    assert Counter(view.job for view in fabric.snapshot.pinned) == Counter({RING_A: 4, RING_B: 4})

    # A renewal (same jobs) moves nothing.
    fabric.sent.clear()
    fabric.tell(JobsChanged((job(RING_A), job(RING_B)), fabric.clock.now))
    assert fabric.placement_events() == []


def test_a_job_ending_makes_its_flows_flows_of_no_job(fabric: Fabric) -> None:
    spines(fabric, 2)
    fabric.tell(JobsChanged((job(RING_A), job(RING_B)), fabric.clock.now))
    traffic(fabric, 2)
    fabric.place()
    assert {view.job for view in fabric.pinned()} == {RING_A, RING_B}
    fabric.clock.now += 0.1
    fabric.tell(JobsChanged((job(RING_B),), fabric.clock.now))
    views = {view.flow: view.job for view in fabric.pinned()}
    assert {views[str(flow)] for flow in A_FLOWS} == {None}
    assert {views[str(flow)] for flow in B_FLOWS} == {RING_B}


def test_a_link_failure_under_a_job_moves_its_flows_at_once_to_its_other_links(
    fabric: Fabric,
) -> None:
    spines(fabric, 3)
    fabric.tell(JobsChanged((job(RING_A), job(RING_B)), fabric.clock.now))
    traffic(fabric, 3)
    fabric.place()
    a_spines, b_spines = used(fabric, A_FLOWS), used(fabric, B_FLOWS)
    assert len(b_spines) == 1 and not a_spines & b_spines
    cut = min(a_spines)
    hit = [flow for flow in A_FLOWS if spine_of(fabric, flow) == cut]
    fabric.sent.clear()

    fabric.clock.now += 0.1
    fabric.ports(LEAF_A, [port(LEAF_A, n, up=n != cut) for n in (1, 2, 3, 5, 6)])  # no round
    assert cut not in used(fabric, A_FLOWS) | used(fabric, B_FLOWS)
    assert used(fabric, B_FLOWS) == b_spines  # ring-b keeps its spine: A's moves stay A's
    reasons = {
        event.data["flow"]: event.data["reason"]
        for event in fabric.placement_events()
        if event.kind == REROUTE
    }
    assert reasons == {str(flow): LINK_DOWN for flow in hit}
