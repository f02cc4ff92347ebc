"""The switch's log line after it repaired a port's queues or tc filters.

It read ``queues set on s1-eth1, tc filters set on -``: a ``-`` where a port
name belongs, whenever only one of the two was set (always on a kernel
datapath, which needs no filters).  Each part now names its ports, and a part
with none is left out.  The line comes from the step (``controller.switch.qos``)
when the OVSDB/tc work it asked for comes back as ``QosDone``.
"""

from __future__ import annotations

import logging

from controller.qos.ovsdb import Bridge
from controller.qos.provision import QosOutcome
from controller.switch.commands import Log, QosApply
from controller.switch.events import PolicySnapshot, QosDone, QosResult
from controller.switch.state import SwitchConfig
from tests.switch.harness import DPID, StepHarness, policy, rule

TAG = f"{DPID:016x}"
CONFIG = SwitchConfig(manage_qos=True, reply_timeout_s=2.0, audit_interval_s=5.0)


def repaired(outcome: QosOutcome) -> list[str]:
    """The lines at INFO and above once a queue sync's OVSDB/tc work came to ``outcome``."""
    harness = StepHarness(PolicySnapshot(policy([rule("a", 5001)]), 1), config=CONFIG)
    harness.connect()
    harness.settle()
    assert harness.state.synced_once  # a repair, not the first setup
    (job,) = [w.job for w in harness.qos_work if isinstance(w.job, QosApply)]
    result = QosResult(job.plans, Bridge("s1", DPID, "netdev"), outcome=outcome)
    commands = harness.tell(QosDone(result))
    return [c.msg % c.args for c in commands if isinstance(c, Log) and c.level >= logging.INFO]


def test_queues_set_on_a_port_whose_filters_held_name_only_the_queues() -> None:
    lines = repaired(QosOutcome(changed_ports=["s1-eth1", "s1-eth2"]))
    assert lines == [f"switch {TAG}: queues set on s1-eth1, s1-eth2"]


def test_filters_set_on_a_port_name_the_port() -> None:
    lines = repaired(QosOutcome(filtered_ports=["s1-eth3"]))
    assert lines == [f"switch {TAG}: tc filters set on s1-eth3"]


def test_both_name_their_own_ports() -> None:
    outcome = QosOutcome(changed_ports=["s1-eth1"], filtered_ports=["s1-eth1", "s1-eth2"])
    lines = repaired(outcome)
    assert lines == [f"switch {TAG}: queues set on s1-eth1; tc filters set on s1-eth1, s1-eth2"]
    assert not any(line.endswith(" -") or " - " in line for line in lines)
