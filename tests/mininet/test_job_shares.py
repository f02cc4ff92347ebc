"""End to end: shares between jobs on one bottleneck, per-job against per-flow in one run.

Two training senders reach one server through one switch whose server port
(30 Mbit/s, the bottleneck) carries the policy's queues.  Job A sends one
TCP flow, job B eight (``iperf3 -P 8``).  Three phases, one stack and one
network, so the machine's noise is the same for all:

1. ``training: share: per-job``, equal weights: each job gets its own queue
   and about half of the class, whatever its number of flows;
2. the same policy with ``share: per-flow``: nine flows in one queue, job A
   gets about a ninth (Jain index about 0.62);
3. per-job again with A at weight 2: A gets about twice B.

The 2:1 ratio holds because every HTB class's queue is bounded (a ``bfifo``
of 40 ms of the port, ``controller.qos.plan.QUEUE_S``): with the kernel's
default 1 000 frames job B's queue stood over a second deep, overflowed, and
B's eight flows got 8.5 of the 10 Mbit/s its share puts on the wire
(A/B = 2.23).  30 Mbit/s also leaves the two cores to the senders and OVS.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from flowlane_bench import harness
from flowlane_bench.topologies import SWITCH, SingleSwitchTopo

from controller.policy.jobs import JobSpec
from controller.policy.load import parse_policy
from controller.qos import tc
from controller.qos.plan import plan_port_qos

pytestmark = pytest.mark.mininet

BOTTLENECK = "s1-eth3"  # the server's port: train1, train2, then the server
PORTS = {"a": 5201, "b": 5202}
FLOWS = {"a": 1, "b": 8}
SECONDS, OMIT = 3, 2
"""iperf3's measured seconds in the per-job phases, after the OMIT it leaves out (``-O``
comes on top of ``-t``: 5 s of traffic a phase, 9 s before). HTB holds per-job shares from the
start: Jain 1.00 and A/B 1.98-2.02 at 2:1 in every run, over 7 s, 4 s and 3 s alike."""
PER_FLOW_SECONDS = 7
"""The per-flow phase keeps 7 s (after the same 2 s): job A's one flow among nine swings
about its ninth, and short windows caught it high (Jain 0.64-0.82 over 3-4 s, against 0.63
over 7 s; the test asks for below 0.9)."""


def policy_document(share: str) -> dict[str, Any]:
    return {
        "classes": {
            "training": {"priority": 1, "dscp": 26, "min_rate": "90%", "share": share},
            "best-effort": {"priority": 2, "dscp": 0, "min_rate": "10%"},
        },
        "default_class": "best-effort",
        "ports": {"rate": "30Mbit"},
    }


def job_document(net: Any, name: str, sender: str, weight: int) -> dict[str, Any]:
    return {
        "name": name,
        "class": "training",
        "weight": weight,
        "endpoints": [
            {"ipv4": f"{net.get(sender).IP()}/32"},
            {"ipv4": f"{net.get('server').IP()}/32", "ports": [PORTS[name]]},
        ],
        "ttl": "10m",
    }


def job_metadata() -> set[int]:
    """Queue numbers (metadata - 1) that the table-0 entries of jobs write."""
    text = harness.ofctl("dump-flows", SWITCH, "table=0")
    return {
        int(value, 16) - 1
        for line in text.splitlines()
        if "tcp" in line and "nw_src" in line
        for value in re.findall(r"write_metadata:(0x[0-9a-f]+)/0xff", line)
    }


def tc_rates() -> dict[str, int]:
    return {
        classid: found.rate_bytes_s * 8
        for classid, found in tc.class_stats(BOTTLENECK).items()
        if classid != tc.ROOT_CLASSID
    }


def wait_applied(document: dict[str, Any], jobs: list[dict[str, Any]]) -> None:
    """Until the bottleneck's HTB classes (with their bounded queues) and the jobs' entries
    are the plan's."""
    policy = parse_policy(document)
    specs = [JobSpec.model_validate(job) for job in jobs]
    planned = plan_port_qos(policy, BOTTLENECK, None, specs)
    want = {f"1:{q.queue_id + 1:x}": q.min_bps for q in planned.queues}
    queues = {q.queue_id for q in planned.queues if q.jobs} or {policy.queue_id("training")}

    def done() -> bool:
        rates = tc_rates()
        close = rates.keys() == want.keys() and all(
            abs(rates[c] - want[c]) <= 0.01 * want[c] + 8 for c in want
        )
        # every class with its bounded queue: OVS re-creates classes on a policy change
        bounded = not tc.leaves_missing(tc.class_stats(BOTTLENECK))
        return close and bounded and job_metadata() == queues

    harness.wait_for("the bottleneck's queues and the jobs' entries", done, 20, 0.2)


def measure(net: Any, seconds: int = SECONDS) -> dict[str, float]:
    """Both jobs at once; each one's goodput (bit/s received over ``seconds``, after the first
    OMIT s)."""
    server = net.get("server")
    servers = [
        harness.host_popen(server, ["iperf3", "-s", "-1", "-p", str(port)])
        for port in PORTS.values()
    ]
    clients = {}
    try:
        harness.wait_for(
            "the iperf3 servers",
            lambda: all(f":{p} " in server.cmd("ss -Htln") for p in PORTS.values()),
            10,
            0.05,
        )
        for name, sender in (("a", "train1"), ("b", "train2")):
            clients[name] = harness.host_popen(
                net.get(sender),
                [
                    "iperf3", "-c", server.IP(), "-p", str(PORTS[name]), "-P", str(FLOWS[name]),
                    "-t", str(seconds), "-O", str(OMIT), "-J",
                ],
            )  # fmt: skip
        goodput = {}
        for name, client in clients.items():
            out, _ = client.communicate(timeout=seconds + OMIT + 20)
            goodput[name] = float(json.loads(out)["end"]["sum_received"]["bits_per_second"])
        return goodput
    finally:
        for process in [*servers, *clients.values()]:
            harness.stop_process(process)


def jain(values: list[float]) -> float:
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values))


@pytest.fixture(scope="module")
def phases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, float]]]:
    harness.check_prerequisites()
    workdir = tmp_path_factory.mktemp("job-shares")
    policy_file = workdir / "per-job.json"  # JSON is YAML
    per_job, per_flow = policy_document("per-job"), policy_document("per-flow")
    policy_file.write_text(json.dumps(per_job))
    ofp_port = harness.free_port()
    with (
        harness.stack(policy_file, workdir / "stack.log", ofp_port) as stack,
        harness.network(SingleSwitchTopo(training_senders=2, inference_clients=0), ofp_port) as net,
    ):

        def put_policy(document: dict[str, Any]) -> None:
            response = httpx.put(
                f"{stack.api}/v1/policy",
                json=document,
                params={"wait": "applied", "timeout": 20, "comment": "job shares test"},
                headers=stack.headers,
                timeout=30,
            )
            assert response.status_code in (200, 201), response.text

        def register(jobs: list[dict[str, Any]]) -> None:
            for job in jobs:
                response = httpx.post(
                    f"{stack.api}/v1/jobs", json=job, timeout=10, headers=stack.headers
                )
                assert response.status_code == 201, response.text

        equal = [job_document(net, "a", "train1", 1), job_document(net, "b", "train2", 1)]
        weighted = [job_document(net, "a", "train1", 2), equal[1]]
        results: dict[str, dict[str, float]] = {}
        register(equal)
        wait_applied(per_job, equal)
        before = tc.class_stats(BOTTLENECK)
        results["per-job"] = measure(net)
        after = tc.class_stats(BOTTLENECK)
        planned = plan_port_qos(
            parse_policy(per_job), BOTTLENECK, None, [JobSpec.model_validate(j) for j in equal]
        )
        results["queue-bytes"] = {
            "+".join(q.jobs) or "unregistered": float(
                after[f"1:{q.queue_id + 1:x}"].counters.bytes
                - before[f"1:{q.queue_id + 1:x}"].counters.bytes
            )
            for q in planned.queues
            if q.class_name.startswith("training")
        }
        put_policy(per_flow)
        wait_applied(per_flow, equal)
        results["leaf-queues-per-flow"] = {
            name: float(limit) for name, limit in tc.leaf_queue_limits(BOTTLENECK).items()
        }
        results["per-flow"] = measure(net, PER_FLOW_SECONDS)
        put_policy(per_job)
        register(weighted)
        wait_applied(per_job, weighted)
        results["weighted"] = measure(net)
        results["leaf-queues-weighted"] = {
            name: float(limit) for name, limit in tc.leaf_queue_limits(BOTTLENECK).items()
        }
        print(json.dumps(results, indent=2, default=str))
        yield results


def test_equal_weights_share_fairly_and_far_better_than_per_flow(
    phases: dict[str, dict[str, float]],
) -> None:
    per_job = jain([phases["per-job"]["a"], phases["per-job"]["b"]])
    per_flow = jain([phases["per-flow"]["a"], phases["per-flow"]["b"]])
    print(f"Jain per job {per_job:.3f} (>= 0.9), per flow {per_flow:.3f} (< per job - 0.1)")
    assert per_job >= 0.9, phases
    assert per_job > per_flow + 0.1, phases


def test_weights_two_to_one_give_about_twice_the_goodput(
    phases: dict[str, dict[str, float]],
) -> None:
    ratio = phases["weighted"]["a"] / phases["weighted"]["b"]
    print(f"weights 2:1, goodput A/B {ratio:.3f} (1.75 to 2.2)")
    # 1.99 measured (2.23 before the queues were bounded); the target is 2.0 +- 0.2
    assert 1.75 <= ratio <= 2.2, phases


def test_every_queue_class_has_a_queue_of_the_planned_length(
    phases: dict[str, dict[str, float]],
) -> None:
    """Job queues included: a class OVS adds when a job registers gets its bounded queue (read
    after the weighted phase; per flow, the port has only the two classes' queues)."""
    planned = plan_port_qos(parse_policy(policy_document("per-job")), BOTTLENECK, None)
    weighted = phases["leaf-queues-weighted"]
    assert len(weighted) == 4, phases  # training, best-effort, job a, job b
    # 100 frames of 1 514 B: 40 ms at 30 Mbit/s, in bytes
    assert set(weighted.values()) == {float(planned.queue_bytes)} == {151_400.0}, phases
    assert set(phases["leaf-queues-per-flow"]) == {"1:1", "1:2"}, phases


def test_each_jobs_packets_went_through_its_own_queue(
    phases: dict[str, dict[str, float]],
) -> None:
    """The job entries' DSCP and the port's filters put each job in its queue on the wire."""
    carried = phases["queue-bytes"]
    sent = {name: phases["per-job"][name] * SECONDS / 8 for name in ("a", "b")}  # measured
    for name in ("a", "b"):
        assert carried[name] > 0.8 * sent[name], phases
    assert carried["unregistered"] < 0.01 * sum(carried.values()), phases


def test_the_class_still_fills_the_bottleneck(phases: dict[str, dict[str, float]]) -> None:
    """Work-conserving: the jobs together get what the port gives, in every mode."""
    for mode in ("per-job", "per-flow", "weighted"):
        total = phases[mode]["a"] + phases[mode]["b"]
        assert total > 0.8 * 30e6, (mode, phases)
