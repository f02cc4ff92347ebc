"""Takeover: ``SIGKILL`` of a master -> its switches' first flow-mod accepted from the new one.

Three ``flowlane controller`` processes (instances ``tk-a``, ``tk-b``, ``tk-c``) share
one Redis (a ``redis-server`` this script starts on a free port) and ``--switches``
userspace bridges (``tko0``.., one internal port each), every bridge connected to all
three (``set-controller`` with three targets).  Mastership splits the bridges two per
instance.

Each of ``--kills`` rounds picks the next instance that masters a bridge, stops it
(``SIGSTOP``: its connections stay open, it does nothing), deletes one of flowlane's
entries on every bridge it masters (the *canary*: the highest-priority entry of table
0, deleted with ``ovs-ofctl --strict`` through the bridge's own management socket),
then kills it (``SIGKILL``, the time measured from).  The new master of each bridge
reads the bridge at takeover, finds the canary missing and sends it again: the
canary's install time on the switch (dump time less its ``duration``) is the switch's
first accepted flow-mod from the new master.  The killed instance is started again
(same instance id) and the split balanced before the next round.

Then ``--pauses`` rounds check the fence: an instance is paused (``SIGSTOP``) until
the others hold its bridges (its lease's TTL), canaries are deleted on them, and it
is resumed: its overdue audit finds them missing and writes; every such write must
be refused by the switch (it steps down), none accepted (no ``in sync`` with changes
in its log for those bridges after the resume).

There are no hosts and no probe traffic (``probe packets lost`` is Mininet's: see
tests/mininet/test_controllers.py); the bench measures the control plane only.
Every bridge and process it made is removed by name or PID afterwards.

    python -m flowlane_bench.bench_takeover [--switches 6] [--kills 20] [--pauses 3] [--out F]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType

import redis

from flowlane_bench import harness
from flowlane_bench.arguments import non_negative_int, positive_int
from flowlane_bench.suite.stats import percentile

BRIDGE_PREFIX = "tko"
DPID_BASE = 0xB9 << 40
INSTANCES = ("tk-a", "tk-b", "tk-c")
POLICY = harness.REPO / "policies" / "examples" / "fifo.yaml"
LEASE_TTL_S = 3.0
RESTORE_TIMEOUT_S = 10.0
PREFIX = "flowlane:mastership:"


# --------------------------------------------------------------------------------------------
# Pure parts: what dump-flows says, figures
# --------------------------------------------------------------------------------------------

_FLOW = re.compile(r"duration=([0-9.]+)s, table=(\d+),.*?priority=(\d+)(?:,(\S+))? actions=")


@dataclass(frozen=True)
class Canary:
    """One flowlane entry of a bridge, named exactly (``--strict``)."""

    table: int
    priority: int
    match: str

    @property
    def spec(self) -> str:
        return f"table={self.table},priority={self.priority}" + (
            f",{self.match}" if self.match else ""
        )


def flows_of(dump: str) -> list[tuple[float, Canary]]:
    """(duration in s, entry) of every line of ``ovs-ofctl dump-flows``."""
    found = []
    for line in dump.splitlines():
        m = _FLOW.search(line)
        if m:
            found.append(
                (float(m.group(1)), Canary(int(m.group(2)), int(m.group(3)), m.group(4) or ""))
            )
    return found


def pick_canary(dump: str) -> Canary | None:
    """The highest-priority entry of table 0 (a flowlane entry: the bridge is fail-secure
    and has no other controller writing)."""
    table0 = [canary for _, canary in flows_of(dump) if canary.table == 0]
    return max(table0, key=lambda c: (c.priority, c.match), default=None)


def summary(values_s: Sequence[float]) -> dict[str, float]:
    ordered = sorted(value * 1000 for value in values_s)
    if not ordered:
        return {}
    return {
        "p50": percentile(ordered, 50),
        "p99": percentile(ordered, 99),
        "max": ordered[-1],
        "count": float(len(ordered)),
    }


def stale_counts(log: str, tags: Sequence[str]) -> tuple[int, int]:
    """(writes refused, batches accepted) of a resumed instance for the switches ``tags``,
    from its log after the resume, until the switch confirms it master again with a new
    generation (it may get its share back at once, legitimately): a step-down is a
    refusal, an ``in sync`` with changes before that a stale batch the switch accepted."""
    refused = accepted = 0
    granted: set[str] = set()
    for line in log.splitlines():
        tag = next((tag for tag in tags if tag in line), None)
        if tag is None or tag in granted:
            continue
        if f"switch {tag}: master (generation" in line:
            granted.add(tag)  # taken again, fenced like any take: its writes are legitimate
        elif "stepping down" in line:
            refused += 1
        elif m := re.search(r"in sync \([^)]*\): \+(\d+) -(\d+)", line):
            accepted += 1 if int(m.group(1)) or int(m.group(2)) else 0
    return refused, accepted


# --------------------------------------------------------------------------------------------
# Processes and bridges
# --------------------------------------------------------------------------------------------


def _vsctl(*args: str) -> str:
    return subprocess.run(
        ["ovs-vsctl", "--timeout=60", *args], capture_output=True, text=True, check=True
    ).stdout


def _ofctl(*args: str) -> str:
    return subprocess.run(
        ["ovs-ofctl", "-O", "OpenFlow13", *args], capture_output=True, text=True, check=True
    ).stdout


@contextlib.contextmanager
def redis_server(directory: Path) -> Iterator[str]:
    port = harness.free_port()
    process = subprocess.Popen(
        [
            *("redis-server", "--port", str(port), "--bind", "127.0.0.1"),
            *("--save", "", "--appendonly", "no", "--dir", str(directory)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url)
        harness.wait_for("redis-server", lambda: _pings(client), 10, 0.05)
        yield url
    finally:
        harness.stop_process(process)


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


@dataclass
class Instance:
    name: str
    ofp_port: int
    log_path: Path
    redis_url: str
    process: subprocess.Popen[bytes] | None = None
    offsets: list[int] = field(default_factory=list)

    def start(self) -> None:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [
                harness.PYTHON,
                "-m",
                "controller",
                "controller",
                "--policy",
                str(POLICY),
                "--ofp-port",
                str(self.ofp_port),
                "--metrics-port",
                "0",
                "--no-qos",
                "--redis-url",
                self.redis_url,
                "--instance-id",
                self.name,
                "--lease-ttl",
                str(LEASE_TTL_S),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=harness.REPO,
            start_new_session=True,
        )
        log.close()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def signal(self, signum: int) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signum)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        assert self.process is not None
        self.process.wait(5)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.signal(signal.SIGCONT)
            harness.stop_process(self.process)


@contextlib.contextmanager
def bridges(count: int, ports: Sequence[int]) -> Iterator[list[str]]:
    """``count`` userspace bridges, each connected to every controller port."""
    names = [f"{BRIDGE_PREFIX}{index}" for index in range(count)]
    taken = sorted(set(_vsctl("list-br").split()) & set(names))
    if taken:
        raise RuntimeError(f"bridges {', '.join(taken)} exist already and are not this run's")
    commands: list[str] = []
    for index, name in enumerate(names):
        refs = [f"@c{index}x{n}" for n in range(len(ports))]
        commands += ["--", "add-br", name, "--", "set", "bridge", name, "datapath_type=netdev"]
        commands += ["fail_mode=secure", "protocols=OpenFlow13"]
        commands += [f"other_config:datapath-id={DPID_BASE + index:016x}"]
        commands += ["--", "add-port", name, f"{name}p1", "--", "set", "interface", f"{name}p1"]
        commands += ["type=internal"]
        for ref, port in zip(refs, ports, strict=True):
            commands += ["--", f"--id={ref}", "create", "controller"]
            commands += [f'target="tcp:127.0.0.1:{port}"', "max_backoff=1000"]
        commands += ["--", "set", "bridge", name, f"controller={','.join(refs)}"]
    try:
        _vsctl(*commands[1:])
        yield names
    finally:
        existing = set(_vsctl("list-br").split())
        deletions: list[str] = []
        for name in names:
            if name in existing:
                deletions += ["--", "--if-exists", "del-br", name]
        if deletions:
            _vsctl(*deletions[1:])


def dpid_of(bridge: str) -> int:
    return DPID_BASE + int(bridge.removeprefix(BRIDGE_PREFIX))


def owners(client: redis.Redis) -> dict[int, tuple[str, int]]:
    """dpid -> (instance, generation) of owners whose lease is current."""
    found = {}
    for dpid, raw in client.hgetall(f"{PREFIX}owners").items():
        record = json.loads(raw)
        instance = str(record["instance"])
        if client.exists(f"{PREFIX}lease:{instance}"):
            found[int(dpid, 16)] = (instance, int(record["generation"]))
    return found


def balanced(client: redis.Redis, count: int) -> bool:
    held = owners(client)
    per = [sum(1 for i, _ in held.values() if i == name) for name in INSTANCES]
    return len(held) == count and max(per) - min(per) <= 1


def restored_at(bridge: str, canary: Canary) -> float | None:
    """Unix time the canary was installed at, or None while it is missing.

    The switch answers the dump late in ``ovs-ofctl``'s life (most of its run time is its
    start, which takes tens of ms on a busy machine): the dump is dated when it returns,
    so an install time is never too early (a takeover never reads shorter than it was)."""
    dump = _ofctl("dump-flows", bridge, f"table={canary.table}")  # no --strict for reads
    answered = time.time()
    durations = [duration for duration, flow in flows_of(dump) if flow == canary]
    if not durations:
        return None
    return answered - durations[0]


def in_place(names: Sequence[str], canaries: dict[str, Canary]) -> bool:
    return all(restored_at(name, canaries[name]) is not None for name in names)


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


@dataclass
class Result:
    switches: int
    kills: int
    takeover_ms: dict[str, float]
    """Per switch: SIGKILL -> the canary installed by the new master."""
    slowest_switch_per_kill_ms: dict[str, float]
    samples_ms: list[float]
    not_restored: int
    pauses: int
    stale_refused: int
    stale_accepted: int
    pause_takeover_ms: dict[str, float]
    """SIGSTOP -> every switch of the paused instance held by another (lease TTL + watch)."""


def ready(
    client: redis.Redis, names: Sequence[str], instances: Sequence[Instance], timeout_s: float
) -> dict[str, Canary]:
    harness.wait_for("a balanced split", lambda: balanced(client, len(names)), timeout_s, 0.1)
    canaries: dict[str, Canary] = {}

    def picked() -> bool:
        for name in names:
            if name not in canaries:
                canary = pick_canary(_ofctl("dump-flows", name))
                if canary is not None and canary.priority > 0:
                    canaries[name] = canary
        return len(canaries) == len(names)

    harness.wait_for("every bridge's pipeline", picked, timeout_s, 0.2)
    return canaries


def run(args: argparse.Namespace, tmp: Path) -> Result:
    samples: list[float] = []
    per_kill: list[float] = []
    missing = 0
    with redis_server(tmp) as url:
        client = redis.Redis.from_url(url, decode_responses=True)
        instances = [
            Instance(name, harness.free_port(), tmp / f"{name}.log", url) for name in INSTANCES
        ]
        try:
            with bridges(args.switches, [i.ofp_port for i in instances]) as names:
                for instance in instances:
                    instance.start()
                started = time.monotonic()
                canaries = ready(client, names, instances, 60)
                print(f"ready in {time.monotonic() - started:.1f} s", flush=True)
                by_name = {i.name: i for i in instances}
                for round_ in range(args.kills):
                    held = owners(client)
                    victim = _next_victim(held, round_)
                    mine = [n for n in names if held[dpid_of(n)][0] == victim]
                    target = by_name[victim]
                    target.signal(signal.SIGSTOP)
                    for name in mine:
                        _ofctl("--strict", "del-flows", name, canaries[name].spec)
                    killed = time.time()
                    target.kill()
                    latencies = _wait_restored(mine, canaries, killed)
                    missing += len(mine) - len(latencies)
                    samples += latencies
                    if latencies:
                        per_kill.append(max(latencies))
                    print(
                        f"kill {round_ + 1}/{args.kills}: {victim} ({len(mine)} switches)"
                        f" -> {', '.join(f'{x * 1000:.0f}' for x in latencies)} ms",
                        flush=True,
                    )
                    target.start()
                    ready(client, names, instances, 60)
                refused = accepted = 0
                pause_s: list[float] = []
                for round_ in range(args.pauses):
                    r, a, took = _pause_round(client, names, canaries, by_name, round_)
                    refused, accepted = refused + r, accepted + a
                    pause_s.append(took)
                    ready(client, names, instances, 60)
        finally:
            for instance in instances:
                instance.stop()
        problems = [line for i in instances for line in harness.log_problems(i.log())]
        if problems:
            print("controller log problems:\n" + "\n".join(problems[:20]), flush=True)
    return Result(
        switches=args.switches,
        kills=args.kills,
        takeover_ms=summary(samples),
        slowest_switch_per_kill_ms=summary(per_kill),
        samples_ms=[round(s * 1000, 1) for s in samples],
        not_restored=missing,
        pauses=args.pauses,
        stale_refused=refused,
        stale_accepted=accepted,
        pause_takeover_ms=summary(pause_s),
    )


def _next_victim(held: dict[int, tuple[str, int]], round_: int) -> str:
    """Each instance in turn (one that masters a switch)."""
    masters = sorted({instance for instance, _ in held.values()})
    return masters[round_ % len(masters)]


def _wait_restored(names: Sequence[str], canaries: dict[str, Canary], killed: float) -> list[float]:
    deadline = time.monotonic() + RESTORE_TIMEOUT_S
    found: dict[str, float] = {}
    while len(found) < len(names) and time.monotonic() < deadline:
        for name in names:
            if name not in found:
                at = restored_at(name, canaries[name])
                if at is not None:
                    found[name] = at - killed
        time.sleep(0.01)
    return [found[name] for name in names if name in found]


def _pause_round(
    client: redis.Redis,
    names: Sequence[str],
    canaries: dict[str, Canary],
    instances: dict[str, Instance],
    round_: int,
) -> tuple[int, int, float]:
    held = owners(client)
    victim = _next_victim(held, round_)
    mine = [n for n in names if held[dpid_of(n)][0] == victim]
    target = instances[victim]
    paused = time.time()
    target.signal(signal.SIGSTOP)

    def taken() -> bool:
        now = owners(client)
        return all(dpid_of(n) in now and now[dpid_of(n)][0] != victim for n in mine)

    harness.wait_for("its switches taken", taken, LEASE_TTL_S * 4, 0.02)
    took = time.time() - paused
    for name in mine:
        _ofctl("--strict", "del-flows", name, canaries[name].spec)
    offset = len(target.log())
    target.signal(signal.SIGCONT)
    harness.wait_for("the canaries restored", lambda: in_place(mine, canaries), 15, 0.1)
    time.sleep(1.0)  # what the resumed instance does next is in its log by now
    tags = [f"{dpid_of(n):016x}" for n in mine]
    refused, accepted = stale_counts(target.log()[offset:], tags)
    print(
        f"pause {round_ + 1}: {victim} ({len(mine)} switches) taken in {took:.2f} s;"
        f" its writes refused {refused}, accepted {accepted}",
        flush=True,
    )
    return refused, accepted, took


def _terminate(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through every finally: processes, bridges


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--switches", type=positive_int, default=6)
    parser.add_argument("--kills", type=positive_int, default=20)
    parser.add_argument("--pauses", type=non_negative_int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--logs", type=Path, default=None, help="keep the logs in this folder")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    harness.check_prerequisites()
    if args.logs is not None:
        args.logs.mkdir(parents=True, exist_ok=True)
        result = run(args, args.logs)
    else:
        with tempfile.TemporaryDirectory(prefix="flowlane-takeover-") as tmp:
            result = run(args, Path(tmp))
    takeover = result.takeover_ms
    print(
        f"takeover (SIGKILL -> first accepted flow-mod of the new master), {result.kills} kills,"
        f" {len(result.samples_ms)} switch takeovers: p50 {takeover.get('p50', 0):.0f} ms,"
        f" p99 {takeover.get('p99', 0):.0f} ms, max {takeover.get('max', 0):.0f} ms"
        f" (target p99 <= 500 ms); not restored {result.not_restored};"
        f" stale flow-mods accepted {result.stale_accepted} (refused {result.stale_refused},"
        f" {result.pauses} pauses)",
        flush=True,
    )
    if args.out:
        args.out.write_text(json.dumps(asdict(result), indent=2))
    ok = result.not_restored == 0 and result.stale_accepted == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
