"""Threads, memory and CPU of the controller by switch count, and propagation at each size.

For each size N, the whole stack (``flowlane up --ephemeral``, as in
``bench_propagation``) gets N userspace bridges (``bt0`` .. ``bt<N-1>``,
``datapath_type=netdev``, one internal port each) pointed at its controller. Once
all N report their queues, the controller process is read from ``/proc`` at rest:
its thread count, its RSS, and its CPU (utime + stime) per second over a quiet
interval. Then K policy changes (``PUT /v1/policy?wait=applied``, one rule moving
between classes each time, as ``bench_propagation`` does) give the controller's
CPU seconds per change and the propagation to all N switches (p50/p95/p99/max).

Every bridge and process it made is removed by name or PID afterwards, also on
Ctrl-C, SIGTERM or an error. Bridges named like ours that it did not make are
refused, never deleted.

At the end, per switch: the controller's CPU per second at rest and per change, and how
many switches one core keeps up with at 0, 1 and 10 changes a second (the sizing of
``docs/operations.md``); and the propagation target at 100 switches (issue 22: p99 <= 200 ms).

    python -m flowlane_bench.bench_threads [--switches 10,40,100] [--changes 200] [--out F.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType

import httpx
import yaml
from rich.console import Console
from rich.table import Table

from controller.qos.ovsdb import Ovsdb
from flowlane_bench import harness
from flowlane_bench.arguments import non_negative_float, positive_int
from flowlane_bench.bench_propagation import change_to, policy_document, provisioned
from flowlane_bench.suite.stats import percentile

BRIDGE_PREFIX = "bt"
DPID_BASE = 0xB7 << 40
"""Datapath ids ``0000b70000000000 + i``: set, not derived from a random MAC, so a run's
switches never collide with each other or with a Mininet run's ``s1``.. (ids 1..n)."""
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
TARGET_P99_MS = {100: 200.0}
"""Propagation targets by switch count (issue 22: 100 switches x 100 rules, one controller)."""


# --------------------------------------------------------------------------------------------
# /proc, pure parts first
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcSample:
    """One reading of a process: what ``/proc/PID/status`` and ``/proc/PID/stat`` say."""

    threads: int
    rss_kib: int
    cpu_s: float
    """utime + stime: CPU seconds the process (all its threads) has used so far."""


def parse_status(text: str) -> tuple[int, int]:
    """``(threads, VmRSS in KiB)`` from ``/proc/PID/status``."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    try:
        threads = int(fields["Threads"])
        rss_value, rss_unit = fields["VmRSS"].split()
    except (KeyError, ValueError) as exc:
        raise ValueError(f"no Threads/VmRSS in /proc status: {exc}") from None
    if rss_unit != "kB":
        raise ValueError(f"VmRSS in {rss_unit!r}, not kB")
    return threads, int(rss_value)


def parse_stat(text: str) -> tuple[int, int]:
    """``(ppid, utime + stime in clock ticks)`` from ``/proc/PID/stat``.

    The command name (field 2) is in parentheses and may hold spaces or parentheses
    itself: fields are counted from the last ``)``. After it come field 3 (state),
    4 (ppid) .. 14 (utime), 15 (stime).
    """
    _, sep, rest = text.rpartition(")")
    fields = rest.split()
    if not sep or len(fields) < 13:
        raise ValueError(f"not a /proc stat line: {text[:80]!r}")
    return int(fields[1]), int(fields[11]) + int(fields[12])


def is_controller_command(argv: Sequence[str]) -> bool:
    """Whether a command line is the controller ``flowlane up`` starts
    (``python -m controller controller ...``), not its API or Redis."""
    return list(argv[1:4]) == ["-m", "controller", "controller"]


def is_api_command(argv: Sequence[str]) -> bool:
    """Whether a command line is the API ``flowlane up`` starts (``python -m controller api``)."""
    return list(argv[1:4]) == ["-m", "controller", "api"]


def read_sample(pid: int) -> ProcSample:
    threads, rss_kib = parse_status(Path(f"/proc/{pid}/status").read_text())
    _, ticks = parse_stat(Path(f"/proc/{pid}/stat").read_text())
    return ProcSample(threads, rss_kib, ticks / CLOCK_TICKS)


def controller_pid(
    parent: int, role: Callable[[Sequence[str]], bool] = is_controller_command
) -> int:
    """The PID of the controller (or, with ``role=is_api_command``, the API) that
    ``flowlane up`` (PID ``parent``) started."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid, _ = parse_stat((entry / "stat").read_text())
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue  # gone meanwhile, or a kernel thread
        if ppid == parent and role([arg.decode() for arg in argv]):
            return int(entry.name)
    raise RuntimeError(f"no {role.__name__} process under flowlane up (pid {parent})")


# --------------------------------------------------------------------------------------------
# Bridges
# --------------------------------------------------------------------------------------------


def bridge_names(count: int) -> list[str]:
    return [f"{BRIDGE_PREFIX}{index}" for index in range(count)]


def _vsctl(*args: str, timeout_s: int = 60) -> str:
    return subprocess.run(
        ["ovs-vsctl", f"--timeout={timeout_s}", *args], capture_output=True, text=True, check=True
    ).stdout


@contextlib.contextmanager
def bridges(count: int, ofp_port: int) -> Iterator[list[str]]:
    """``count`` userspace bridges with one internal port each, pointed at the controller
    on ``ofp_port`` (1 s reconnect back-off, as ``harness.network`` sets); all made in one
    OVSDB transaction, deleted by name after, whatever happens meanwhile."""
    names = bridge_names(count)
    taken = sorted(set(_vsctl("list-br").split()) & set(names))
    if taken:
        raise RuntimeError(f"bridges {', '.join(taken)} exist already and are not this run's")
    commands: list[str] = []
    for index, name in enumerate(names):
        commands += [
            "--",
            "add-br",
            name,
            "--",
            "set",
            "bridge",
            name,
            "datapath_type=netdev",
            "fail_mode=secure",
            "protocols=OpenFlow13",
            f"other_config:datapath-id={DPID_BASE + index:016x}",
            "--",
            "add-port",
            name,
            f"{name}p1",
            "--",
            "set",
            "interface",
            f"{name}p1",
            "type=internal",
            "--",
            f"--id=@c{index}",
            "create",
            "controller",
            f'target="tcp:127.0.0.1:{ofp_port}"',
            "max_backoff=1000",
            "--",
            "set",
            "bridge",
            name,
            f"controller=@c{index}",
        ]
    try:
        _vsctl(*commands[1:])
        for name in names:  # the internal ports come up as a host's link would
            subprocess.run(["ip", "link", "set", f"{name}p1", "up"], check=False)
        yield names
    finally:
        existing = set(_vsctl("list-br").split())
        mine = [name for name in names if name in existing]
        deletions: list[str] = []
        for name in mine:
            deletions += ["--", "--if-exists", "del-br", name]
        if deletions:
            _vsctl(*deletions[1:])
        Ovsdb().collect_garbage()  # the QoS and queue rows the controller made for them


# --------------------------------------------------------------------------------------------
# One size
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SizeResult:
    switches: int
    changes: int
    threads_without_switches: int
    threads_at_rest: int
    threads_after_changes: int
    rss_mib_without_switches: float
    rss_mib_at_rest: float
    rss_mib_after_changes: float
    cpu_per_s_at_rest: float
    """Controller CPU seconds per wall-clock second, at rest (1.0 is one core busy)."""
    cpu_ms_per_change: float
    """Controller CPU over the changes, divided by their number."""
    cpu_ms_per_change_net: float
    """The same less what it spends at rest over as long: the cost of the change itself."""
    api_cpu_ms_per_change: float
    """The API's CPU over the changes, divided by their number (it serves the PUT and waits
    for every switch's confirmation)."""
    provision_s: float
    first_change_ms: float
    propagation_ms: dict[str, float]
    all_ms: list[float]


def per_switch(value: float, switches: int) -> float:
    return round(value / switches, 3)


def switches_per_core(
    rest_s_per_s_per_switch: float, change_ms_per_switch: float, changes_per_s: float
) -> int:
    """How many switches one core of controller CPU keeps up with: each costs its at-rest
    rate (queue reads, audits) plus ``changes_per_s`` policy changes a second at
    ``change_ms_per_switch`` each. One interpreter, so one core is the controller's ceiling."""
    per_switch_s = rest_s_per_s_per_switch + changes_per_s * change_ms_per_switch / 1000
    if per_switch_s <= 0:
        raise ValueError("a switch costs some CPU: both figures were zero")
    return int(1 / per_switch_s)


def latency_summary(latencies: Sequence[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "p50": round(percentile(ordered, 50), 2),
        "p95": round(percentile(ordered, 95), 2),
        "p99": round(percentile(ordered, 99), 2),
        "max": round(ordered[-1], 2),
        "mean": round(statistics.fmean(ordered), 2),
    }


def measure(
    switches: int, rules: int, changes: int, rest_s: float, settle_s: float, workdir: Path
) -> SizeResult:
    ofp_port = harness.free_port()
    initial = workdir / "initial.yaml"
    initial.write_text(yaml.safe_dump(policy_document(rules), sort_keys=False))
    with harness.stack(initial, workdir / f"stack-{switches}.log", ofp_port) as stack:
        pid = controller_pid(stack.process.pid)
        api = controller_pid(stack.process.pid, is_api_command)
        empty = read_sample(pid)
        started = time.monotonic()
        with bridges(switches, ofp_port):
            harness.wait_for(
                f"{switches} switches to report their queues",
                lambda: provisioned(stack, switches),
                60 + 2 * switches,
                0.5,
            )
            provision_s = time.monotonic() - started
            time.sleep(settle_s)  # the start-up's stragglers (stats, QoS checks) die down
            before = read_sample(pid)
            wall = time.monotonic()
            time.sleep(rest_s)
            rest = read_sample(pid)
            cpu_per_s = (rest.cpu_s - before.cpu_s) / (time.monotonic() - wall)
            latencies: list[float] = []
            with httpx.Client(base_url=stack.api, headers=stack.headers, timeout=120) as client:
                client.get("/v1/policy")  # the connection, opened before the clock starts
                first = change_to(client, rules, rules - 1, timeout_s=60)
                api_start = read_sample(api).cpu_s
                start_sample, wall = read_sample(pid), time.monotonic()
                for change in range(changes):
                    latencies.append(change_to(client, rules, change % rules, timeout_s=60))
                end_sample, elapsed = read_sample(pid), time.monotonic() - wall
                api_spent = read_sample(api).cpu_s - api_start
            spent = end_sample.cpu_s - start_sample.cpu_s
    return SizeResult(
        switches=switches,
        changes=changes,
        threads_without_switches=empty.threads,
        threads_at_rest=rest.threads,
        threads_after_changes=end_sample.threads,
        rss_mib_without_switches=round(empty.rss_kib / 1024, 1),
        rss_mib_at_rest=round(rest.rss_kib / 1024, 1),
        rss_mib_after_changes=round(end_sample.rss_kib / 1024, 1),
        cpu_per_s_at_rest=round(cpu_per_s, 4),
        cpu_ms_per_change=round(1000 * spent / changes, 2),
        cpu_ms_per_change_net=round(1000 * (spent - cpu_per_s * elapsed) / changes, 2),
        api_cpu_ms_per_change=round(1000 * api_spent / changes, 2),
        provision_s=round(provision_s, 1),
        first_change_ms=round(first, 2),
        propagation_ms=latency_summary(latencies),
        all_ms=[round(latency, 2) for latency in latencies],
    )


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def switch_counts(text: str) -> list[int]:
    """``10,40,100`` -> ``[10, 40, 100]``; each a positive integer."""
    counts = [positive_int(part.strip()) for part in text.split(",") if part.strip()]
    if not counts:
        raise argparse.ArgumentTypeError("no switch count given")
    if max(counts) > 1000:
        raise argparse.ArgumentTypeError("at most 1000 switches (bridge names bt0..bt999)")
    return counts


def table(results: Sequence[SizeResult]) -> Table:
    out = Table(title="controller threads, memory and CPU by switch count (userspace bridges)")
    columns = (
        "switches",
        "threads",
        "RSS MiB",
        "CPU/s at rest",
        "CPU ms/change",
        "net ms/change",
        "API ms/change",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "max ms",
    )
    for column in columns:
        out.add_column(column, justify="right")
    for result in results:
        latency = result.propagation_ms
        out.add_row(
            str(result.switches),
            f"{result.threads_at_rest} ({result.threads_without_switches} with none)",
            f"{result.rss_mib_at_rest:.1f}",
            f"{result.cpu_per_s_at_rest:.3f}",
            f"{result.cpu_ms_per_change:.1f}",
            f"{result.cpu_ms_per_change_net:.1f}",
            f"{result.api_cpu_ms_per_change:.1f}",
            f"{latency['p50']:.1f}",
            f"{latency['p95']:.1f}",
            f"{latency['p99']:.1f}",
            f"{latency['max']:.1f}",
        )
    return out


SIZING_RATES = (0.0, 1.0, 10.0)
"""Policy changes per second the sizing table is given for."""


def sizing(results: Sequence[SizeResult]) -> Table:
    """Per switch: the controller's CPU at rest and per change, and what one core holds."""
    out = Table(title="controller CPU per switch, and switches one core keeps up with")
    for column in (
        "switches",
        "CPU ms/s at rest per switch",
        "CPU ms per change per switch",
        *(f"switches/core at {rate:g} change/s" for rate in SIZING_RATES),
    ):
        out.add_column(column, justify="right")
    for result in results:
        rest = result.cpu_per_s_at_rest / result.switches
        change = result.cpu_ms_per_change / result.switches
        out.add_row(
            str(result.switches),
            f"{1000 * rest:.2f}",
            f"{change:.3f}",
            *(str(switches_per_core(rest, change, rate)) for rate in SIZING_RATES),
        )
    return out


def _terminate(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through every finally: bridges, then the stack


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--switches", type=switch_counts, default=[10, 40, 100])
    parser.add_argument("--rules", type=positive_int, default=100)
    parser.add_argument("--changes", type=positive_int, default=200)
    parser.add_argument("--rest", type=non_negative_float, default=10.0, help="seconds at rest")
    parser.add_argument(
        "--settle",
        type=non_negative_float,
        default=30.0,
        help="seconds between the last switch reporting and the rest window (at 100 switches,"
        " 5 s left start-up work in the window: 1.0 CPU/s at rest instead of 0.56)",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    harness.check_prerequisites()
    console = Console(width=140)
    results: list[SizeResult] = []
    with tempfile.TemporaryDirectory(prefix="flowlane-threads-") as tmp:
        for count in args.switches:
            console.print(f"{count} switches ...", highlight=False)
            result = measure(count, args.rules, args.changes, args.rest, args.settle, Path(tmp))
            console.print(
                f"  {result.threads_at_rest} threads, {result.rss_mib_at_rest:.1f} MiB,"
                f" provisioned in {result.provision_s:.1f} s,"
                f" p99 {result.propagation_ms['p99']:.1f} ms",
                highlight=False,
            )
            results.append(result)
    console.print(table(results))
    console.print(
        "threads/RSS at rest with all switches connected (in brackets: the same controller"
        " before any switch); CPU/s = controller CPU seconds per second; net ms/change ="
        " CPU per change less the at-rest rate; API ms/change = the API process's CPU per"
        " change; p50..max = PUT ?wait=applied to every"
        " switch's barrier",
        highlight=False,
    )
    console.print(sizing(results))
    console.print(
        "per switch = the figures above divided by the switch count; switches/core = 1 / (at"
        " rest + rate x per change), the change's CPU counted whole (its window's at-rest work"
        " included)",
        highlight=False,
    )
    for result in results:
        if result.switches in TARGET_P99_MS:
            target, p99 = TARGET_P99_MS[result.switches], result.propagation_ms["p99"]
            verdict = "met" if p99 <= target else "MISSED"
            console.print(
                f"target at {result.switches} switches: p99 <= {target:g} ms: {p99:.1f} ms"
                f" ({verdict}; {result.changes} changes)",
                highlight=False,
            )
    if args.out:
        document = {"rules": args.rules, "results": [asdict(result) for result in results]}
        args.out.write_text(json.dumps(document, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
