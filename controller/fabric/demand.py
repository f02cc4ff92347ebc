"""What each elephant would send if the fabric were not in its way (Hedera's demand estimator).

A TCP flow measured while it collides with others on a link reports the
share that link left it, not what it wants: placing flows by their measured
rates would keep them where they collide.  Hedera (Al-Fares et al., NSDI
2010) instead estimates each flow's *natural demand*: its max-min fair share
when only the sending and receiving hosts' NICs limit it, found by
alternating two passes until nothing changes:

- sender pass: each host splits what its NIC has left, after the flows
  already known to be limited elsewhere, equally among its other flows;
- receiver pass: a host whose incoming flows ask for more than its NIC takes
  fills them up equally (flows asking less keep their demand) and marks the
  ones it limits as settled.

Fixed-rate flows (UDP, such as RoCEv2 to port 4791) do not back off, so they
keep their measured rate and take their share of both NICs before the
elastic flows divide the rest.

Demands are in bit/s; nothing here knows the fabric, only hosts and NICs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from controller.flowid import FlowId

_TOLERANCE_BPS = 1e-3
"""Two demands closer than this are the same: the passes have converged."""


@dataclass(frozen=True, slots=True)
class FlowDemandInput:
    """One elephant as measured: its hosts, whether it backs off, and its current rate."""

    flow: FlowId
    src_host: int  # any stable host key (IPv4 int)
    dst_host: int
    elastic: bool  # TCP: True; UDP (e.g. RoCEv2 to 4791): fixed at its measured rate
    rate_bps: float  # measured


def estimate_demands(
    flows: Sequence[FlowDemandInput], nic_bps: Callable[[int], float]
) -> dict[FlowId, float]:
    """Every flow's natural demand in bit/s: NIC-limited max-min fair for elastic flows,
    the measured rate for fixed-rate ones.

    ``nic_bps(host)`` is a host's NIC rate, the same in both directions (full
    duplex).  One entry per flow is expected; a repeated flow counts once,
    as its last entry.  The passes stop once no demand changes; each round
    either settles at least one more flow or changes nothing, so the number
    of rounds is bounded by the number of flows (plus one to notice).
    """
    unique = list({entry.flow: entry for entry in flows}.values())
    demands: dict[FlowId, float] = {
        entry.flow: max(0.0, entry.rate_bps) for entry in unique if not entry.elastic
    }
    elastic = [entry for entry in unique if entry.elastic]
    if not elastic:
        return demands

    send_left = _nic_left(unique, nic_bps, sending=True)
    receive_left = _nic_left(unique, nic_bps, sending=False)
    outgoing = _group(elastic, sending=True)
    incoming = _group(elastic, sending=False)

    demand = dict.fromkeys(range(len(elastic)), 0.0)
    settled: set[int] = set()
    for _ in range(len(elastic) + 2):
        before = dict(demand)
        _sender_pass(outgoing, send_left, demand, settled)
        _receiver_pass(incoming, receive_left, demand, settled)
        if all(math.isclose(demand[i], before[i], abs_tol=_TOLERANCE_BPS) for i in demand):
            break

    for index, entry in enumerate(elastic):
        demands[entry.flow] = demand[index]
    return demands


def _nic_left(
    flows: Sequence[FlowDemandInput], nic_bps: Callable[[int], float], *, sending: bool
) -> dict[int, float]:
    """Each host's NIC rate in one direction minus its fixed-rate flows (never below 0)."""
    fixed: dict[int, float] = {}
    hosts: set[int] = set()
    for entry in flows:
        host = entry.src_host if sending else entry.dst_host
        hosts.add(host)
        if not entry.elastic:
            fixed[host] = fixed.get(host, 0.0) + max(0.0, entry.rate_bps)
    return {host: max(0.0, nic_bps(host) - fixed.get(host, 0.0)) for host in hosts}


def _group(flows: Sequence[FlowDemandInput], *, sending: bool) -> dict[int, list[int]]:
    """Indices of the flows leaving (or reaching) each host, hosts in a stable order."""
    groups: dict[int, list[int]] = {}
    for index, entry in enumerate(flows):
        host = entry.src_host if sending else entry.dst_host
        groups.setdefault(host, []).append(index)
    return dict(sorted(groups.items()))


def _sender_pass(
    outgoing: dict[int, list[int]],
    left: dict[int, float],
    demand: dict[int, float],
    settled: set[int],
) -> None:
    """Each sender gives its unsettled flows equal shares of what its settled flows leave."""
    for host, indices in outgoing.items():
        free = [index for index in indices if index not in settled]
        if not free:
            continue
        taken = sum(demand[index] for index in indices if index in settled)
        share = max(0.0, left[host] - taken) / len(free)
        for index in free:
            demand[index] = share


def _receiver_pass(
    incoming: dict[int, list[int]],
    left: dict[int, float],
    demand: dict[int, float],
    settled: set[int],
) -> None:
    """An oversubscribed receiver fills its flows up equally and settles the ones it limits.

    Flows asking less than the equal share keep their demand and leave the
    rest to the others; the share is recomputed until every flow still
    limited asks at least as much as it, which is water-filling.
    """
    for host, indices in incoming.items():
        capacity = left[host]
        if sum(demand[index] for index in indices) <= capacity + _TOLERANCE_BPS:
            continue
        limited = list(indices)
        below = 0.0
        share = capacity / len(limited)
        while True:
            under = [index for index in limited if demand[index] < share]
            if not under:
                break
            if len(under) == len(limited):  # rounding: they all fit after all
                limited = []
                break
            below += sum(demand[index] for index in under)
            limited = [index for index in limited if index not in under]
            share = max(0.0, capacity - below) / len(limited)
        for index in limited:
            demand[index] = share
            settled.add(index)
