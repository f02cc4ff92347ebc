"""Detection latency on a 10 000-flow counting table, measured in the data plane.

What the issue asks for: the time from the moment a flow meets the elephant
criterion to the moment its override is in the switch, while the counting
table holds at least ``--flows`` tracked flows, and what one read of that
table costs the controller in CPU.

Both ends are timed by the receiver, on one clock, without asking the
controller: a paced UDP sender (``blast``) sends a fresh flow; the receiver
(``sink``) adds up the frame bytes it receives (payload + 42 bytes of
Ethernet, IPv4 and UDP headers: what the switch's counter counts), notes when
they cross the ``bytes`` threshold, and notes the first datagram that arrives
with the elephant class's DSCP, which only the override sets.  Their
difference is the detection latency, poll phase, table read, decision and
flow-mod included.  The sender keeps well above 5 % of the port rate, so a
criterion that counts only throughput-bound bytes still counts all of them.

Meanwhile a third host (``crowd``) keeps ``--flows`` one-packet UDP flows
alive in the counting table, and ``--short`` short TCP connections run
beside the elephants: none of them may be demoted.  Before the elephants, the
script samples the controller's CPU time (``/proc``) and its poll counter
(Prometheus) over a quiet window, once with an empty table and once with the
full one: CPU time per table read is the difference per poll.

    python -m flowlane_bench.bench_detection [--flows 10000] [--elephants 20] [--interval 100ms]

The ``crowd``, ``sink`` and ``blast`` subcommands are the pieces that run in
the Mininet hosts.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import math
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: the host-side subcommands stay light
    from controller.classify.thresholds import Thresholds

UDP_OVERHEAD = 14 + 20 + 8
"""Ethernet, IPv4 and UDP headers: the switch counts frames, the receiver sees payloads."""

PAYLOAD = 1400
CROWD_FIRST_PORT, ELEPHANT_FIRST_PORT, SHORT_PORT = 20000, 6000, 9000
TRAINING_DSCP = 26
POLICY = """
classes:
  inference:   {{priority: 0, dscp: 46, min_rate: 20%}}
  training:    {{priority: 1, dscp: {dscp}, min_rate: 70%}}
  best-effort: {{priority: 2, dscp: 0,  min_rate: 10%}}
default_class: inference
rules: []
detection:
  interval: {interval}
  elephant: {{bytes: {threshold}, class: training}}
  release_after: 10s
  max_tracked: {max_tracked}
ports: {{rate: {port_rate}}}
"""
DEMOTION = re.compile(r"(tcp|udp) \S+:(\d+) > \S+:(\d+) inference -> training")

# ---- the pieces that run in the hosts -----------------------------------------------------


def crowd(host: str, flows: int, refresh_s: float, rate_pps: float) -> None:
    """Keep ``flows`` UDP flows (one destination port each) alive in the counting table."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * 1024 * 1024)
    payload = b"c" * 16
    rounds = 0
    while True:
        started = time.monotonic()
        for index in range(flows):
            # Paced: every new flow is an upcall (learn) in the switch, which must keep up.
            due = started + index / rate_pps
            delay = due - time.monotonic()
            if delay > 0.001:
                time.sleep(delay)
            sock.sendto(payload, (host, CROWD_FIRST_PORT + index))
        rounds += 1
        print(json.dumps({"round": rounds, "seconds": time.monotonic() - started}), flush=True)
        time.sleep(max(0.0, refresh_s - (time.monotonic() - started)))


def sink(
    port: int, threshold: int, rate_bps: float, sustain_s: float, dscp: int, timeout_s: float
) -> None:
    """Receive one elephant; print when it met the criterion and when it was marked.

    The criterion is the policy's, applied to what arrives: ``rate_bps`` kept up over the
    last ``sustain_s`` (``for``), or ``threshold`` bytes (``bytes``), whichever comes first.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * 1024 * 1024)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    sock.bind(("0.0.0.0", port))
    sock.settimeout(timeout_s)
    print("listening", flush=True)
    total = packets = 0
    first = crossed = marked = None
    reason = None
    recent: collections.deque[tuple[float, int]] = collections.deque()
    in_window = 0
    space = socket.CMSG_SPACE(4)
    try:
        while marked is None:
            data, ancillary, _flags, _addr = sock.recvmsg(65536, space)
            now = time.monotonic()
            packets += 1
            size = len(data) + UDP_OVERHEAD
            total += size
            if first is None:
                first = now
            recent.append((now, size))
            in_window += size
            while recent[0][0] < now - sustain_s:
                in_window -= recent.popleft()[1]
            if crossed is None and total >= threshold:
                crossed, reason = now, "bytes"
            if (
                crossed is None
                and now - first >= sustain_s
                and in_window * 8 >= rate_bps * sustain_s
            ):
                crossed, reason = now, "rate"
            for level, kind, value in ancillary:
                if level == socket.IPPROTO_IP and kind == socket.IP_TOS and value[0] >> 2 == dscp:
                    marked = now
    except TimeoutError:
        pass
    print(
        json.dumps(
            {
                "bytes": total,
                "packets": packets,
                "crossed_after_s": None if crossed is None or first is None else crossed - first,
                "criterion": reason,
                "latency_s": None if crossed is None or marked is None else marked - crossed,
            }
        ),
        flush=True,
    )


def blast(host: str, port: int, rate_bps: float, seconds: float) -> None:
    """Paced UDP at ``rate_bps`` (frame bits) from a fresh source port: a new flow."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * 1024 * 1024)
    payload = b"e" * PAYLOAD
    per_second = rate_bps / 8 / (PAYLOAD + UDP_OVERHEAD)
    started = time.monotonic()
    sent = 0
    while (now := time.monotonic()) - started < seconds:
        due = int((now - started) * per_second) + 1
        while sent < due:
            # ENOBUFS from a full device queue is a drop, not the end of the flow.
            with contextlib.suppress(OSError):
                sock.sendto(payload, (host, port))
            sent += 1
        time.sleep(0.0005)


# ---- the benchmark ------------------------------------------------------------------------


def _metric(metrics_port: int, name: str) -> float:
    """Sum of one Prometheus series over its labels (one switch here)."""
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and line[len(name) : len(name) + 1] in ("{", " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _window(pid: int, metrics_port: int, seconds: float) -> dict[str, float]:
    """Controller CPU time and detection polls over ``seconds`` of steady state."""
    polls = "flowlane_detection_poll_seconds_count"
    spent = "flowlane_detection_poll_seconds_sum"
    cpu0, polls0, spent0 = _cpu_s(pid), _metric(metrics_port, polls), _metric(metrics_port, spent)
    time.sleep(seconds)
    cpu1, polls1, spent1 = _cpu_s(pid), _metric(metrics_port, polls), _metric(metrics_port, spent)
    count = max(1.0, polls1 - polls0)
    return {
        "polls": polls1 - polls0,
        "cpu_s_per_poll": (cpu1 - cpu0) / count,
        "wall_s_per_poll": (spent1 - spent0) / count,
        "tracked": _metric(metrics_port, "flowlane_tracked_flows"),
    }


def _finite(value: float) -> float | None:
    """Rounded seconds; None (JSON null, printed as a miss) for a flow never marked."""
    return round(value, 4) if value < math.inf else None


def _thresholds(policy: Path) -> Thresholds:
    """The criterion as the controller resolves it: rate in bit/s, ``for`` in seconds."""
    from controller.classify.thresholds import Thresholds
    from controller.policy.load import load_policy_file

    loaded = load_policy_file(policy)
    assert loaded.detection is not None
    return Thresholds.from_spec(loaded.detection, loaded.ports.rate.bps)


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    from flowlane_bench import harness
    from flowlane_bench.suite.stats import percentile
    from flowlane_bench.topologies import SWITCH, SingleSwitchTopo

    harness.check_prerequisites()
    policy = workdir / "detection.yaml"
    policy.write_text(
        POLICY.format(
            dscp=TRAINING_DSCP,
            interval=args.interval,
            threshold=args.threshold,
            max_tracked=max(100_000, 2 * args.flows),
            port_rate=args.port_rate,
        )
    )
    thresholds = _thresholds(policy)
    ofp_port, metrics_port = harness.free_port(), harness.free_port()
    topo = SingleSwitchTopo(training_senders=1, inference_clients=2)
    elephants: list[dict[str, Any]] = []
    with (
        (
            contextlib.nullcontext()
            if args.revalidate_ms is None
            else harness.max_revalidator(args.revalidate_ms)
        ),
        harness.network(topo, ofp_port) as net,
        harness.controller(
            policy, workdir / "controller.log", ofp_port, metrics_port=metrics_port
        ) as ctl,
    ):
        pid = ctl.process.pid
        ports = [i.name for i in net.get(SWITCH).intfList() if i.name != "lo"]
        harness.wait_in_sync(SWITCH, ctl.policy, ports)
        server, sender = net.get("server"), net.get("train1")
        crowd_host, mice_host = net.get("infer1"), net.get("infer2")
        me = harness.module_command("bench_detection")
        empty = _window(pid, metrics_port, args.window)
        crowd_proc = harness.host_popen(
            crowd_host,
            [*me, "crowd", "--host", server.IP(), "--flows", str(args.flows)],
        )
        started: list[subprocess.Popen[str]] = [crowd_proc]
        try:
            harness.wait_for(
                f"{args.flows} tracked flows",
                lambda: _metric(metrics_port, "flowlane_tracked_flows") >= args.flows,
                120,
            )
            full = _window(pid, metrics_port, args.window)
            sink_short = harness.host_popen(
                server, harness.module_command("shortflows", "server", "--port", str(SHORT_PORT))
            )
            started.append(sink_short)
            assert sink_short.stdout is not None and "listening" in sink_short.stdout.readline()
            mice = harness.host_popen(
                mice_host,
                [
                    *harness.module_command("shortflows"),
                    "client",
                    "--host",
                    server.IP(),
                    "--port",
                    str(SHORT_PORT),
                    "--count",
                    str(args.short),
                    "--bytes",
                    str(64 * 1024),
                ],
            )
            started.append(mice)
            rng = random.Random(12)
            crossing_s = args.threshold * 8 / args.rate
            for index in range(args.elephants):
                port = ELEPHANT_FIRST_PORT + index
                receiver = harness.host_popen(
                    server,
                    [
                        *me,
                        "sink",
                        "--port",
                        str(port),
                        "--threshold",
                        str(args.threshold),
                        "--rate",
                        str(thresholds.rate_bps),
                        "--sustain",
                        str(thresholds.sustain_s),
                        "--timeout",
                        "3",
                    ],
                )
                assert receiver.stdout is not None and "listening" in receiver.stdout.readline()
                source = harness.host_popen(
                    sender,
                    [
                        *me,
                        "blast",
                        "--host",
                        server.IP(),
                        "--port",
                        str(port),
                        "--rate",
                        str(args.rate),
                        "--seconds",
                        str(crossing_s + 5),
                    ],
                )
                out, _ = receiver.communicate(timeout=crossing_s + 30)
                harness.stop_process(source)
                elephants.append(json.loads(out.strip().splitlines()[-1]))
                # Start the next one at a random phase of the polling interval.
                time.sleep(0.5 + rng.random())
            after = _window(pid, metrics_port, 1.0)
            mice_out, _ = mice.communicate(timeout=600)
        finally:
            for process in started:
                harness.stop_process(process)
        log = ctl.log()
        problems = ctl.problems()
    demotions = DEMOTION.findall(log)
    demoted_ports = {int(dport) for _, _, dport in demotions}
    # The latency runs from the moment a flow met the criterion, so it is taken over the
    # elephants whose bytes reached the sink's threshold; one of those never marked within
    # the sink's timeout counts as infinitely late.  An elephant the data plane never
    # delivered that many bytes of (a saturated datapath drops it) is counted apart.
    crossed = [e for e in elephants if e["crossed_after_s"] is not None]
    latencies = sorted(math.inf if e["latency_s"] is None else e["latency_s"] for e in crossed)
    detected = sum(1 for value in latencies if value < math.inf)
    short = json.loads(mice_out)
    result: dict[str, Any] = {
        "tracked_flows": full["tracked"],
        "tracked_flows_after": after["tracked"],
        "interval": args.interval,
        "revalidate_ms": args.revalidate_ms,
        "criterion": {"rate_bps": thresholds.rate_bps, "for_s": thresholds.sustain_s},
        "threshold_bytes": args.threshold,
        "elephant_rate_bps": args.rate,
        "elephants": args.elephants,
        "crossed": len(crossed),
        "detected": detected,
        "latency_s": {
            "p50": _finite(statistics.median_low(latencies)) if latencies else None,
            "p95": _finite(percentile(latencies, 95)) if latencies else None,
            "max": _finite(latencies[-1]) if latencies else None,
        },
        "table_read": {
            "empty": {k: round(v, 5) for k, v in empty.items()},
            "full": {k: round(v, 5) for k, v in full.items()},
            "cpu_ms_per_read": round((full["cpu_s_per_poll"] - empty["cpu_s_per_poll"]) * 1e3, 2),
        },
        "crowd_flows_demoted": sum(
            1 for p in demoted_ports if CROWD_FIRST_PORT <= p < CROWD_FIRST_PORT + args.flows
        ),
        "short_flows": short,
        "short_flows_demoted": sum(1 for p in demoted_ports if p == SHORT_PORT),
        "controller_problems": problems[:5],
        "raw": elephants,
    }
    return result


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    pieces = argparse.ArgumentParser(description=__doc__)
    sub = pieces.add_subparsers(dest="piece")
    p = sub.add_parser("crowd")
    p.add_argument("--host", required=True)
    p.add_argument("--flows", type=int, default=10_000)
    p.add_argument("--refresh", type=float, default=3.0)
    p.add_argument("--pps", type=float, default=10_000)
    p = sub.add_parser("sink")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--threshold", type=int, required=True)
    p.add_argument("--rate", type=float, required=True, help="the criterion's rate, bit/s")
    p.add_argument("--sustain", type=float, required=True, help="the criterion's for, s")
    p.add_argument("--dscp", type=int, default=TRAINING_DSCP)
    p.add_argument("--timeout", type=float, default=3.0)
    p = sub.add_parser("blast")
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--rate", type=float, required=True)
    p.add_argument("--seconds", type=float, required=True)
    if argv and argv[0] in ("crowd", "sink", "blast"):
        piece = pieces.parse_args(argv)
        if piece.piece == "crowd":
            crowd(piece.host, piece.flows, piece.refresh, piece.pps)
        elif piece.piece == "sink":
            sink(piece.port, piece.threshold, piece.rate, piece.sustain, piece.dscp, piece.timeout)
        else:
            blast(piece.host, piece.port, piece.rate, piece.seconds)
        return 0

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--flows", type=int, default=10_000, help="tracked flows to keep alive")
    parser.add_argument("--elephants", type=int, default=20)
    parser.add_argument("--short", type=int, default=1000)
    parser.add_argument("--interval", default="100ms", help="the policy's detection interval")
    parser.add_argument("--threshold", type=int, default=4 * 1024 * 1024, help="bytes")
    parser.add_argument("--rate", type=float, default=60e6, help="elephant rate, bit/s")
    parser.add_argument("--port-rate", default="100Mbit", help="the policy's port rate")
    parser.add_argument("--window", type=float, default=5.0, help="CPU sampling window, s")
    parser.add_argument(
        "--revalidate-ms",
        type=int,
        default=100,
        help="OVS's max-revalidator for the run (how often it refreshes counters); 0: leave it",
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--keep", type=Path, default=None, help="keep the controller log here")
    args = parser.parse_args(argv)
    args.revalidate_ms = args.revalidate_ms or None
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        result = run(args, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="flowlane-detect-") as tmp:
            result = run(args, Path(tmp))
    _print(result)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


def _print(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    latency, read = result["latency_s"], result["table_read"]
    table = Table(
        title=f"elephant detection, {result['tracked_flows']:.0f} tracked flows,"
        f" {result['interval']} interval, OVS revalidation"
        f" {result['revalidate_ms'] or 500} ms"
    )
    for column in (
        "elephants",
        "met criterion",
        "detected",
        "p50 s",
        "p95 s",
        "max s",
        "CPU ms/read",
        "poll ms (wall)",
        "short flows",
        "demoted",
    ):
        table.add_column(column, justify="right")

    def seconds(value: float | None) -> str:
        return "missed" if value is None else f"{value:.3f}"

    table.add_row(
        str(result["elephants"]),
        str(result["crossed"]),
        str(result["detected"]),
        seconds(latency["p50"]),
        seconds(latency["p95"]),
        seconds(latency["max"]),
        f"{read['cpu_ms_per_read']:.1f}",
        f"{read['full']['wall_s_per_poll'] * 1e3:.1f}",
        str(result["short_flows"].get("connections", "-")),
        str(result["short_flows_demoted"] + result["crowd_flows_demoted"]),
    )
    console = Console(width=120)
    console.print(table)
    p95 = latency["p95"]
    met = (
        p95 is not None
        and p95 <= 0.25
        and result["detected"] == result["crossed"] == result["elephants"]
    )
    console.print(
        f"targets: p95 <= 250 ms after the criterion: {seconds(p95)} s"
        f" ({'met' if met else 'MISSED'});"
        f" table read <= 20 ms CPU: {read['cpu_ms_per_read']:.1f} ms"
        f" ({'met' if read['cpu_ms_per_read'] <= 20 else 'MISSED'});"
        f" flows wrongly demoted: {result['short_flows_demoted'] + result['crowd_flows_demoted']}"
    )
    if result["controller_problems"]:
        console.print("controller problems:", *result["controller_problems"], sep="\n  ")


if __name__ == "__main__":
    sys.exit(main())
