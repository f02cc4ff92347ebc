"""Policy-change propagation: REST request to the last switch's barrier, on 10 switches.

A linear Mininet topology of userspace OVS switches runs under the whole
stack (``flowlane up``). A 100-rule policy is applied, then changed again
and again (one rule moves between classes each time) with
``PUT /v1/policy?wait=applied``, which returns only once every switch has
confirmed the new version with a barrier. The client-side time of each PUT
is the propagation latency; the script prints p50/p99/max, and the first
change after start-up on its own line.

    python -m flowlane_bench.bench_propagation [--switches 10] [--rules 100] [--changes 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml
from mininet.topo import LinearTopo
from rich.console import Console
from rich.table import Table

from flowlane_bench import harness
from flowlane_bench.suite.stats import percentile

BASE_PORT = 10_000
TARGET_P99_MS = 50.0


def policy_document(rules: int, flipped: int | None = None) -> dict[str, Any]:
    """``rules`` port rules alternating between the two AI classes; ``flipped`` swaps one."""

    def class_of(index: int) -> str:
        training = index % 2 == 0
        if index == flipped:
            training = not training
        return "training" if training else "inference"

    return {
        "classes": {
            "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
            "training": {"priority": 1, "dscp": 26, "min_rate": "70%"},
            "best-effort": {"priority": 2, "dscp": 0, "min_rate": "10%"},
        },
        "default_class": "inference",
        "rules": [
            {"name": f"service-{i}", "match": {"tcp_dst": BASE_PORT + i}, "class": class_of(i)}
            for i in range(rules)
        ],
        "ports": {"rate": "1Gbit"},
    }


def provisioned(stack: harness.StackProcess, switches: int) -> bool:
    """Every switch reported, with its queues on every port: set-up is over, and a change
    is measured against a controller in its steady state."""
    reports = httpx.get(f"{stack.api}/v1/switches", timeout=5, headers=stack.headers)
    found = reports.json()["switches"]
    return len(found) == switches and all(
        port["queues"] for switch in found for port in switch["ports"]
    )


def change_to(client: httpx.Client, rules: int, flipped: int, timeout_s: float = 30) -> float:
    """``PUT /v1/policy?wait=applied`` of ``policy_document(rules, flipped)``: its ms."""
    body = json.dumps(policy_document(rules, flipped=flipped)).encode()
    started = time.perf_counter()
    response = client.put(
        "/v1/policy",
        content=body,
        params={"wait": "applied", "timeout": timeout_s},
        headers={"Content-Type": "application/json"},
    )
    elapsed = time.perf_counter() - started
    if response.status_code not in (200, 201):  # 201 stored, 200 unchanged
        raise RuntimeError(f"PUT failed: {response.status_code} {response.text}")
    return 1000 * elapsed


def run(switches: int, rules: int, changes: int, workdir: Path) -> dict[str, Any]:
    harness.check_prerequisites()
    ofp_port = harness.free_port()
    initial = workdir / "initial.yaml"
    initial.write_text(yaml.safe_dump(policy_document(rules), sort_keys=False))
    latencies: list[float] = []
    with (
        harness.stack(initial, workdir / "stack.log", ofp_port) as stack,
        harness.network(LinearTopo(k=switches, n=1), ofp_port),
    ):
        harness.wait_for(
            f"{switches} switches to report their queues",
            lambda: provisioned(stack, switches),
            60,
        )
        # One client for every change, as an orchestrator keeps one: a new httpx client
        # per request would add its own set-up (about 30 ms: the CA bundle, a connection)
        # to what is measured.
        with httpx.Client(base_url=stack.api, headers=stack.headers, timeout=60) as client:
            client.get("/v1/policy")  # the connection, opened before the clock starts

            # The first change after start-up is reported on its own: it also fills the
            # controller's caches (every rule's entries, every encoded flow-mod), which a
            # controller in service filled long ago.
            first = change_to(client, rules, rules - 1)
            for change in range(changes):
                latencies.append(change_to(client, rules, change % rules))
        flows = len(harness.ofctl_cookies("s1"))
    return {
        "switches": switches,
        "rules": rules,
        "flows_per_switch": flows,
        "changes": changes,
        "first_change_ms": round(first, 2),
        "latency_ms": {
            "p50": round(statistics.median(latencies), 2),
            "p99": round(percentile(sorted(latencies), 99), 2),
            "max": round(max(latencies), 2),
            "mean": round(statistics.fmean(latencies), 2),
        },
        "all_ms": [round(latency, 2) for latency in latencies],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--switches", type=int, default=10)
    parser.add_argument("--rules", type=int, default=100)
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="flowlane-prop-") as tmp:
        result = run(args.switches, args.rules, args.changes, Path(tmp))
    table = Table(title="policy change propagation (PUT ?wait=applied → last barrier)")
    for column in ("switches", "rules", "flows/switch", "changes", "p50 ms", "p99 ms", "max ms"):
        table.add_column(column, justify="right")
    latency = result["latency_ms"]
    table.add_row(
        str(result["switches"]),
        str(result["rules"]),
        str(result["flows_per_switch"]),
        str(result["changes"]),
        f"{latency['p50']:.1f}",
        f"{latency['p99']:.1f}",
        f"{latency['max']:.1f}",
    )
    console = Console(width=110)
    console.print(table)
    console.print(
        f"first change after start-up (not in the table): {result['first_change_ms']:.1f} ms"
    )
    verdict = "met" if latency["p99"] <= TARGET_P99_MS else "MISSED"
    console.print(f"target: p99 <= {TARGET_P99_MS:g} ms: {latency['p99']:.1f} ms ({verdict})")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
