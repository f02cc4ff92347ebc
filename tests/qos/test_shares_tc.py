"""Job queues on a real port: each job's DSCP lands in its own HTB class (veth, namespaces).

The planner gives a job's packets its job queue's DSCP (``tests/qos/test_shares.py`` runs a
packet through the pipeline); here the port's planned u32 filters take it from there, as
on a userspace-datapath port where ``set_queue`` does nothing.
"""

from __future__ import annotations

import pytest

from controller.policy.jobs import JobSpec
from controller.qos.plan import plan_port_qos, tc_filters
from controller.qos.telemetry import ClassCounters
from tests.qos.test_shares import POLICY
from tests.qos.test_tc_netlink import (  # the namespaces, the veth and the OVS-like HTB
    NETNS,
    PING_FRAME,
    Link,
    link,  # noqa: F401  (the fixture)
    make_htb_as_ovs_does,
    netlink_in,
)


def job(name: str, weight: int) -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": name,
            "class": "training",
            "weight": weight,
            "endpoints": [{"ipv4": "10.98.0.0/24"}],
        }
    )


@pytest.mark.ovs
@NETNS
def test_two_jobs_packets_land_in_their_own_queues(link: Link) -> None:  # noqa: F811
    plan = plan_port_qos(POLICY, link.device, None, [job("a", 2), job("b", 1)])
    queue = {q.jobs: q for q in plan.queues if q.class_name.startswith("training")}
    a, b, unregistered = queue[("a",)], queue[("b",)], queue[()]
    make_htb_as_ovs_does(link, plan)
    with netlink_in(link) as nl:
        assert nl.ensure_filters(link.device, tc_filters(plan))
        assert link.ping(a.dscp << 2, 7) == 7
        assert link.ping(b.dscp << 2, 5) == 5
        assert link.ping(unregistered.dscp << 2, 3) == 3
        classes = nl.classes(link.device)

    def sent(queue_id: int) -> ClassCounters:
        return classes[f"1:{queue_id + 1:x}"].counters

    assert sent(a.queue_id) == ClassCounters(7 * PING_FRAME, 7, 0, 0, 0, 0)
    assert sent(b.queue_id) == ClassCounters(5 * PING_FRAME, 5, 0, 0, 0, 0)
    assert sent(unregistered.queue_id) == ClassCounters(3 * PING_FRAME, 3, 0, 0, 0, 0)
    # the weights are the classes' guarantees: 2:1 between the jobs
    assert classes[f"1:{a.queue_id + 1:x}"].rate_bytes_s == a.min_bps // 8
    assert a.min_bps == 2 * b.min_bps
