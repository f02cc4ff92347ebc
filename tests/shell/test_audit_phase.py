"""Audits spread over the interval: each switch is audited once per interval (its step
re-arms the audit, ``tests/switch/test_request_bookkeeping``), starting at a phase of
its own, so a hundred switches are never a hundred table reads at once."""

from __future__ import annotations

import itertools

import pytest

from controller.shell.app import audit_phase

INTERVAL_S = 5.0


@pytest.mark.parametrize("count", [2, 10, 100])
def test_consecutive_datapath_ids_spread_over_the_interval(count: int) -> None:
    phases = sorted(audit_phase(dpid, INTERVAL_S) for dpid in range(1, count + 1))
    assert all(0.0 <= phase < INTERVAL_S for phase in phases)
    gaps = [b - a for a, b in itertools.pairwise(phases)]
    # Fibonacci hashing: no two closer than a third of an even share of the interval.
    assert min(gaps) > INTERVAL_S / count / 3


def test_a_switch_keeps_its_phase_and_the_phase_scales_with_the_interval() -> None:
    dpid = 0x0000_0A0B_0C0D_0E0F
    assert audit_phase(dpid, INTERVAL_S) == audit_phase(dpid, INTERVAL_S)
    assert audit_phase(dpid, 2 * INTERVAL_S) == pytest.approx(2 * audit_phase(dpid, INTERVAL_S))
    assert audit_phase(0, INTERVAL_S) == 0.0
