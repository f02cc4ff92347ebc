"""Detection latency and false positives on real OVS, with the policy's own threshold.

One userspace switch, no bottleneck: a bulk sender runs ``--bulk`` iperf3
flows one after the other (each well past the 10 MiB threshold) while a
client opens ``--short`` TCP connections of at most 64 KiB to another
server. The controller logs every demotion with its latency from the flow's
first packet to the decision; the script prints p50/p95 of that latency for
the bulk flows and counts demoted short flows (target: 0).

    python mininet/bench_detection.py [--bulk 20] [--short 1000]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

import harness
from rich.console import Console
from rich.table import Table
from topologies import SWITCH, SingleSwitchTopo

POLICY = """
classes:
  inference:   {priority: 0, dscp: 46, min_rate: 20%}
  training:    {priority: 1, dscp: 26, min_rate: 70%}
  best-effort: {priority: 2, dscp: 0,  min_rate: 10%}
default_class: inference
rules: []
detection:
  interval: 500ms
  elephant: {bytes: 10MiB, class: training}
  release_after: 10s
ports: {rate: 10Gbit}
"""
SHORTFLOWS = Path(__file__).resolve().parent / "shortflows.py"
BULK_PORT, SHORT_PORT = 5201, 9000
DEMOTION = re.compile(r"tcp \S+:(\d+) > \S+:(\d+) inference -> training \(\w+, ([\d.]+) s")


def run(bulk: int, short: int, workdir: Path) -> dict[str, object]:
    harness.check_prerequisites()
    policy = workdir / "detection.yaml"
    policy.write_text(POLICY)
    ofp_port = harness.free_port()
    topo = SingleSwitchTopo(training_senders=1, inference_clients=1)
    with (
        harness.network(topo, ofp_port) as net,
        harness.controller(policy, workdir / "controller.log", ofp_port) as ctl,
    ):
        ports = [i.name for i in net.get(SWITCH).intfList() if i.name != "lo"]
        harness.wait_in_sync(SWITCH, ctl.policy, ports)
        server, sender, client = net.get("server"), net.get("train1"), net.get("infer1")
        sink = harness.host_popen(
            server, [harness.PYTHON, str(SHORTFLOWS), "server", "--port", str(SHORT_PORT)]
        )
        iperf = harness.host_popen(server, ["iperf3", "-s", "-p", str(BULK_PORT)])
        try:
            assert sink.stdout is not None and "listening" in sink.stdout.readline()
            mice = harness.host_popen(
                client,
                [
                    harness.PYTHON,
                    str(SHORTFLOWS),
                    "client",
                    "--host",
                    server.IP(),
                    "--port",
                    str(SHORT_PORT),
                    "--count",
                    str(short),
                    "--bytes",
                    str(64 * 1024),
                ],
            )
            for _ in range(bulk):
                done = harness.host_popen(
                    sender, ["iperf3", "-c", server.IP(), "-p", str(BULK_PORT), "-n", "40M", "-J"]
                )
                done.communicate(timeout=120)
            mice_out, _ = mice.communicate(timeout=600)
            harness.wait_for(
                "the last demotion to be logged",
                lambda: (
                    len([d for d in DEMOTION.findall(ctl.log()) if d[1] == str(BULK_PORT)]) >= bulk
                ),
                10,
            )
        finally:
            for process in (sink, iperf):
                harness.stop_process(process)
        demotions = DEMOTION.findall(ctl.log())
    latencies = [float(s) for _, dport, s in demotions if dport == str(BULK_PORT)]
    false_positives = [d for d in demotions if str(SHORT_PORT) in (d[0], d[1])]
    ordered = sorted(latencies)
    return {
        "bulk_flows": bulk,
        "detected": len(latencies),
        "latency_s": {
            "p50": round(statistics.median(ordered), 3),
            "p95": round(ordered[max(0, -(-len(ordered) * 95 // 100) - 1)], 3),
            "max": round(ordered[-1], 3),
        },
        "short_flows": json.loads(mice_out),
        "short_flows_demoted": len(false_positives),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bulk", type=int, default=20)
    parser.add_argument("--short", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="flowlane-detect-") as tmp:
        result = run(args.bulk, args.short, Path(tmp))
    table = Table(title="elephant detection (10 MiB threshold, 500 ms interval)")
    for column in ("bulk flows", "detected", "p50 s", "p95 s", "max s", "short flows", "demoted"):
        table.add_column(column, justify="right")
    latency = result["latency_s"]
    assert isinstance(latency, dict)
    short = result["short_flows"]
    assert isinstance(short, dict)
    table.add_row(
        str(result["bulk_flows"]),
        str(result["detected"]),
        f"{latency['p50']:.3f}",
        f"{latency['p95']:.3f}",
        f"{latency['max']:.3f}",
        str(short["connections"]),
        str(result["short_flows_demoted"]),
    )
    console = Console(width=110)
    console.print(table)
    console.print(
        f"targets: p95 <= 1 s: {latency['p95']:.3f} s"
        f" ({'met' if latency['p95'] <= 1 else 'MISSED'});"
        f" short flows demoted = 0: {result['short_flows_demoted']}"
        f" ({'met' if result['short_flows_demoted'] == 0 else 'MISSED'})"
    )
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
