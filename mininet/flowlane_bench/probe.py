"""A UDP probe stream: numbered datagrams on a fixed schedule, and a receiver that logs arrivals.

    python -m flowlane_bench.probe receive --port 7000 --duration 30  # "listening", one JSON line
    python -m flowlane_bench.probe send --host 10.0.0.6 --port 7000 --rate 1000 --duration 28

SIGINT ends a sender early; its report counts the datagrams it sent until then.

Datagram ``i`` carries its number and is due at ``start + i / rate``; a late
sender catches up rather than shifting the schedule, so a missing number is
a lost datagram and ``lost / rate`` is the outage in milliseconds of traffic.
What the outputs mean is decided in ``flowlane_bench.suite.probe``.

Standard library only: it runs inside Mininet hosts.  The ``start_*``
helpers at the bottom are for the runner.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import subprocess
import sys
import time
from typing import Any

from flowlane_bench.nodes import Node

HEADER = struct.Struct("!Qd")
"""Sequence number and send time (unix seconds)."""
COMMAND = [sys.executable, "-m", "flowlane_bench.probe"]
"""How the sender and the receiver start, in a Mininet host or here."""


def send(host: str, port: int, rate: float, count: int, size: int) -> dict[str, Any]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    padding = b"\0" * max(0, size - HEADER.size)
    errors = 0
    latest = 0.0
    start = time.time() + 0.05
    sent = 0
    try:
        for seq in range(count):
            due = start + seq / rate
            delay = due - time.time()
            if delay > 0:
                time.sleep(delay)
            else:
                latest = max(latest, -delay)
            try:
                sock.sendto(HEADER.pack(seq, time.time()) + padding, (host, port))
            except OSError:  # no route for a moment: the datagram is lost like any other
                errors += 1
            sent = seq + 1
    except KeyboardInterrupt:  # stopped early (SIGINT): the report counts what was sent
        pass
    sock.close()
    return {
        "rate": rate,
        "size": size,
        "start_unix": start,
        "sent": sent,
        "send_errors": errors,
        "latest_ms": round(latest * 1000, 3),
    }


def receive(port: int, duration: float, quiet: float | None = None) -> dict[str, Any]:
    """Arrivals for ``duration`` seconds, or until ``quiet`` seconds pass without one once the
    first has come (a stream that ended: its reader need not wait out the duration)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
    # The TOS byte of each datagram comes with it: the DSCP says which class the switch gave it.
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    sock.bind(("0.0.0.0", port))
    print("listening", flush=True)
    arrivals: list[tuple[int, float]] = []
    dscp: dict[int, int] = {}
    deadline = time.monotonic() + duration
    last = 0.0
    while (left := deadline - time.monotonic()) > 0:
        if quiet is not None and arrivals and time.monotonic() - last >= quiet:
            break
        sock.settimeout(min(left, 0.5 if quiet is None else min(quiet, 0.5)))
        try:
            data, ancillary, _, _ = sock.recvmsg(2048, socket.CMSG_SPACE(4))
        except TimeoutError:
            continue
        last = time.monotonic()
        if len(data) >= HEADER.size:
            arrivals.append((HEADER.unpack_from(data)[0], round(time.time(), 6)))
            for level, kind, value in ancillary:
                if level == socket.IPPROTO_IP and kind == socket.IP_TOS and value:
                    dscp[value[0] >> 2] = dscp.get(value[0] >> 2, 0) + 1
    sock.close()
    return {"port": port, "received": len(arrivals), "arrivals": arrivals, "dscp": dscp}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    sender = commands.add_parser("send")
    sender.add_argument("--host", required=True)
    sender.add_argument("--port", type=int, required=True)
    sender.add_argument("--rate", type=float, default=1000)
    sender.add_argument("--size", type=int, default=64)
    group = sender.add_mutually_exclusive_group(required=True)
    group.add_argument("--duration", type=float, help="seconds of datagrams")
    group.add_argument("--count", type=int, help="datagrams")
    receiver = commands.add_parser("receive")
    receiver.add_argument("--port", type=int, required=True)
    receiver.add_argument("--duration", type=float, required=True)
    receiver.add_argument(
        "--quiet", type=float, help="end this many seconds after the last datagram (once one came)"
    )
    args = parser.parse_args(argv)
    if args.command == "send":
        count = args.count if args.count is not None else int(args.duration * args.rate)
        report = send(args.host, args.port, args.rate, count, args.size)
    else:
        report = receive(args.port, args.duration, args.quiet)
    print(json.dumps(report, separators=(",", ":")), flush=True)
    return 0


# ---- for the runner (mininet side) -------------------------------------------------------


def start_receiver(
    host: Node, port: int, seconds: float, quiet_s: float | None = None
) -> subprocess.Popen[str]:
    """A receiver in ``host``, returned once its socket is bound; with ``quiet_s`` it ends that
    long after the last datagram instead of waiting out ``seconds``."""
    quiet = ["--quiet", f"{quiet_s:g}"] if quiet_s is not None else []
    process: subprocess.Popen[str] = host.popen(
        [*COMMAND, "receive", "--port", str(port), "--duration", f"{seconds:.2f}", *quiet],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    if "listening" not in process.stdout.readline():
        process.kill()
        raise RuntimeError(f"probe receiver on {host.name}:{port} did not start")
    return process


def start_sender(
    host: Node,
    ip: str,
    port: int,
    rate: float,
    size: int,
    *,
    seconds: float | None = None,
    count: int | None = None,
) -> subprocess.Popen[str]:
    amount = ["--count", str(count)] if count is not None else ["--duration", f"{seconds:.2f}"]
    args = [*COMMAND, "send", "--host", ip, "--port", str(port)]
    args += ["--rate", f"{rate:g}", "--size", str(size), *amount]
    process: subprocess.Popen[str] = host.popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    return process


def report(what: str, process: subprocess.Popen[str], timeout_s: float) -> dict[str, Any]:
    """The JSON line a probe process printed last; the error names ``what`` and why."""
    out, err = process.communicate(timeout=timeout_s)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"{what} printed no report (exit {process.returncode}): {err[-2000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


if __name__ == "__main__":
    sys.exit(main())
