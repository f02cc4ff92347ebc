"""Acknowledged policy writes lost across repeated Redis primary kills (Sentinel): the target is 0.

A primary, a replica and three Sentinels (``flowlane_bench.sentinel``: real ``redis-server``
processes on free loopback ports) and a real ``flowlane api`` process on
``redis+sentinel://...?min_replicas=1``, so a write is acknowledged only once a replica
holds it (Redis ``WAIT``).  One thread writes policy versions without pause through the
HTTP API, each with a ``ports.rate`` of its own.  Then, ``--kills`` times: once writes
are acknowledged, the current primary gets ``SIGKILL``; the Sentinels promote the replica;
the old primary is started again as the new one's replica (as an operator brings a failed
host back), and the stream goes on.  Per kill the script prints the Sentinels' switch, the
first answer from the new primary and the first acknowledgement once a replica is back,
and the writes acknowledged, refused as not replicated (503 ``required_replicas``: the
new primary has no replica yet), or unavailable (503 while no primary answered).

At the end every acknowledged version is read back from the last primary: one missing,
or holding another write's document, is lost.  No Open vSwitch is needed.

    python -m flowlane_bench.bench_sentinel [--kills 10] [--out bench-sentinel.json]
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
from redis import Redis
from rich.console import Console
from rich.table import Table

from controller.store.client import connect
from controller.store.policies import PolicyStore
from flowlane_bench import faults
from flowlane_bench.arguments import non_negative_float, positive_int
from flowlane_bench.bench_propagation import policy_document
from flowlane_bench.sentinel import DOWN_AFTER_MS, MASTER, SYNCED, SentinelSet, free_ports

RETRY_S = 8.0
"""How long the API's Redis client retries a command across a failover (``retry_s``)."""
WAIT_MS = 200
"""How long a write waits for its replica before it is refused (``wait_ms``)."""
HISTORY_LIMIT = 1_000_000
"""Policy versions the API keeps: every acknowledged one must still be there to be checked
(the default of 1000 would trim the stream's older versions)."""
PAUSE_S = 5.0
"""Between a kill's recovery and the next kill.  With none, the second of two kills in a
row was promoted 7.5 s after it instead of 2.3 s: the Sentinels had not yet taken the
returned node for a replica they could promote.  Each kill is measured on its own."""
ANSWER_TIMEOUT_S = 30.0
TARGET_LOST = 0


# --------------------------------------------------------------------------------------------
# The writer
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """One ``PUT /v1/policy`` and what the API said."""

    sent: float
    done: float
    status: int
    rate: str
    """What the write sent (``ports.rate``): how its version is recognised afterwards."""
    version: int | None
    not_replicated: bool

    @property
    def acked(self) -> bool:
        return 200 <= self.status < 300

    @property
    def answered(self) -> bool:
        """A primary answered it: acknowledged, or taken but refused as not replicated."""
        return self.acked or self.not_replicated


@dataclass
class Writer:
    """One thread writing a new policy version after another, recording every answer."""

    client: httpx.Client
    answers: list[Answer] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        number = 0
        while not self.stop.is_set():
            number += 1
            rate = f"{1000 + number}Mbit"
            document = policy_document(4)
            document["ports"]["rate"] = rate
            sent = time.monotonic()
            try:
                response = self.client.put("/v1/policy", json=document)
                status, body = response.status_code, _json(response)
            except httpx.HTTPError:
                status, body = 0, {}
            version = body.get("version")
            answer = Answer(
                sent,
                time.monotonic(),
                status,
                rate,
                version if isinstance(version, int) else None,
                status == 503 and "required_replicas" in body,
            )
            with self.changed:
                self.answers.append(answer)
                self.changed.notify_all()

    def wait(self, what: str, predicate: Callable[[Sequence[Answer]], bool]) -> None:
        with self.changed:
            if not self.changed.wait_for(lambda: predicate(self.answers), ANSWER_TIMEOUT_S):
                last = [(a.status, a.version) for a in self.answers[-5:]]
                raise TimeoutError(f"never {what} within {ANSWER_TIMEOUT_S:g} s; last: {last}")

    def first(self, predicate: Callable[[Answer], bool]) -> Answer:
        with self.changed:
            return next(a for a in self.answers if predicate(a))


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


# --------------------------------------------------------------------------------------------
# The kills
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KillResult:
    kill: int
    node: str
    """The data node killed (``primary`` or ``replica``: the name it was started with)."""
    port: int
    switch_master_s: float
    """From the kill to the first Sentinel's ``+switch-master``."""
    answered_s: float
    """From the kill to the first answer from the new primary (acknowledged, or refused as
    not replicated) to a write sent after the kill."""
    acked_again_s: float
    """From the kill to the first acknowledgement of a write sent after the old primary was
    started again as a replica."""
    resynced_s: float
    """From the kill to the old primary's finished sync as the new one's replica."""
    acked: int
    refused: int
    """Answered 503 not replicated (the new primary alone)."""
    unavailable: int
    """Answered 503 without a primary, or failed otherwise."""


def current_primary(sentinels: SentinelSet) -> int:
    """The primary's port, as the first Sentinel that answers says."""
    for port in sentinels.ports[2:]:
        client = Redis(port=port, socket_timeout=2)
        try:
            host_port = client.sentinel_get_master_addr_by_name(MASTER)
        except Exception:  # a Sentinel between restarts: ask the next
            continue
        finally:
            client.close()
        if isinstance(host_port, tuple):  # (host, port); None while it names none
            return int(host_port[1])
    raise RuntimeError("no Sentinel names a primary")


def kill_once(
    number: int, sentinels: SentinelSet, writer: Writer, settled_writes: int
) -> tuple[float, KillResult]:
    """Wait for ``settled_writes`` acknowledged writes, kill the primary, bring it back as a
    replica; when it was killed and what followed."""
    primary_port = current_primary(sentinels)
    name = "primary" if primary_port == sentinels.ports[0] else "replica"
    survivor = sentinels.ports[1] if name == "primary" else sentinels.ports[0]
    settled = time.monotonic()
    writer.wait(
        f"{settled_writes} writes acknowledged before kill {number}",
        lambda answers: sum(a.acked and a.sent >= settled for a in answers) >= settled_writes,
    )
    watcher = sentinels.nodes["sentinel-1"]
    mark = watcher.mark()
    killed = time.monotonic()
    sentinels.nodes[name].kill()
    writer.wait(
        f"an answer from the new primary after kill {number}",
        lambda answers: any(a.sent >= killed and a.answered for a in answers),
    )
    answered = writer.first(lambda a: a.sent >= killed and a.answered).done
    switched = watcher.wait_for(rf"\+switch-master {MASTER} ", timeout_s=30, since=mark)
    if current_primary(sentinels) != survivor:
        raise RuntimeError(f"kill {number}: the Sentinels did not promote port {survivor}")
    restarted = time.monotonic()
    node = sentinels.start_data(name, replica_of=survivor)
    resynced = node.wait_for(SYNCED, timeout_s=30)
    writer.wait(
        f"a write acknowledged after kill {number} once a replica was back",
        lambda answers: any(a.acked and a.sent >= restarted for a in answers),
    )
    acked_again = writer.first(lambda a: a.acked and a.sent >= restarted).done
    return killed, KillResult(
        kill=number,
        node=name,
        port=primary_port,
        switch_master_s=round(switched - killed, 3),
        answered_s=round(answered - killed, 3),
        acked_again_s=round(acked_again - killed, 3),
        resynced_s=round(resynced - killed, 3),
        acked=0,
        refused=0,
        unavailable=0,
    )


def counted(result: KillResult, answers: Sequence[Answer], start: float, end: float) -> KillResult:
    """``result`` with the writes sent from its kill to the next one counted."""
    window = [a for a in answers if start <= a.sent < end]
    acked = sum(a.acked for a in window)
    refused = sum(a.not_replicated for a in window)
    return KillResult(
        **{
            **asdict(result),
            "acked": acked,
            "refused": refused,
            "unavailable": len(window) - acked - refused,
        }
    )


def lost_writes(url: str, answers: Sequence[Answer]) -> list[tuple[int | None, str]]:
    """Acknowledged writes whose version is missing from the store or holds another write."""
    store = PolicyStore(connect(url))
    lost: list[tuple[int | None, str]] = []
    for answer in answers:
        if not answer.acked:
            continue
        stored = store.get(answer.version) if answer.version is not None else None
        if stored is None or stored.document.get("ports", {}).get("rate") != answer.rate:
            lost.append((answer.version, answer.rate))
    return lost


def run(kills: int, settled_writes: int, pause_s: float, workdir: Path) -> dict[str, Any]:
    sentinels = SentinelSet(workdir, free_ports(5))
    results: list[KillResult] = []
    kill_times: list[float] = []
    try:
        sentinels.start()
        url = sentinels.url(f"min_replicas=1&wait_ms={WAIT_MS}&retry_s={RETRY_S:g}")
        with (
            faults.api(url, workdir / "api.log", ["--history-limit", str(HISTORY_LIMIT)]) as api,
            httpx.Client(base_url=api.url, headers=api.headers, timeout=RETRY_S + 30) as client,
        ):
            writer = Writer(client)
            thread = threading.Thread(target=writer.run, name="policy-writer", daemon=True)
            started = time.monotonic()
            thread.start()
            try:
                for number in range(1, kills + 1):
                    killed, result = kill_once(number, sentinels, writer, settled_writes)
                    kill_times.append(killed)
                    results.append(result)
                    time.sleep(pause_s)
                # The last window ends with as many acknowledged writes as the others start with.
                ended = time.monotonic()
                writer.wait(
                    "writes acknowledged after the last kill",
                    lambda answers: (
                        sum(a.acked and a.sent >= ended for a in answers) >= settled_writes
                    ),
                )
            finally:
                writer.stop.set()
                thread.join(RETRY_S + 30)
            stopped = time.monotonic()
            answers = list(writer.answers)
        lost = lost_writes(url, answers)
    finally:
        sentinels.stop()
    ends = [*kill_times[1:], stopped]
    results = [
        counted(result, answers, start, end)
        for result, start, end in zip(results, kill_times, ends, strict=True)
    ]
    acked = [a for a in answers if a.acked]
    versions = [a.version for a in acked]
    ordered = versions == sorted(v for v in versions if v is not None)
    refused = sum(a.not_replicated for a in answers)
    return {
        "kills": kills,
        "down_after_ms": DOWN_AFTER_MS,
        "wait_ms": WAIT_MS,
        "retry_s": RETRY_S,
        "duration_s": round(stopped - started, 1),
        "writes": len(answers),
        "acknowledged": len(acked),
        "refused_not_replicated": refused,
        "unavailable": len(answers) - len(acked) - refused,
        "acknowledged_versions_increasing": ordered and len(set(versions)) == len(versions),
        "lost": len(lost),
        "lost_writes": lost[:20],
        "per_kill": [asdict(result) for result in results],
    }


def _summary(values: Sequence[float]) -> str:
    ordered = sorted(values)
    return f"median {ordered[len(ordered) // 2]:.2f} s, max {ordered[-1]:.2f} s"


def table(result: dict[str, Any]) -> Table:
    out = Table(title="Redis primary kills under a stream of API policy writes (Sentinel)")
    columns = (
        "kill",
        "node",
        "+switch-master s",
        "answered again s",
        "replica synced s",
        "acked again s",
        "acked",
        "refused",
        "unavailable",
    )
    for column in columns:
        out.add_column(column, justify="right")
    for kill in result["per_kill"]:
        out.add_row(
            str(kill["kill"]),
            f"{kill['node']}:{kill['port']}",
            f"{kill['switch_master_s']:.2f}",
            f"{kill['answered_s']:.2f}",
            f"{kill['resynced_s']:.2f}",
            f"{kill['acked_again_s']:.2f}",
            str(kill["acked"]),
            str(kill["refused"]),
            str(kill["unavailable"]),
        )
    return out


def _terminate(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through every finally: the API, then Redis


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kills", type=positive_int, default=10)
    parser.add_argument(
        "--settled-writes",
        type=positive_int,
        default=20,
        help="writes acknowledged before each kill (the stream is flowing through a replica)",
    )
    parser.add_argument(
        "--pause",
        type=non_negative_float,
        default=PAUSE_S,
        help="seconds from the old primary's return (writes acknowledged again) to the next kill",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    console = Console(width=140)
    with tempfile.TemporaryDirectory(prefix="flowlane-sentinel-") as tmp:
        result = run(args.kills, args.settled_writes, args.pause, Path(tmp))
    console.print(table(result))
    kills = result["per_kill"]
    console.print(
        f"writes {result['writes']} in {result['duration_s']:.0f} s: acknowledged"
        f" {result['acknowledged']}, refused as not replicated"
        f" {result['refused_not_replicated']}, unavailable {result['unavailable']};"
        f" Sentinel down-after {DOWN_AFTER_MS} ms",
        highlight=False,
    )
    console.print(
        "answered again after a kill: "
        + _summary([k["answered_s"] for k in kills])
        + "; acknowledged again (old primary back as replica): "
        + _summary([k["acked_again_s"] for k in kills]),
        highlight=False,
    )
    verdict = "met" if result["lost"] <= TARGET_LOST else "MISSED"
    console.print(
        f"target: acknowledged writes lost across {result['kills']} primary kills"
        f" = {TARGET_LOST}: {result['lost']} ({verdict})",
        highlight=False,
    )
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0 if result["lost"] <= TARGET_LOST else 1


if __name__ == "__main__":
    sys.exit(main())
