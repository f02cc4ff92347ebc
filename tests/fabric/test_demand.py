"""Hedera's demand estimator: NIC-limited max-min fair demands, fixed-rate flows first."""

from __future__ import annotations

import random

import pytest

from controller.fabric.demand import FlowDemandInput, estimate_demands
from controller.flowid import ETH_TYPE_IPV4, IP_PROTO_TCP, IP_PROTO_UDP, FlowId

GBIT = 1e9


def tcp(src: int, dst: int, port: int = 5201, rate: float = 1e6) -> FlowDemandInput:
    flow = FlowId(ETH_TYPE_IPV4, IP_PROTO_TCP, src, dst, 40000 + port, port)
    return FlowDemandInput(flow, src, dst, elastic=True, rate_bps=rate)


def udp(src: int, dst: int, rate: float, port: int = 4791) -> FlowDemandInput:
    flow = FlowId(ETH_TYPE_IPV4, IP_PROTO_UDP, src, dst, 50000 + port, port)
    return FlowDemandInput(flow, src, dst, elastic=False, rate_bps=rate)


def gigabit(_host: int) -> float:
    return GBIT


def test_no_flows_no_demands() -> None:
    assert estimate_demands([], gigabit) == {}


def test_a_lone_flow_wants_the_slower_of_its_two_nics() -> None:
    flow = tcp(1, 2, rate=3e6)  # measured while colliding: far below what it wants
    nics = {1: 10 * GBIT, 2: GBIT}
    assert estimate_demands([flow], nics.__getitem__) == {flow.flow: pytest.approx(GBIT)}


def test_a_sender_splits_its_nic_equally() -> None:
    flows = [tcp(1, 2), tcp(1, 3), tcp(1, 4, port=5202)]
    demands = estimate_demands(flows, gigabit)
    assert [demands[f.flow] for f in flows] == [pytest.approx(GBIT / 3)] * 3


def test_a_receiver_limit_frees_the_senders_nic_for_its_other_flows() -> None:
    # Host 1 sends to 9 and 2; hosts 3, 4, 5 also send to 9. Host 9 takes a quarter from each,
    # so host 1 has three quarters left for its flow to 2: only iterating the passes finds that.
    to_nine = [tcp(1, 9), tcp(3, 9), tcp(4, 9), tcp(5, 9)]
    free = tcp(1, 2)
    demands = estimate_demands([*to_nine, free], gigabit)
    assert [demands[f.flow] for f in to_nine] == [pytest.approx(GBIT / 4)] * 4
    assert demands[free.flow] == pytest.approx(0.75 * GBIT)


def test_a_receiver_leaves_small_flows_alone_and_shares_the_rest() -> None:
    # Host 1's flow to 9 is one of four from 1 (a quarter); 9's other two senders share
    # what the quarter leaves: 3/8 each, not a third.
    small = tcp(1, 9)
    others = [tcp(1, 10), tcp(1, 11), tcp(1, 12)]
    big = [tcp(2, 9), tcp(3, 9)]
    demands = estimate_demands([small, *others, *big], gigabit)
    assert demands[small.flow] == pytest.approx(GBIT / 4)
    assert [demands[f.flow] for f in big] == [pytest.approx(3 * GBIT / 8)] * 2


def test_fixed_rate_flows_keep_their_rate_and_take_the_nics_first() -> None:
    roce = udp(1, 2, rate=0.6 * GBIT)
    out_of_one = tcp(1, 3)
    into_two = tcp(4, 2)
    demands = estimate_demands([roce, out_of_one, into_two], gigabit)
    assert demands[roce.flow] == pytest.approx(0.6 * GBIT)
    assert demands[out_of_one.flow] == pytest.approx(0.4 * GBIT)
    assert demands[into_two.flow] == pytest.approx(0.4 * GBIT)


def test_a_nic_full_of_fixed_rate_traffic_leaves_elastic_flows_nothing() -> None:
    flood = udp(1, 2, rate=1.5 * GBIT)  # more than the NIC: measured as it is
    starved = tcp(1, 3)
    demands = estimate_demands([flood, starved], gigabit)
    assert demands == {flood.flow: pytest.approx(1.5 * GBIT), starved.flow: 0.0}


def test_nics_may_differ_per_host() -> None:
    nics = {1: 4 * GBIT, 2: GBIT, 3: 10 * GBIT}
    slow = tcp(1, 2)  # limited by host 2
    fast = tcp(1, 3)  # gets what host 1 has left
    demands = estimate_demands([slow, fast], nics.__getitem__)
    assert demands[slow.flow] == pytest.approx(GBIT)
    assert demands[fast.flow] == pytest.approx(3 * GBIT)


def test_an_unknown_nic_limits_nothing_but_the_known_one_still_does() -> None:
    nics = {1: float("inf"), 2: GBIT, 3: float("inf")}
    bounded = tcp(1, 2)  # host 2's NIC is its limit
    unbounded = tcp(1, 3)  # nothing known limits it
    demands = estimate_demands([bounded, unbounded], nics.__getitem__)
    assert demands == {bounded.flow: pytest.approx(GBIT), unbounded.flow: float("inf")}


def test_a_repeated_flow_counts_once() -> None:
    flow = tcp(1, 2)
    assert estimate_demands([flow, flow], gigabit) == {flow.flow: pytest.approx(GBIT)}


@pytest.mark.parametrize("seed", range(30))
def test_random_demands_are_nic_feasible_and_max_min_fair(seed: int) -> None:
    """Every elastic flow is held back by a NIC it saturates and where no flow gets more.

    That is the definition of max-min fairness when NICs are the only limits,
    so it checks the estimator without a second implementation to trust.
    """
    rng = random.Random(seed)
    hosts = list(range(1, rng.randint(3, 9)))
    nics = {host: rng.choice([1, 2, 10]) * GBIT for host in hosts}
    flows = []
    for port in range(rng.randint(1, 25)):
        src, dst = rng.sample(hosts, 2)
        if rng.random() < 0.2:
            flows.append(udp(src, dst, rate=rng.uniform(0.05, 0.5) * GBIT, port=port))
        else:
            flows.append(tcp(src, dst, port=port))
    demands = estimate_demands(flows, nics.__getitem__)

    sent = {host: 0.0 for host in hosts}
    received = {host: 0.0 for host in hosts}
    for entry in flows:
        sent[entry.src_host] += demands[entry.flow]
        received[entry.dst_host] += demands[entry.flow]
    fixed_in = {
        h: sum(f.rate_bps for f in flows if not f.elastic and f.dst_host == h) for h in hosts
    }
    fixed_out = {
        h: sum(f.rate_bps for f in flows if not f.elastic and f.src_host == h) for h in hosts
    }
    tol = 1e-6 * GBIT
    for host in hosts:
        assert sent[host] <= max(nics[host], fixed_out[host]) + tol
        assert received[host] <= max(nics[host], fixed_in[host]) + tol

    for entry in flows:
        if not entry.elastic:
            assert demands[entry.flow] == entry.rate_bps
            continue
        mine = demands[entry.flow]
        peers_out = [demands[f.flow] for f in flows if f.elastic and f.src_host == entry.src_host]
        peers_in = [demands[f.flow] for f in flows if f.elastic and f.dst_host == entry.dst_host]
        sender_bottleneck = (
            sent[entry.src_host] >= max(nics[entry.src_host], fixed_out[entry.src_host]) - tol
            and mine >= max(peers_out) - tol
        )
        receiver_bottleneck = (
            received[entry.dst_host] >= max(nics[entry.dst_host], fixed_in[entry.dst_host]) - tol
            and mine >= max(peers_in) - tol
        )
        assert sender_bottleneck or receiver_bottleneck, (entry, mine)
