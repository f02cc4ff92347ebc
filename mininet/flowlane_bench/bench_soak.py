"""Soak: the whole stack under steady change for a bounded time, and what it cost the controller.

For ``--duration`` seconds (default 600) on one switch:

- a policy change every ``--policy-every`` seconds through ``PUT /v1/policy``
  (two documents in turn, each moving one rule, so every change installs and
  removes entries);
- ``--flows`` UDP flows churning through the counting table: a host sends one
  datagram on each of a window of source ports, and the window moves on, so
  new flows are learned and old ones idle out all the time;
- a job registered every ``--job-every`` seconds with a 5 s TTL, so jobs keep
  arriving and expiring.

Every 5 s it samples the controller's resident memory and thread count from
``/proc``.  At the end it stops the load, waits for one more audit and
reports: RSS growth after the warm-up (the first tenth), thread count
range, drift the last audit repaired (``flowlane_drift_repairs_total``),
errors in the controller's and the API's logs, and the policy writes that
failed.  Targets: RSS growth < 10 %, a constant thread count, 0 drift, 0
errors.

    python -m flowlane_bench.bench_soak [--duration 600] [--out bench-soak.json]

The ``churn`` subcommand is the piece that runs in a Mininet host.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CHURN_FIRST_PORT = 30000
AUDIT_INTERVAL_S = 5.0
POLICY = """\
classes:
  inference:   {priority: 0, dscp: 46, min_rate: 20%}
  training:    {priority: 1, dscp: 26, min_rate: 60%}
  best-effort: {priority: 2, dscp: 0,  min_rate: 10%}
default_class: inference
rules:
  - {name: moving, match: {ip_proto: tcp, tcp_dst: PORT}, class: training}
  - {name: triton, match: {ip_proto: tcp, tcp_dst: [8000, 8001]}, class: inference}
ports: {rate: 200Mbit}
detection:
  interval: 500ms
  elephant: {rate: 20Mbit, for: 1s, class: training}
  release_after: 5s
"""


def churn(host: str, flows: int, rate_pps: float) -> None:
    """One datagram per new flow, ``rate_pps`` flows a second, forever.

    Each datagram leaves from its own source port (a fresh socket bound to
    it), cycling through ``4 * flows`` ports: every send is a flow the
    switch has not counted for a while, so entries are learned and idle out
    all the time.
    """
    payload = b"s" * 32
    sent = 0
    started = time.monotonic()
    while True:
        delay = started + sent / rate_pps - time.monotonic()
        if delay > 0.001:
            time.sleep(delay)
        out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            out.bind(("0.0.0.0", CHURN_FIRST_PORT + sent % (4 * flows)))
            out.sendto(payload, (host, 9))
        except OSError:
            pass  # the port is still in use or the device queue is full: skip it
        finally:
            out.close()
        sent += 1


def _proc_status(pid: int) -> dict[str, int]:
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "Threads"):
            fields[key] = int(value.split()[0])
    return fields


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    import httpx

    from controller.policy.load import read_yaml
    from flowlane_bench import faults, harness
    from flowlane_bench.topologies import SWITCH, SingleSwitchTopo

    harness.check_prerequisites()
    documents = [read_yaml(POLICY.replace("PORT", str(p))) for p in (5201, 5202)]
    policy_file = workdir / "soak.yaml"
    policy_file.write_text(POLICY.replace("PORT", "5201"))
    ofp_port, metrics_port = harness.free_port(), harness.free_port()
    samples: list[dict[str, float]] = []
    writes = failed_writes = jobs = failed_jobs = 0
    topo = SingleSwitchTopo(training_senders=1, inference_clients=1)
    with (
        faults.persistent_redis(workdir) as store,
        harness.network(topo, ofp_port) as net,
        harness.controller(
            policy_file,
            workdir / "controller.log",
            ofp_port,
            metrics_port=metrics_port,
            audit_interval_s=AUDIT_INTERVAL_S,
            redis_url=store.url,
        ) as ctl,
        faults.api(store.url, workdir / "api.log") as api,
    ):
        ports = [i.name for i in net.get(SWITCH).intfList() if i.name != "lo"]
        harness.wait_in_sync(SWITCH, ctl.policy, ports)
        sender, server, trainer = net.get("infer1"), net.get("server"), net.get("train1")
        load = harness.host_popen(
            sender,
            [
                *harness.module_command("bench_soak"),
                "churn",
                "--host",
                server.IP(),
                "--flows",
                str(args.flows),
                "--rate",
                str(args.flows / 5),
            ],
        )
        client = httpx.Client(base_url=api.url, headers=api.headers, timeout=10)
        started = time.monotonic()
        next_policy = next_job = next_sample = started
        try:
            while (now := time.monotonic()) - started < args.duration:
                if now >= next_policy:
                    next_policy += args.policy_every
                    response = client.put("/v1/policy", json=documents[writes % 2])
                    writes += 1
                    failed_writes += response.status_code not in (200, 201)
                if now >= next_job:
                    next_job += args.job_every
                    job = {
                        "name": f"soak-{jobs}",
                        "class": "training",
                        # Another host's flows: the churn stays the detector's to count.
                        "endpoints": [
                            {"ipv4": f"{trainer.IP()}/32"},
                            {"ipv4": f"{server.IP()}/32"},
                        ],
                        "ttl": "5s",
                    }
                    jobs += 1
                    failed_jobs += client.post("/v1/jobs", json=job).status_code != 201
                if now >= next_sample:
                    next_sample += 5.0
                    status = _proc_status(ctl.process.pid)
                    samples.append(
                        {
                            "t": round(now - started, 1),
                            "rss_kib": status["VmRSS"],
                            "threads": status["Threads"],
                            "tracked": faults.metric(metrics_port, "flowlane_tracked_flows"),
                            "counted": harness.ofctl("dump-flows", SWITCH, "table=3").count(
                                "cookie="
                            ),
                        }
                    )
                    print(json.dumps(samples[-1]), flush=True)
                time.sleep(0.05)
        finally:
            harness.stop_process(load)
        # Quiet now: jobs expire, the last policy stays; one more audit must find nothing.
        time.sleep(8)
        drift_before = faults.metric(metrics_port, "flowlane_drift_repairs_total")
        time.sleep(2 * AUDIT_INTERVAL_S + 1)
        drift_after = faults.metric(metrics_port, "flowlane_drift_repairs_total")
        problems = ctl.problems()
        api_problems = harness.log_problems((workdir / "api.log").read_text(errors="replace"))
        client.close()
    warm = samples[max(1, len(samples) // 10) :]
    base = warm[0]["rss_kib"] if warm else samples[0]["rss_kib"]
    peak_end = max(s["rss_kib"] for s in warm[-3:]) if warm else base
    threads = [int(s["threads"]) for s in warm]
    return {
        "duration_s": args.duration,
        "policy_writes": writes,
        "failed_policy_writes": failed_writes,
        "jobs": jobs,
        "failed_jobs": failed_jobs,
        "rss_after_warmup_kib": base,
        "rss_end_kib": peak_end,
        "rss_growth": round(peak_end / base - 1, 4),
        "threads_min": min(threads),
        "threads_max": max(threads),
        "drift_repairs_at_end": drift_after - drift_before,
        "controller_log_problems": problems[:20],
        "api_log_problems": api_problems[:20],
        "samples": samples,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command")
    churn_parser = commands.add_parser("churn")
    churn_parser.add_argument("--host", required=True)
    churn_parser.add_argument("--flows", type=int, required=True)
    churn_parser.add_argument("--rate", type=float, required=True)
    parser.add_argument("--duration", type=float, default=600.0)
    parser.add_argument("--flows", type=int, default=1000)
    parser.add_argument("--policy-every", type=float, default=1.0)
    parser.add_argument("--job-every", type=float, default=3.0)
    parser.add_argument("--out", type=Path, default=Path("bench-soak.json"))
    args = parser.parse_args(argv)
    if args.command == "churn":
        churn(args.host, args.flows, args.rate)
        return 0
    with tempfile.TemporaryDirectory(prefix="flowlane-soak-") as tmp:
        result = run(args, Path(tmp))
    args.out.write_text(json.dumps(result, indent=2))
    ok = (
        result["rss_growth"] < 0.10
        and result["threads_min"] == result["threads_max"]
        and result["drift_repairs_at_end"] == 0
        and not result["controller_log_problems"]
        and not result["api_log_problems"]
        and result["failed_policy_writes"] == 0
    )
    print(
        f"soak {result['duration_s']:g} s: {result['policy_writes']} policy changes "
        f"({result['failed_policy_writes']} failed), {result['jobs']} jobs "
        f"({result['failed_jobs']} failed)\n"
        f"  controller RSS {result['rss_after_warmup_kib'] / 1024:.1f} MiB after warm-up, "
        f"{result['rss_end_kib'] / 1024:.1f} MiB at the end: "
        f"{100 * result['rss_growth']:+.1f} % (target < 10 %)\n"
        f"  threads {result['threads_min']}..{result['threads_max']} (target: constant)\n"
        f"  drift repaired by the last audit: {result['drift_repairs_at_end']:g} (target 0)\n"
        f"  log problems: controller {len(result['controller_log_problems'])}, "
        f"API {len(result['api_log_problems'])} (target 0)\n"
        f"  {'all targets met' if ok else 'TARGETS MISSED'}; report: {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
