"""Open-loop inference load generator for flowlane Mininet scenarios (standard library only).

It runs inside Mininet hosts, so it must not depend on anything outside the standard library::

    python -m flowlane_bench.loadgen server --host 0.0.0.0 --port 8000 [--response-bytes N]
    python -m flowlane_bench.loadgen client --host H --port P --rate R --duration S \\
        --request-bytes N --response-bytes M --connections C \\
        [--warmup S] [--timeout S] [--output FILE] \\
        [--arrivals {uniform,poisson}] [--seed INT] [--burst-on S --burst-off S] \\
        [--timeline-interval S] [--raw-latencies]

Wire protocol (every integer is an unsigned 32-bit big-endian value):

* request:  an 8-byte header ``struct "!II"`` = (request payload length, requested response
  length), followed by that many payload bytes (zeros).
* response: a 4-byte header ``struct "!I"`` = response payload length ``n``, followed by ``n``
  payload bytes (zeros). ``n`` is the requested length, unless the server was started with
  ``--response-bytes``, which overrides it for every response.
* Each connection is strictly request/response (no pipelining): the client sends the next
  request on a connection only after the previous response has fully arrived. Lengths above
  ``MAX_MESSAGE_BYTES`` are a protocol error and the server closes the connection.

Server: one thread per accepted connection (connections are few and long-lived), TCP_NODELAY on
every socket, prints ``listening HOST:PORT`` (the real port, so ``--port 0`` works) once bound,
and exits with status 0 on SIGTERM/SIGINT.

Client measurement model (why the numbers can be trusted):

* Open loop: the whole schedule (offsets from the start, see ``plan_arrivals``) is computed
  before the first request and never depends on responses. ``--arrivals uniform`` (default)
  schedules request ``i`` at ``start + i / rate``; ``--arrivals poisson`` uses exponential
  inter-arrival times with mean ``1 / rate`` drawn from ``random.Random(--seed)`` (default
  seed 1), so a run is reproducible.
* Bursts: with ``--burst-on S_on --burst-off S_off`` (both > 0; both default to 0 = no bursts)
  arrivals happen only during on-periods. Time alternates on for ``S_on`` seconds and off for
  ``S_off`` seconds, starting with an on-period at the start of the warm-up; during an
  on-period requests arrive at ``--rate`` (uniform or Poisson, as chosen). The arrival process
  runs on a clock that only advances during on-periods, so it simply pauses while off.
* Requests are assigned round-robin (``i % connections``, ``i`` in schedule order); each
  connection has one worker thread that sleeps until the scheduled time of its next request, or
  sends it at once when the connection was still busy. Latency is measured from the *scheduled*
  time to the arrival of the last response byte, so time spent queued behind a slow response is
  included (no coordinated omission).
* Requests scheduled during ``--warmup`` are sent but not counted anywhere; the measured window
  of ``--duration`` seconds follows. Uniform without bursts keeps exact counting: the first
  ``ceil(warmup * rate)`` requests are warm-up, then ``floor(duration * rate)`` measured
  requests follow, and the measured window starts at the first measured request's scheduled
  offset ``ceil(warmup * rate) / rate`` (less than ``1 / rate`` after ``--warmup``). Uniform
  with bursts counts the same way in on-period time: ``floor(on-time in the window * rate)``.
  With Poisson arrivals the measured requests are those scheduled in
  ``[warmup, warmup + duration)``. Apart from uniform without bursts, the measured window
  starts exactly at ``--warmup``. The run therefore lasts about ``warmup + duration`` seconds
  (plus at most ``--timeout`` to drain).
* Every measured request ends as exactly one sample or one error, so
  ``requests_completed + errors == requests_scheduled``. ``--timeout`` is a per-request deadline
  counted from the scheduled time; a request already past its deadline when its connection gets
  free is not sent and counts as an ``expired`` error. After any other error the connection is
  closed (it may be mid-message) and re-opened for the next request. Errors never abort the run.
* Clocks: every time interval uses ``time.perf_counter`` (monotonic). The wall clock is read
  once, only to stamp ``window_start_unix``.

Client output: one JSON object on stdout (and in ``--output`` if given)::

    {"requests_scheduled": int, "requests_completed": int, "errors": int,
     "error_kinds": {kind: count}, "rate_target": float, "rate_achieved": float,
     "duration_s": float,
     "latency_ms": {"p50", "p90", "p99", "p999", "max", "mean", "min": float | null},
     "samples": int, "window_start_unix": float,
     "timeline": [[offset_s: float, completed: int, bytes: int], ...],
     "latencies_ms": [float, ...]}   # only with --raw-latencies

``requests_scheduled`` counts the measured requests only. ``rate_target`` is the mean arrival
rate over the measured window: ``rate`` without bursts, ``rate * S_on / (S_on + S_off)`` with
bursts (the long-run mean; exact when ``--duration`` is a whole number of on/off cycles).
``duration_s`` is the measurement span: ``max(duration, last measured completion - start of the
measured window)``, and ``rate_achieved = requests_completed / duration_s``; so a server that
cannot keep up shows a rate below target even though all responses eventually arrived.
Percentiles use the nearest-rank method (``flowlane_bench.suite.stats.percentile``). With zero
samples all latency values are null and the exit status is 1; otherwise it is 0.

``window_start_unix`` is ``time.time()`` at the start of the measured window (derived from the
monotonic clock through one wall-clock reading), so the timelines of several client processes
can be aligned. ``timeline`` has one ``[offset_s, completed, bytes]`` bucket per
``--timeline-interval`` seconds (default 0.5), from the window start up to ``duration_s`` and
the last completion (empty buckets included). ``offset_s`` is the bucket start relative to the
window start, ``completed`` counts measured requests by the time their response completed, and
``bytes`` is what those requests exchanged: request header and payload (8 + request bytes) plus
response header and payload (4 + the response length the server announced); TCP/IP overhead is
not counted. So the ``completed`` values sum to ``requests_completed``. ``latencies_ms`` lists every
sample (ms, rounded to the microsecond) in completion order, i.e. in ``timeline`` order.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import selectors
import signal
import socket
import struct
import sys
import threading
import time
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import NotRequired, TypedDict

from flowlane_bench.arguments import non_negative_float, positive_float, positive_int
from flowlane_bench.suite.stats import percentile

REQUEST_HEADER = struct.Struct("!II")
RESPONSE_HEADER = struct.Struct("!I")
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
"""Upper bound for a payload length: protects the server against garbage headers."""
_CHUNK = 64 * 1024
"""Receive chunk size, and the size below which header and payload go out in one send."""
_START_LEAD_S = 0.005
"""Delay between releasing the workers and the first scheduled request, so all start aligned."""
_EPS = 1e-9
"""Tolerance for float products such as ``2.0 * 100.0`` when counting requests."""
ARRIVALS = ("uniform", "poisson")
"""Arrival processes of ``--arrivals``."""


# --------------------------------------------------------------------------------------------
# Pure helpers (unit-tested)
# --------------------------------------------------------------------------------------------


class LatencySummary(TypedDict):
    """Latency statistics in milliseconds; all values are None when there are no samples."""

    p50: float | None
    p90: float | None
    p99: float | None
    p999: float | None
    max: float | None
    mean: float | None
    min: float | None


TimelineBucket = tuple[float, int, int]
"""``(offset_s, completed, bytes)`` of one timeline bucket (a JSON array in the report)."""


class Summary(TypedDict):
    """The client's JSON report; the key set is a contract with the harness that parses it."""

    requests_scheduled: int
    requests_completed: int
    errors: int
    error_kinds: dict[str, int]
    rate_target: float
    rate_achieved: float
    duration_s: float
    latency_ms: LatencySummary
    samples: int
    window_start_unix: float
    timeline: list[TimelineBucket]
    latencies_ms: NotRequired[list[float]]


@dataclass(frozen=True)
class Schedule:
    """How many requests fall in the warm-up and measured phases of an open-loop run."""

    warmup_requests: int
    measured_requests: int

    @property
    def total(self) -> int:
        """All requests that will be sent, warm-up included."""
        return self.warmup_requests + self.measured_requests


def plan_schedule(rate: float, duration: float, warmup: float) -> Schedule:
    """Count the requests of each phase for requests scheduled every ``1 / rate`` seconds.

    Warm-up requests are those with offset ``i / rate < warmup``; the measured phase then holds
    ``floor(duration * rate)`` requests. Counting (rather than comparing float timestamps) keeps
    the number of measured requests exact, e.g. 200 for 2 s at 100 req/s.
    """
    if rate <= 0 or duration < 0 or warmup < 0:
        raise ValueError("rate must be > 0, duration and warmup >= 0")
    warmup_requests = max(0, math.ceil(warmup * rate - _EPS))
    measured_requests = max(0, math.floor(duration * rate + _EPS))
    return Schedule(warmup_requests, measured_requests)


def scheduled_offset(index: int, rate: float) -> float:
    """Offset of request ``index`` from the start, computed directly so errors never accumulate."""
    return index / rate


@dataclass(frozen=True)
class ArrivalPlan:
    """A precomputed open-loop schedule: offsets (seconds from the start), warm-up ones first."""

    offsets: tuple[float, ...]
    """Scheduled offsets of all requests, sorted ascending; index ``i`` is request ``i``."""
    warmup_requests: int
    """The first ``warmup_requests`` offsets are warm-up (sent, not counted)."""
    window_offset: float
    """Offset at which the measured window starts."""

    @property
    def measured_requests(self) -> int:
        """Requests counted in the report (``requests_scheduled``)."""
        return len(self.offsets) - self.warmup_requests

    @property
    def total(self) -> int:
        """All requests that will be sent, warm-up included."""
        return len(self.offsets)


def active_time(offset: float, burst_on: float, burst_off: float) -> float:
    """On-period time elapsed between the start and ``offset`` (on first, then alternating)."""
    period = burst_on + burst_off
    cycles = math.floor(offset / period + _EPS)
    return cycles * burst_on + min(max(offset - cycles * period, 0.0), burst_on)


def burst_offset(active: float, burst_on: float, burst_off: float) -> float:
    """Offset at which ``active`` seconds of on-period time have elapsed (always in an on-period).

    A point on the border between two on-periods maps to the start of the later one, never to
    the start of an off-period.
    """
    cycles = math.floor(active / burst_on + _EPS)
    return cycles * (burst_on + burst_off) + max(active - cycles * burst_on, 0.0)


def plan_arrivals(
    rate: float,
    duration: float,
    warmup: float,
    *,
    arrivals: str = "uniform",
    seed: int = 1,
    burst_on: float = 0.0,
    burst_off: float = 0.0,
) -> ArrivalPlan:
    """The whole open-loop schedule, warm-up included (pure: the same arguments, the same plan).

    Arrivals are generated on an "active" clock that only advances during on-periods (the
    identity without bursts) and then mapped to real offsets, so with bursts nothing is
    scheduled in an off-period and the rate within on-periods is ``rate``:

    * uniform: active time ``i / rate``. Without bursts this is exactly ``plan_schedule`` and
      the window starts at the first measured request; with bursts the warm-up holds
      ``ceil(active warm-up * rate)`` requests and the window ``floor(active window * rate)``.
    * poisson: active inter-arrival times ``random.Random(seed).expovariate(rate)``; warm-up
      requests are those before ``warmup``, measured ones those in ``[warmup, warmup +
      duration)``.

    Except for uniform without bursts, the measured window starts at ``warmup``.
    """
    if not (math.isfinite(rate) and rate > 0):
        raise ValueError("rate must be a positive number")
    if duration < 0 or warmup < 0:
        raise ValueError("duration and warmup must be >= 0")
    if arrivals not in ARRIVALS:
        raise ValueError(f"arrivals must be one of {ARRIVALS}, got {arrivals!r}")
    if burst_on < 0 or burst_off < 0 or (burst_on > 0) != (burst_off > 0):
        raise ValueError("burst_on and burst_off must both be > 0 (bursts) or both 0")
    bursts = burst_on > 0

    if bursts:
        active_start = active_time(warmup, burst_on, burst_off)
        active_end = active_time(warmup + duration, burst_on, burst_off)
    else:
        active_start, active_end = warmup, warmup + duration

    active: list[float]
    if arrivals == "uniform":
        if bursts:
            warm = max(0, math.ceil(active_start * rate - _EPS))
            measured = max(0, math.floor((active_end - active_start) * rate + _EPS))
        else:
            counts = plan_schedule(rate, duration, warmup)
            warm, measured = counts.warmup_requests, counts.measured_requests
        active = [scheduled_offset(i, rate) for i in range(warm + measured)]
        window = warmup if bursts else scheduled_offset(warm, rate)
    else:
        rng = random.Random(seed)
        active = []
        moment = rng.expovariate(rate)
        while moment < active_end:
            active.append(moment)
            moment += rng.expovariate(rate)
        warm = bisect_left(active, active_start)
        window = warmup

    if bursts:
        offsets = tuple(burst_offset(at, burst_on, burst_off) for at in active)
    else:
        offsets = tuple(active)
    return ArrivalPlan(offsets=offsets, warmup_requests=warm, window_offset=window)


def target_rate(rate: float, burst_on: float, burst_off: float) -> float:
    """Mean arrival rate: ``rate``, or ``rate * on / (on + off)`` with bursts (``rate_target``)."""
    if burst_on <= 0:
        return rate
    return round(rate * burst_on / (burst_on + burst_off), 6)


def build_timeline(
    completions: Iterable[tuple[float, int]], interval: float, span: float
) -> list[TimelineBucket]:
    """Bucket ``(offset_s, bytes)`` completions (offsets from the window start) by ``interval``.

    Buckets cover ``[0, span)`` (empty ones included) and extend to the latest completion;
    a completion at offset ``t`` lands in bucket ``floor(t / interval)`` (negative ``t`` in 0).
    """
    if not (math.isfinite(interval) and interval > 0):
        raise ValueError("interval must be a positive number")
    counts: Counter[int] = Counter()
    volume: Counter[int] = Counter()
    for offset, size in completions:
        index = max(0, math.floor(offset / interval))
        counts[index] += 1
        volume[index] += size
    buckets = max(0, math.ceil(span / interval - _EPS), max(counts, default=-1) + 1)
    return [(round(index * interval, 6), counts[index], volume[index]) for index in range(buckets)]


def connection_requests(connection: int, connections: int, total: int) -> range:
    """Indices of the requests that round-robin assigns to ``connection`` (0-based)."""
    return range(connection, total, connections)


def summarize_latencies(latencies_ms: Sequence[float]) -> LatencySummary:
    """Percentiles, extremes and mean of the samples (ms), or all None when there are none."""
    if not latencies_ms:
        return LatencySummary(
            p50=None, p90=None, p99=None, p999=None, max=None, mean=None, min=None
        )
    ordered = sorted(latencies_ms)

    def rnd(value: float) -> float:
        return round(value, 4)

    return LatencySummary(
        p50=rnd(percentile(ordered, 50.0)),
        p90=rnd(percentile(ordered, 90.0)),
        p99=rnd(percentile(ordered, 99.0)),
        p999=rnd(percentile(ordered, 99.9)),
        max=rnd(ordered[-1]),
        mean=rnd(math.fsum(ordered) / len(ordered)),
        min=rnd(ordered[0]),
    )


def build_summary(
    *,
    latencies_s: Sequence[float],
    error_kinds: Mapping[str, int],
    requests_scheduled: int,
    rate_target: float,
    duration_s: float,
    window_start_unix: float = 0.0,
    timeline: Sequence[TimelineBucket] = (),
    raw_latencies: bool = False,
) -> Summary:
    """Assemble the JSON report from raw measurements (latencies in seconds).

    ``latencies_s`` should be in completion order: with ``raw_latencies`` they are reported as
    ``latencies_ms`` in that order.
    """
    completed = len(latencies_s)
    kinds = {kind: count for kind, count in sorted(error_kinds.items()) if count}
    summary = Summary(
        requests_scheduled=requests_scheduled,
        requests_completed=completed,
        errors=sum(kinds.values()),
        error_kinds=kinds,
        rate_target=rate_target,
        rate_achieved=round(completed / duration_s, 3) if duration_s > 0 else 0.0,
        duration_s=round(duration_s, 6),
        latency_ms=summarize_latencies([s * 1000.0 for s in latencies_s]),
        samples=completed,
        window_start_unix=round(window_start_unix, 6),
        timeline=list(timeline),
    )
    if raw_latencies:
        summary["latencies_ms"] = [round(s * 1000.0, 3) for s in latencies_s]
    return summary


def measurement_span(duration: float, window_start: float, last_completion: float | None) -> float:
    """Span used for the achieved rate: the window, stretched if completions lag behind it."""
    if last_completion is None:
        return duration
    return max(duration, last_completion - window_start)


# --------------------------------------------------------------------------------------------
# Socket helpers
# --------------------------------------------------------------------------------------------


class PeerClosedError(ConnectionError):
    """The peer closed the connection in the middle of (or instead of) a message."""


class ProtocolError(Exception):
    """The peer sent a length that this protocol does not allow."""


def _set_nodelay(sock: socket.socket) -> None:
    """Small request/response messages must not wait for Nagle's algorithm."""
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _recv_into(sock: socket.socket, view: memoryview, deadline: float | None) -> None:
    """Fill ``view`` completely; with a deadline, the socket timeout shrinks as time passes."""
    got = 0
    size = len(view)
    while got < size:
        if deadline is not None:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise TimeoutError("request deadline passed")
            sock.settimeout(remaining)
        n = sock.recv_into(view[got:])
        if n == 0:
            raise PeerClosedError("connection closed by peer")
        got += n


def _recv_discard(
    sock: socket.socket, length: int, scratch: memoryview, deadline: float | None
) -> None:
    """Read and drop ``length`` payload bytes through a reusable buffer (payloads are zeros)."""
    while length > 0:
        chunk = min(length, len(scratch))
        _recv_into(sock, scratch[:chunk], deadline)
        length -= chunk


class _ZeroPool:
    """One shared, growing buffer of zeros; bytes are immutable, so threads can share slices."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buf = b""

    def get(self, length: int) -> memoryview:
        """A read-only view of ``length`` zero bytes."""
        buf = self._buf
        if len(buf) < length:
            with self._lock:
                if len(self._buf) < length:
                    self._buf = bytes(max(length, 2 * len(self._buf)))
                buf = self._buf
        return memoryview(buf)[:length]


def _send_message(sock: socket.socket, header: bytes, payload: memoryview) -> None:
    """Send header and payload, in one segment when small so latency is not doubled."""
    if len(payload) <= _CHUNK:
        sock.sendall(header + payload)
    else:
        sock.sendall(header)
        sock.sendall(payload)


# --------------------------------------------------------------------------------------------
# Server
# --------------------------------------------------------------------------------------------


def _serve_connection(
    conn: socket.socket, zeros: _ZeroPool, response_bytes: int | None, live: set[socket.socket]
) -> None:
    """Answer requests on one connection until the peer closes it or the server stops."""
    scratch = memoryview(bytearray(_CHUNK))
    header = memoryview(bytearray(REQUEST_HEADER.size))
    try:
        while True:
            try:
                _recv_into(conn, header, None)
            except PeerClosedError:
                return  # normal end of a persistent connection
            req_len, resp_len = REQUEST_HEADER.unpack(header)
            if response_bytes is not None:
                resp_len = response_bytes
            if req_len > MAX_MESSAGE_BYTES or resp_len > MAX_MESSAGE_BYTES:
                return  # protocol error: drop the connection
            _recv_discard(conn, req_len, scratch, None)
            _send_message(conn, RESPONSE_HEADER.pack(resp_len), zeros.get(resp_len))
    except OSError:
        return  # reset/shutdown: nothing useful to report per connection
    finally:
        live.discard(conn)
        conn.close()


def _bind_listener(host: str, port: int) -> socket.socket:
    """Bind a listening TCP socket for ``host`` (IPv4 or IPv6) with SO_REUSEADDR."""
    family, socktype, proto, _, addr = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    listener = socket.socket(family, socktype, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(addr)
        listener.listen(socket.SOMAXCONN)
    except OSError:
        listener.close()
        raise
    return listener


def run_server(host: str, port: int, response_bytes: int | None) -> int:
    """Serve until SIGTERM/SIGINT; returns the process exit status."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    # The wakeup fd makes select() return as soon as a signal arrives, so shutdown is immediate.
    wake_r, wake_w = socket.socketpair()
    wake_r.setblocking(False)
    wake_w.setblocking(False)
    signal.set_wakeup_fd(wake_w.fileno(), warn_on_full_buffer=False)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    try:
        listener = _bind_listener(host, port)
    except OSError as exc:
        print(f"loadgen server: cannot listen on {host}:{port}: {exc}", file=sys.stderr)
        return 1
    listener.setblocking(False)
    bound_port = listener.getsockname()[1]
    print(f"listening {host}:{bound_port}", flush=True)

    zeros = _ZeroPool()
    live: set[socket.socket] = set()
    threads: list[threading.Thread] = []
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    try:
        while not stop.is_set():
            for key, _ in sel.select():
                if key.fileobj is wake_r:
                    with contextlib.suppress(OSError):
                        wake_r.recv(4096)
                    continue
                try:
                    conn, _addr = listener.accept()
                except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                    continue
                except OSError as exc:  # e.g. EMFILE: keep serving existing connections
                    print(f"loadgen server: accept failed: {exc}", file=sys.stderr)
                    time.sleep(0.05)
                    continue
                conn.setblocking(True)
                _set_nodelay(conn)
                live.add(conn)
                thread = threading.Thread(
                    target=_serve_connection, args=(conn, zeros, response_bytes, live), daemon=True
                )
                thread.start()
                threads = [t for t in threads if t.is_alive()]
                threads.append(thread)
    finally:
        sel.close()
        listener.close()
        for conn in list(live):
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + 1.0
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        signal.set_wakeup_fd(-1)
        wake_r.close()
        wake_w.close()
    return 0


# --------------------------------------------------------------------------------------------
# Client
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientConfig:
    """Validated client parameters (see the module docstring for their meaning)."""

    host: str
    port: int
    rate: float
    duration: float
    warmup: float
    request_bytes: int
    response_bytes: int
    connections: int
    timeout: float
    arrivals: str = "uniform"
    seed: int = 1
    burst_on: float = 0.0
    burst_off: float = 0.0
    timeline_interval: float = 0.5
    raw_latencies: bool = False


@dataclass
class _WorkerStats:
    """Measurements of one connection worker; merged only after the worker has finished."""

    samples: list[tuple[float, float, int]] = field(default_factory=list)
    """``(completion time, latency s, bytes exchanged)`` of every measured success."""
    errors: Counter[str] = field(default_factory=Counter)
    last_completion: float | None = None


class RequestError(Exception):
    """A failed request, tagged with the ``error_kinds`` key it is counted under."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


def _connect(cfg: ClientConfig, deadline: float) -> socket.socket:
    """Open one connection before ``deadline``; failures become ``connect_*`` errors."""
    remaining = deadline - time.perf_counter()
    if remaining <= 0:
        raise RequestError("expired")
    try:
        sock = socket.create_connection((cfg.host, cfg.port), timeout=remaining)
    except ConnectionRefusedError as exc:
        raise RequestError("connect_refused") from exc
    except TimeoutError as exc:
        raise RequestError("connect_timeout") from exc
    except socket.gaierror as exc:
        raise RequestError("connect_resolve") from exc
    except OSError as exc:
        raise RequestError("connect_error") from exc
    try:
        _set_nodelay(sock)
    except OSError as exc:
        sock.close()
        raise RequestError("connect_error") from exc
    return sock


def _exchange(
    sock: socket.socket,
    request: bytes,
    deadline: float,
    header: memoryview,
    scratch: memoryview,
) -> int:
    """Send one request and read its full response before ``deadline``; returns its length."""
    try:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            raise TimeoutError("request deadline passed")
        sock.settimeout(remaining)
        sock.sendall(request)
        _recv_into(sock, header, deadline)
        (length,) = RESPONSE_HEADER.unpack(header)
        if length > MAX_MESSAGE_BYTES:
            raise RequestError("protocol")
        _recv_discard(sock, length, scratch, deadline)
        return int(length)
    except TimeoutError as exc:
        raise RequestError("timeout") from exc
    except PeerClosedError as exc:
        raise RequestError("closed") from exc
    except ConnectionResetError as exc:
        raise RequestError("reset") from exc
    except BrokenPipeError as exc:
        raise RequestError("broken_pipe") from exc
    except OSError as exc:
        raise RequestError("os_error") from exc


class _StartSignal:
    """Releases all workers at one common start time once their connections are set up."""

    def __init__(self) -> None:
        self._go = threading.Event()
        self.start = 0.0

    def release(self, start: float) -> None:
        self.start = start
        self._go.set()

    def wait(self) -> float:
        self._go.wait()
        return self.start


def _run_worker(
    index: int,
    cfg: ClientConfig,
    plan: ArrivalPlan,
    ready: threading.Event,
    go: _StartSignal,
    stats: _WorkerStats,
) -> None:
    """Drive one persistent connection through its round-robin share of the schedule."""
    request = REQUEST_HEADER.pack(cfg.request_bytes, cfg.response_bytes) + bytes(cfg.request_bytes)
    header = memoryview(bytearray(RESPONSE_HEADER.size))
    scratch = memoryview(bytearray(_CHUNK))
    sock: socket.socket | None = None
    # Pre-connect so the handshake is not charged to the first request; a failure here is not
    # counted (the first request retries and is counted if it fails too).
    try:
        sock = _connect(cfg, time.perf_counter() + cfg.timeout)
    except RequestError:
        sock = None
    ready.set()
    start = go.wait()
    try:
        for i in connection_requests(index, cfg.connections, plan.total):
            scheduled = start + plan.offsets[i]
            measured = i >= plan.warmup_requests
            deadline = scheduled + cfg.timeout
            now = time.perf_counter()
            if now < scheduled:
                time.sleep(scheduled - now)
            try:
                if time.perf_counter() >= deadline:
                    raise RequestError("expired")
                if sock is None:
                    sock = _connect(cfg, deadline)
                length = _exchange(sock, request, deadline, header, scratch)
            except RequestError as exc:
                kind = exc.kind
            except Exception as exc:  # a bug must not kill the worker: count it instead
                kind = f"internal_{type(exc).__name__}"
            else:
                done = time.perf_counter()
                if measured:
                    exchanged = len(request) + RESPONSE_HEADER.size + length
                    stats.samples.append((done, done - scheduled, exchanged))
                    stats.last_completion = done
                continue
            if measured:
                stats.errors[kind] += 1
            if sock is not None and kind != "expired":
                sock.close()  # the stream may be mid-message: start over on a fresh connection
                sock = None
    finally:
        if sock is not None:
            sock.close()


def run_client(cfg: ClientConfig) -> Summary:
    """Run the whole open-loop schedule and return the report."""
    plan = plan_arrivals(
        cfg.rate,
        cfg.duration,
        cfg.warmup,
        arrivals=cfg.arrivals,
        seed=cfg.seed,
        burst_on=cfg.burst_on,
        burst_off=cfg.burst_off,
    )
    go = _StartSignal()
    workers: list[tuple[threading.Thread, threading.Event, _WorkerStats]] = []
    for index in range(cfg.connections):
        ready = threading.Event()
        stats = _WorkerStats()
        thread = threading.Thread(
            target=_run_worker,
            args=(index, cfg, plan, ready, go, stats),
            name=f"loadgen-conn-{index}",
            daemon=True,
        )
        thread.start()
        workers.append((thread, ready, stats))
    for _, ready, _ in workers:
        ready.wait()
    wall_ref = time.time()  # the only wall-clock reading: it stamps window_start_unix
    perf_ref = time.perf_counter()
    start = perf_ref + _START_LEAD_S
    go.release(start)
    for thread, _, _ in workers:
        thread.join()

    samples: list[tuple[float, float, int]] = []
    errors: Counter[str] = Counter()
    completions: list[float] = []
    for _, _, stats in workers:
        samples.extend(stats.samples)
        errors.update(stats.errors)
        if stats.last_completion is not None:
            completions.append(stats.last_completion)
    samples.sort(key=lambda sample: sample[0])  # completion order across connections
    window_start = start + plan.window_offset
    span = measurement_span(cfg.duration, window_start, max(completions, default=None))
    timeline = build_timeline(
        ((done - window_start, size) for done, _, size in samples), cfg.timeline_interval, span
    )
    return build_summary(
        latencies_s=[latency for _, latency, _ in samples],
        error_kinds=errors,
        requests_scheduled=plan.measured_requests,
        rate_target=target_rate(cfg.rate, cfg.burst_on, cfg.burst_off),
        duration_s=span,
        window_start_unix=wall_ref + (window_start - perf_ref),
        timeline=timeline,
        raw_latencies=cfg.raw_latencies,
    )


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def _message_bytes(text: str) -> int:
    value = int(text)
    if not 0 <= value <= MAX_MESSAGE_BYTES:
        raise argparse.ArgumentTypeError(f"must be within [0, {MAX_MESSAGE_BYTES}], got {text!r}")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be within [0, 65535], got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The CLI: ``server`` and ``client`` subcommands."""
    parser = argparse.ArgumentParser(
        prog="python -m flowlane_bench.loadgen",
        description="Open-loop TCP request/response load generator.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    srv = sub.add_parser("server", help="answer requests (prints 'listening HOST:PORT' when ready)")
    srv.add_argument("--host", default="0.0.0.0", help="address to bind (default 0.0.0.0)")
    srv.add_argument("--port", type=_port, default=8000, help="port; 0 = any free port")
    srv.add_argument(
        "--response-bytes",
        type=_message_bytes,
        default=None,
        help="answer every request with N bytes, ignoring the requested length",
    )

    cli = sub.add_parser("client", help="send an open-loop request schedule, print JSON")
    cli.add_argument("--host", required=True)
    cli.add_argument("--port", type=_port, required=True)
    cli.add_argument("--rate", type=positive_float, required=True, help="requests per second")
    cli.add_argument("--duration", type=positive_float, required=True, help="measured seconds")
    cli.add_argument("--request-bytes", type=_message_bytes, required=True)
    cli.add_argument("--response-bytes", type=_message_bytes, required=True)
    cli.add_argument("--connections", type=positive_int, required=True)
    cli.add_argument(
        "--warmup", type=non_negative_float, default=0.0, help="uncounted seconds before"
    )
    cli.add_argument(
        "--timeout",
        type=positive_float,
        default=2.0,
        help="per-request deadline from its scheduled time, seconds (default 2)",
    )
    cli.add_argument("--output", type=Path, default=None, help="also write the JSON here")
    cli.add_argument(
        "--arrivals",
        choices=ARRIVALS,
        default="uniform",
        help="uniform spacing 1/rate (default) or poisson (exponential gaps, mean 1/rate)",
    )
    cli.add_argument(
        "--seed", type=int, default=1, help="random seed of poisson arrivals (default 1)"
    )
    cli.add_argument(
        "--burst-on",
        type=non_negative_float,
        default=0.0,
        help="seconds of each on-period (arrivals at --rate); needs --burst-off (default 0: none)",
    )
    cli.add_argument(
        "--burst-off",
        type=non_negative_float,
        default=0.0,
        help="seconds of each off-period (no arrivals); needs --burst-on (default 0: none)",
    )
    cli.add_argument(
        "--timeline-interval",
        type=positive_float,
        default=0.5,
        help="width of the timeline buckets, seconds (default 0.5)",
    )
    cli.add_argument(
        "--raw-latencies",
        action="store_true",
        help="also report every latency sample (latencies_ms, completion order)",
    )
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse and cross-check the arguments; invalid combinations exit with status 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "client" and (args.burst_on > 0) != (args.burst_off > 0):
        parser.error(
            "--burst-on and --burst-off go together: give both (> 0) for bursts, or neither"
        )
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (1 for a client run without any sample)."""
    args = parse_args(argv)
    if args.command == "server":
        return run_server(args.host, args.port, args.response_bytes)

    cfg = ClientConfig(
        host=args.host,
        port=args.port,
        rate=args.rate,
        duration=args.duration,
        warmup=args.warmup,
        request_bytes=args.request_bytes,
        response_bytes=args.response_bytes,
        connections=args.connections,
        timeout=args.timeout,
        arrivals=args.arrivals,
        seed=args.seed,
        burst_on=args.burst_on,
        burst_off=args.burst_off,
        timeline_interval=args.timeline_interval,
        raw_latencies=args.raw_latencies,
    )
    summary = run_client(cfg)
    text = json.dumps(summary)
    print(text, flush=True)
    status = 0 if summary["samples"] > 0 else 1
    output: Path | None = args.output
    if output is not None:
        try:
            output.write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            print(f"loadgen client: cannot write {output}: {exc}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
