"""Ring all-reduce traffic generator for flowlane Mininet scenarios (standard library only).

One process per worker, each inside its own Mininet host, so nothing outside the standard library
may be used::

    python -m flowlane_bench.allreduce --rank R --peers IP:PORT,IP:PORT,... --size BYTES \\
        --duration S \\
        [--compute-ms MS] [--max-iterations N] [--warmup-iterations K] \\
        [--connect-timeout S] [--start-delay S] [--output FILE]

It reproduces the *network pattern* of ring all-reduce (as in NCCL/Horovod data-parallel
training), not the arithmetic: payloads are zeros and nothing is reduced.

Ring and set-up
---------------

``--peers`` lists the ``N >= 2`` workers in ring order (IPv6 as ``[addr]:port``); every worker
must get the same list, and ``--rank`` says which entry it is. Worker ``R`` listens on the port
of ``peers[R]`` (bound to ``0.0.0.0``, or ``::`` for an IPv6 entry), connects to its right
neighbour ``peers[(R + 1) % N]`` and accepts exactly one connection, from its left neighbour
``peers[(R - 1) % N]``. Data only ever flows left to right: a worker sends on the connection it
opened and receives on the one it accepted (with ``N = 2`` the two neighbours are the same
worker, over two distinct connections). Socket buffers keep the kernel defaults (autotuning).

1. Connect to the right neighbour, retrying (back-off 50 ms to 0.5 s) until it listens.
2. Send a HELLO on that connection, accept the left neighbour's connection and check its HELLO:
   it must come from the left rank and agree on the worker count, ``--size`` and
   ``--warmup-iterations`` (a mismatch is a protocol error, reported at once).
3. Start token: rank 0 sends START to its right once both its connections are up; every other
   worker waits for START from its left, then forwards it to its right. The token therefore
   passes a worker only when that worker and all lower ranks are connected, and when it is back
   at rank 0 the whole ring is up. Each worker starts its clock when it has forwarded the token
   (rank 0: when the token returns); the residual skew between workers is absorbed by the
   warm-up iterations.

Connecting (1), accepting (2) and waiting for the token (3) are each bounded by
``--connect-timeout``; when one expires the worker exits with status 1 and a message naming the
neighbour it waited for.

Wire protocol
-------------

Every message is a 12-byte header ``struct "!IHHI"`` (network order) = (iteration, step, flags,
payload length), followed by that many payload bytes. Flags: ``STOP = 1``, ``START = 2``,
``HELLO = 4``.

* HELLO: ``(0, 0, HELLO, 20)`` + ``struct "!IIIQ"`` = (sender rank, workers, warm-up
  iterations, size bytes).
* START: ``(0, 0, START, 0)``.
* Data: ``(iteration, step, 0 or STOP, chunk)`` + ``chunk`` zero bytes. ``iteration`` counts
  from 0 and includes the warm-up iterations; ``step`` is within ``[0, 2 * (N - 1))``.

Every received header is checked against what the receiver expects next (same iteration, same
step, length == chunk, no unknown flag, the STOP flag where the stop rule below puts it); any
deviation, a neighbour closing its connection, or a socket error ends the worker with status 1
and one ``allreduce rank R: ...`` line on stderr. The neighbours of a failed worker then see
their connections close and fail as well, so a failure takes the whole ring down promptly
instead of leaving workers blocked. (A neighbour that stalls without closing, e.g. SIGSTOP,
stalls the ring: the harness stops workers by PID.)

Iteration model
---------------

``chunk = ceil(size / N)``. An iteration is an optional ``--compute-ms`` sleep (emulated forward
and backward pass) followed by ``2 * (N - 1)`` steps: ``N - 1`` reduce-scatter steps, then
``N - 1`` all-gather steps. In every step a worker sends one chunk to its right neighbour while
it receives one chunk from its left neighbour (single thread, non-blocking sockets and a
selector), and it moves on only when its message is fully handed to the kernel *and* the inbound
message has fully arrived. A worker therefore sends ``size * (N - 1) / N`` bytes (rounded up to
whole chunks) per phase and ``2 * (N - 1) * chunk`` payload bytes per iteration.

Stop protocol (why every worker stops after the same iteration, and nothing deadlocks)
-------------------------------------------------------------------------------------

Only rank 0 decides. At the start of each measured iteration it declares that iteration the last
one when ``--max-iterations`` measured iterations will then be reached, or when
``elapsed + mean iteration time so far >= --duration`` (elapsed and mean over the measured
iterations; never in a warm-up iteration, and never before the first measured iteration unless
``--max-iterations`` is 1). It sets STOP in its step-0 message; every worker copies STOP into
every message it sends after learning it. Rank ``k >= 1`` receives rank ``k - 1``'s step
``k - 1`` message, so it learns the decision at step ``k - 1`` and flags its messages from step
``k`` on; conversely, a message from rank ``L`` carries STOP exactly from step ``L`` on (rank
``N - 1`` learns at step ``N - 2 < 2 * (N - 1)``, so everyone learns within the iteration, and
rank 0's own decision comes back to it at step ``N - 1``). Receivers check exactly this.

* Same last iteration: a worker only leaves an iteration after receiving all of its messages.
  If rank 0 stopped, one of those carried STOP and the worker stops too; if none did, rank 0 did
  not stop and continues as well. So all workers run the same iterations, send every message
  of the last one and read every message of it, and no one waits for a message that is never
  sent (nor leaves an unread one behind: connections close cleanly, without a reset).
* Progress: take a worker at the earliest (iteration, step) of the ring. Its right neighbour is
  at the same position (then it is reading this worker's message) or later (then it has read
  it), so the send completes; its left neighbour is at the same position (sending) or later (its
  message is already sent), so the receive completes. The earliest worker always progresses;
  hence the ring never deadlocks, and sends and receives of one step never wait on each other
  because both are serviced by the same selector loop.

Measurement model
-----------------

Clocks: ``time.perf_counter`` for every duration; ``time.time`` only for ``window_start_unix``,
so runs can be lined up with other tools. A worker's iterations are back to back: the first
begins when its clock starts (after the start token), each next one when the previous one ends,
so ``iteration_ms`` includes the compute sleep and the time spent waiting for slower workers,
and the iteration times add up to ``elapsed_s``. The first ``--warmup-iterations`` iterations
(default 1) run normally but are not reported; the measured window begins when they end.

Output: one JSON object on stdout (and in ``--output`` if given)::

    {"rank": int, "workers": int, "size_bytes": int, "chunk_bytes": int,
     "iterations": int, "warmup_iterations": int,
     "iteration_ms": [float, ...], "iteration_ms_mean": float, "iteration_ms_p99": float,
     "bytes_sent": int, "elapsed_s": float, "goodput_bps": float,
     "window_start_unix": float, "timeline": [[end_offset_s, bytes], ...]}

``iterations`` and every list cover the measured iterations only; ``bytes_sent`` counts payload
bytes this worker sent in them (``iterations * 2 * (N - 1) * chunk_bytes``);
``elapsed_s`` is the measured window (start to end of the last iteration);
``goodput_bps = bytes_sent * 8 / elapsed_s``; ``timeline`` holds, per measured iteration, its
end as an offset from the window start and the payload bytes sent in it. ``iteration_ms_p99`` is
a nearest-rank percentile (``flowlane_bench.suite.stats.percentile``).

stderr: ``allreduce rank R: listening on HOST:PORT`` once bound, ``allreduce rank R: ring up``
when the clock starts, and error messages. Exit status: 0 on success, 1 on any failure (set-up
timeout, protocol error, neighbour gone, unwritable ``--output``), 2 for bad arguments,
``128 + signal`` (130, 143) on SIGINT/SIGTERM, after closing every socket; no JSON is printed
unless the run completed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import selectors
import signal
import socket
import struct
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import NamedTuple, TypedDict

from flowlane_bench.arguments import (
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
)
from flowlane_bench.suite.stats import percentile

HEADER = struct.Struct("!IHHI")
"""Message header: iteration, step, flags, payload length (network order)."""
HELLO = struct.Struct("!IIIQ")
"""HELLO payload: sender rank, workers, warm-up iterations, size bytes."""
FLAG_STOP = 0x1
FLAG_START = 0x2
FLAG_HELLO = 0x4
MAX_WORKERS = 1024
"""Upper bound for N; the step field (16 bits) would allow up to 32768."""
MAX_CHUNK_BYTES = 2**32 - 1
"""The payload length field is 32 bits wide."""
IO_BLOCK = 1024 * 1024
"""Largest single send/receive buffer; bigger chunks go through it in pieces."""
_RETRY_MIN_S = 0.05
_RETRY_MAX_S = 0.5


# --------------------------------------------------------------------------------------------
# Pure helpers (unit-tested)
# --------------------------------------------------------------------------------------------


class Peer(NamedTuple):
    """One ring member as given in ``--peers``."""

    host: str
    port: int


class Header(NamedTuple):
    """A decoded message header."""

    iteration: int
    step: int
    flags: int
    length: int

    def pack(self) -> bytes:
        return HEADER.pack(self.iteration, self.step, self.flags, self.length)

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview) -> Header:
        return cls(*HEADER.unpack(data))


class Hello(NamedTuple):
    """The HELLO payload: who connected and the ring parameters it was started with."""

    rank: int
    workers: int
    warmup_iterations: int
    size_bytes: int

    def pack(self) -> bytes:
        return HELLO.pack(self.rank, self.workers, self.warmup_iterations, self.size_bytes)

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview) -> Hello:
        return cls(*HELLO.unpack(data))


class ProtocolError(Exception):
    """A neighbour sent something this protocol does not allow at this point."""


class Summary(TypedDict):
    """The JSON report; the key set is a contract with the harness that parses it."""

    rank: int
    workers: int
    size_bytes: int
    chunk_bytes: int
    iterations: int
    warmup_iterations: int
    iteration_ms: list[float]
    iteration_ms_mean: float | None
    iteration_ms_p99: float | None
    bytes_sent: int
    elapsed_s: float
    goodput_bps: float
    window_start_unix: float
    timeline: list[list[float]]


def parse_peer(text: str) -> Peer:
    """``IP:PORT`` or ``[IPv6]:PORT``; the port must be within [1, 65535]."""
    text = text.strip()
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ValueError(f"bad peer {text!r}: expected [ADDR]:PORT")
        port_text = rest[1:]
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep or ":" in host:
            raise ValueError(f"bad peer {text!r}: expected IP:PORT (IPv6 as [ADDR]:PORT)")
    if not host:
        raise ValueError(f"bad peer {text!r}: empty host")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"bad peer {text!r}: port is not a number") from None
    if not 1 <= port <= 65535:
        raise ValueError(f"bad peer {text!r}: port must be within [1, 65535]")
    return Peer(host, port)


def parse_peers(text: str) -> tuple[Peer, ...]:
    """The comma-separated ring: at least 2, at most ``MAX_WORKERS`` distinct entries."""
    peers = tuple(parse_peer(item) for item in text.split(",") if item.strip())
    if not 2 <= len(peers) <= MAX_WORKERS:
        raise ValueError(f"need between 2 and {MAX_WORKERS} peers, got {len(peers)}")
    if len(set(peers)) != len(peers):
        raise ValueError("peers must be distinct IP:PORT pairs")
    return peers


def ring_neighbours(rank: int, workers: int) -> tuple[int, int]:
    """(left, right) ranks of ``rank``: it receives from the left and sends to the right."""
    if workers < 2 or not 0 <= rank < workers:
        raise ValueError("need workers >= 2 and 0 <= rank < workers")
    return (rank - 1) % workers, (rank + 1) % workers


def chunk_bytes(size: int, workers: int) -> int:
    """Bytes per step: ``ceil(size / workers)``."""
    if size <= 0 or workers < 2:
        raise ValueError("need size > 0 and workers >= 2")
    return -(-size // workers)


def steps_per_iteration(workers: int) -> int:
    """``N - 1`` reduce-scatter plus ``N - 1`` all-gather steps."""
    return 2 * (workers - 1)


def bytes_per_iteration(chunk: int, workers: int) -> int:
    """Payload bytes one worker sends (and receives) per iteration."""
    return steps_per_iteration(workers) * chunk


def should_stop(
    *,
    measured_done: int,
    elapsed_s: float,
    mean_iteration_s: float | None,
    duration_s: float,
    max_iterations: int | None,
) -> bool:
    """Rank 0's decision, at the start of a measured iteration: is this one the last?

    ``measured_done`` measured iterations are complete, ``elapsed_s`` is the time since the
    measured window began and ``mean_iteration_s`` their mean (None when there is none yet).
    """
    if max_iterations is not None and measured_done + 1 >= max_iterations:
        return True
    if mean_iteration_s is None:
        return False
    return elapsed_s + mean_iteration_s >= duration_s


def check_data_header(
    header: Header,
    *,
    iteration: int,
    step: int,
    chunk: int,
    left: int,
    is_rank0: bool,
    stop: bool,
) -> bool:
    """Validate a data header from the left neighbour (rank ``left``); return the STOP state.

    ``stop`` is what the receiver knows so far in this iteration (rank 0: its own decision). A
    message from rank ``L`` carries STOP exactly from step ``L`` on in the last iteration and
    never otherwise; at step ``L`` the flag is news to every receiver but rank 0.
    """
    if (header.iteration, header.step) != (iteration, step):
        raise ProtocolError(
            f"expected iteration {iteration} step {step}, "
            f"got iteration {header.iteration} step {header.step}"
        )
    if header.length != chunk:
        raise ProtocolError(
            f"iteration {iteration} step {step}: payload length {header.length}, expected {chunk}"
        )
    if header.flags & ~FLAG_STOP:
        raise ProtocolError(
            f"iteration {iteration} step {step}: unexpected flags {header.flags:#x} "
            "in a data message"
        )
    carried = bool(header.flags & FLAG_STOP)
    if step == left and not is_rank0:
        return carried
    expected = stop and step >= left
    if carried != expected:
        state = "set" if carried else "missing"
        raise ProtocolError(
            f"iteration {iteration} step {step}: STOP flag {state} (rank {left} must flag "
            f"every message from step {left} on in the last iteration, and no other)"
        )
    return stop


def check_hello(hello: Hello, expected: Hello) -> None:
    """The left neighbour must have the expected rank and the same ring parameters."""
    for name in Hello._fields:
        got, want = getattr(hello, name), getattr(expected, name)
        if got != want:
            raise ProtocolError(f"HELLO from the left neighbour: {name} is {got}, expected {want}")


def build_summary(
    *,
    rank: int,
    workers: int,
    size_bytes: int,
    warmup_iterations: int,
    iteration_ends_s: Sequence[float],
    window_start_unix: float,
) -> Summary:
    """Assemble the report from the end offsets (seconds from the window start, ascending)."""
    chunk = chunk_bytes(size_bytes, workers)
    per_iteration = bytes_per_iteration(chunk, workers)
    durations_ms: list[float] = []
    previous = 0.0
    for end in iteration_ends_s:
        durations_ms.append((end - previous) * 1000.0)
        previous = end
    iterations = len(durations_ms)
    elapsed = iteration_ends_s[-1] if iteration_ends_s else 0.0
    bytes_sent = iterations * per_iteration
    mean = round(math.fsum(durations_ms) / iterations, 4) if iterations else None
    p99 = round(percentile(sorted(durations_ms), 99.0), 4) if iterations else None
    return Summary(
        rank=rank,
        workers=workers,
        size_bytes=size_bytes,
        chunk_bytes=chunk,
        iterations=iterations,
        warmup_iterations=warmup_iterations,
        iteration_ms=[round(ms, 4) for ms in durations_ms],
        iteration_ms_mean=mean,
        iteration_ms_p99=p99,
        bytes_sent=bytes_sent,
        elapsed_s=round(elapsed, 6),
        goodput_bps=round(bytes_sent * 8 / elapsed, 3) if elapsed > 0 else 0.0,
        window_start_unix=round(window_start_unix, 6),
        timeline=[[round(end, 6), per_iteration] for end in iteration_ends_s],
    )


# --------------------------------------------------------------------------------------------
# Set-up: listen, connect, accept, HELLO, start token (blocking sockets with deadlines)
# --------------------------------------------------------------------------------------------


class RingError(Exception):
    """A failure with a message fit for the operator (set-up timeout, neighbour gone, ...)."""


class PeerClosedError(ConnectionError):
    """The neighbour closed the connection in the middle of (or instead of) a message."""


@dataclass(frozen=True)
class Config:
    """Validated parameters (see the module docstring for their meaning)."""

    rank: int
    peers: tuple[Peer, ...]
    size: int
    duration: float
    compute_s: float
    max_iterations: int | None
    warmup_iterations: int
    connect_timeout: float

    @property
    def workers(self) -> int:
        return len(self.peers)


def _remaining(deadline: float) -> float:
    remaining = deadline - time.perf_counter()
    if remaining <= 0:
        raise TimeoutError("deadline passed")
    return remaining


def _recv_exact(sock: socket.socket, size: int, deadline: float) -> bytes:
    """Read exactly ``size`` bytes before ``deadline`` (blocking socket)."""
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        sock.settimeout(_remaining(deadline))
        n = sock.recv_into(view[got:])
        if n == 0:
            raise PeerClosedError("connection closed by peer")
        got += n
    return bytes(buf)


def _send_exact(sock: socket.socket, data: bytes, deadline: float) -> None:
    sock.settimeout(_remaining(deadline))
    sock.sendall(data)


def _listen(peer: Peer) -> socket.socket:
    """Listen on ``peer``'s port on all addresses of its family, with SO_REUSEADDR."""
    ipv6 = ":" in peer.host
    listener = socket.socket(socket.AF_INET6 if ipv6 else socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("::" if ipv6 else "0.0.0.0", peer.port))
        listener.listen(socket.SOMAXCONN)
    except OSError:
        listener.close()
        raise
    return listener


def _connect_right(peer: Peer, right: int, timeout: float) -> socket.socket:
    """Connect to the right neighbour, retrying with back-off until ``timeout`` expires."""
    deadline = time.perf_counter() + timeout
    delay = _RETRY_MIN_S
    last_error: OSError | None = None
    while True:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            raise RingError(
                f"cannot connect to right neighbour rank {right} at {peer.host}:{peer.port} "
                f"within --connect-timeout {timeout:g} s (last error: {last_error})"
            )
        try:
            return socket.create_connection((peer.host, peer.port), timeout=min(remaining, 2.0))
        except OSError as exc:  # refused, unreachable, not resolvable yet: all worth a retry
            last_error = exc
        time.sleep(max(0.0, min(delay, deadline - time.perf_counter())))
        delay = min(delay * 2, _RETRY_MAX_S)


def _accept_left(
    listener: socket.socket, left: Peer, left_rank: int, timeout: float
) -> socket.socket:
    listener.settimeout(timeout)
    try:
        conn, _addr = listener.accept()
    except TimeoutError:
        raise RingError(
            f"left neighbour rank {left_rank} ({left.host}:{left.port}) did not connect "
            f"within --connect-timeout {timeout:g} s"
        ) from None
    return conn


def _read_message(sock: socket.socket, deadline: float) -> tuple[Header, bytes]:
    header = Header.unpack(_recv_exact(sock, HEADER.size, deadline))
    if header.length > HELLO.size:
        raise ProtocolError(f"set-up message with payload length {header.length}")
    return header, _recv_exact(sock, header.length, deadline)


def _read_hello(sock: socket.socket, expected: Hello, timeout: float) -> None:
    header, payload = _read_message(sock, time.perf_counter() + timeout)
    if header != Header(0, 0, FLAG_HELLO, HELLO.size):
        raise ProtocolError(f"expected HELLO from the left neighbour, got {header}")
    check_hello(Hello.unpack(payload), expected)


def _pass_start_token(cfg: Config, right_sock: socket.socket, left_sock: socket.socket) -> None:
    """Rank 0 sends START and waits for it to come back; the others wait for it and forward it."""
    token = Header(0, 0, FLAG_START, 0)
    deadline = time.perf_counter() + cfg.connect_timeout
    if cfg.rank == 0:
        _send_exact(right_sock, token.pack(), deadline)
    try:
        header, _ = _read_message(left_sock, deadline)
    except TimeoutError:
        raise RingError(
            f"the start token did not arrive within --connect-timeout {cfg.connect_timeout:g} s "
            "(a worker of the ring is not connected)"
        ) from None
    if header != token:
        raise ProtocolError(f"expected the START token from the left neighbour, got {header}")
    if cfg.rank != 0:
        _send_exact(right_sock, token.pack(), deadline)


# --------------------------------------------------------------------------------------------
# Data phase: one message out and one in per step, through a selector
# --------------------------------------------------------------------------------------------


class _Outbound:
    """The message being sent: a header plus ``chunk`` zeros, sent from one reusable buffer."""

    def __init__(self, chunk: int) -> None:
        self._chunk = chunk
        self._buf = bytearray(HEADER.size + min(chunk, IO_BLOCK))  # zeros after the header
        self._view = memoryview(self._buf)
        self._total = 0
        self._sent = 0

    def start(self, iteration: int, step: int, flags: int) -> None:
        HEADER.pack_into(self._buf, 0, iteration, step, flags, self._chunk)
        self._total = HEADER.size + self._chunk
        self._sent = 0

    @property
    def done(self) -> bool:
        return self._sent >= self._total

    def pump(self, sock: socket.socket) -> None:
        """Send until done or the socket would block."""
        size = len(self._buf)
        while self._sent < self._total:
            if self._sent < size:
                view = self._view[self._sent : min(size, self._total)]
            else:  # past the header: any zeros will do
                view = self._view[HEADER.size : HEADER.size + min(self._total - self._sent, size)]
            try:
                self._sent += sock.send(view)
            except (BlockingIOError, InterruptedError):
                return


class _Inbound:
    """The message being received: header first (validated), then exactly ``chunk`` bytes."""

    def __init__(self, chunk: int, left: int, is_rank0: bool) -> None:
        self._chunk = chunk
        self._left = left
        self._is_rank0 = is_rank0
        self._header = bytearray(HEADER.size)
        self._header_view = memoryview(self._header)
        self._scratch = memoryview(bytearray(min(chunk, IO_BLOCK)))
        self._header_got = 0
        self._payload_left = 0
        self._done = True
        self._iteration = 0
        self._step = 0
        self.stop = False

    def expect(self, iteration: int, step: int, stop: bool) -> None:
        self._iteration, self._step, self.stop = iteration, step, stop
        self._header_got = 0
        self._payload_left = 0
        self._done = False

    @property
    def done(self) -> bool:
        return self._done

    def pump(self, sock: socket.socket) -> None:
        """Receive until the message is complete or the socket would block; never reads beyond."""
        while not self._done:
            try:
                if self._header_got < HEADER.size:
                    n = sock.recv_into(self._header_view[self._header_got :])
                else:
                    n = sock.recv_into(self._scratch[: min(self._payload_left, len(self._scratch))])
            except (BlockingIOError, InterruptedError):
                return
            if n == 0:
                raise PeerClosedError("connection closed")
            if self._header_got < HEADER.size:
                self._header_got += n
                if self._header_got == HEADER.size:
                    self.stop = check_data_header(
                        Header.unpack(self._header),
                        iteration=self._iteration,
                        step=self._step,
                        chunk=self._chunk,
                        left=self._left,
                        is_rank0=self._is_rank0,
                        stop=self.stop,
                    )
                    self._payload_left = self._chunk
            else:
                self._payload_left -= n
            self._done = self._header_got == HEADER.size and self._payload_left == 0


@dataclass
class _Ring:
    """The two connections of a running worker and the selector that services them."""

    right: socket.socket
    left: socket.socket
    right_rank: int
    left_rank: int
    sel: selectors.BaseSelector


def _exchange(ring: _Ring, out: _Outbound, inb: _Inbound, where: str) -> None:
    """Finish one step: ``out`` fully handed to the kernel and ``inb`` fully received."""

    def pump_out() -> None:
        try:
            out.pump(ring.right)
        except OSError as exc:
            raise RingError(
                f"sending to right neighbour rank {ring.right_rank} failed at {where}: {exc}"
            ) from None

    def pump_in() -> None:
        try:
            inb.pump(ring.left)
        except PeerClosedError:
            raise RingError(
                f"left neighbour rank {ring.left_rank} closed the connection at {where}"
            ) from None
        except ProtocolError as exc:
            raise RingError(
                f"protocol error from left neighbour rank {ring.left_rank}: {exc}"
            ) from None
        except OSError as exc:
            raise RingError(
                f"receiving from left neighbour rank {ring.left_rank} failed at {where}: {exc}"
            ) from None

    pump_out()
    pump_in()
    registered: list[socket.socket] = []
    try:
        if not out.done:
            ring.sel.register(ring.right, selectors.EVENT_WRITE)
            registered.append(ring.right)
        if not inb.done:
            ring.sel.register(ring.left, selectors.EVENT_READ)
            registered.append(ring.left)
        while registered:
            for key, _ in ring.sel.select():
                if key.fileobj is ring.right:
                    pump_out()
                    if out.done:
                        ring.sel.unregister(ring.right)
                        registered.remove(ring.right)
                else:
                    pump_in()
                    if inb.done:
                        ring.sel.unregister(ring.left)
                        registered.remove(ring.left)
    finally:
        for sock in registered:
            ring.sel.unregister(sock)


def _run_iterations(cfg: Config, ring: _Ring) -> tuple[list[float], float]:
    """Iterate until rank 0's STOP; returns the measured end offsets and the window's wall time."""
    workers = cfg.workers
    chunk = chunk_bytes(cfg.size, workers)
    steps = steps_per_iteration(workers)
    out = _Outbound(chunk)
    inb = _Inbound(chunk, ring.left_rank, cfg.rank == 0)
    ends: list[float] = []
    window_start = time.perf_counter()
    window_start_unix = time.time()
    iteration = 0
    while True:
        warmup = iteration < cfg.warmup_iterations
        stop = False
        if cfg.rank == 0 and not warmup:
            stop = should_stop(
                measured_done=len(ends),
                elapsed_s=time.perf_counter() - window_start,
                mean_iteration_s=ends[-1] / len(ends) if ends else None,
                duration_s=cfg.duration,
                max_iterations=cfg.max_iterations,
            )
        if cfg.compute_s > 0:
            time.sleep(cfg.compute_s)
        for step in range(steps):
            out.start(iteration, step, FLAG_STOP if stop else 0)
            inb.expect(iteration, step, stop)
            _exchange(ring, out, inb, f"iteration {iteration} step {step}")
            stop = inb.stop
        now = time.perf_counter()
        if warmup:
            if stop:
                raise RingError(f"STOP received in warm-up iteration {iteration}")
            if iteration == cfg.warmup_iterations - 1:
                window_start = now
                window_start_unix = time.time()
        else:
            ends.append(now - window_start)
        iteration += 1
        if stop:
            return ends, window_start_unix


def run(cfg: Config) -> Summary:
    """Set up the ring, run it to rank 0's STOP and return the report."""
    left_rank, right_rank = ring_neighbours(cfg.rank, cfg.workers)
    me = cfg.peers[cfg.rank]
    prefix = f"allreduce rank {cfg.rank}"
    with contextlib.ExitStack() as stack:
        try:
            listener = stack.enter_context(_listen(me))
        except OSError as exc:
            raise RingError(f"cannot listen on port {me.port}: {exc}") from None
        host = "::" if ":" in me.host else "0.0.0.0"
        print(f"{prefix}: listening on {host}:{me.port}", file=sys.stderr, flush=True)
        right_sock = stack.enter_context(
            _connect_right(cfg.peers[right_rank], right_rank, cfg.connect_timeout)
        )
        hello = Hello(cfg.rank, cfg.workers, cfg.warmup_iterations, cfg.size)
        expected = hello._replace(rank=left_rank)
        try:
            _send_exact(
                right_sock,
                Header(0, 0, FLAG_HELLO, HELLO.size).pack() + hello.pack(),
                time.perf_counter() + cfg.connect_timeout,
            )
            left_sock = stack.enter_context(
                _accept_left(listener, cfg.peers[left_rank], left_rank, cfg.connect_timeout)
            )
            listener.close()
            _read_hello(left_sock, expected, cfg.connect_timeout)
            _pass_start_token(cfg, right_sock, left_sock)
        except ProtocolError as exc:
            raise RingError(f"protocol error during set-up: {exc}") from None
        except TimeoutError:
            raise RingError(
                f"set-up timed out after --connect-timeout {cfg.connect_timeout:g} s"
            ) from None
        except PeerClosedError:
            raise RingError("a neighbour closed its connection during set-up") from None
        except OSError as exc:
            raise RingError(f"set-up failed: {exc}") from None
        print(f"{prefix}: ring up", file=sys.stderr, flush=True)
        right_sock.setblocking(False)
        left_sock.setblocking(False)
        sel = stack.enter_context(selectors.DefaultSelector())
        ring = _Ring(right_sock, left_sock, right_rank, left_rank, sel)
        ends, window_start_unix = _run_iterations(cfg, ring)
    return build_summary(
        rank=cfg.rank,
        workers=cfg.workers,
        size_bytes=cfg.size,
        warmup_iterations=cfg.warmup_iterations,
        iteration_ends_s=ends,
        window_start_unix=window_start_unix,
    )


# --------------------------------------------------------------------------------------------
# Signals and CLI
# --------------------------------------------------------------------------------------------


class Interrupted(BaseException):
    """Raised by the signal handler; a BaseException so no ``except Exception`` swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _install_signal_handlers() -> None:
    """SIGTERM/SIGINT interrupt whatever blocks (select, accept, sleep) by raising once."""
    raised = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal raised
        if raised:
            return  # already unwinding: let the clean-up finish
        raised = True
        raise Interrupted(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def _peers(text: str) -> tuple[Peer, ...]:
    try:
        return parse_peers(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m flowlane_bench.allreduce",
        description="Ring all-reduce traffic generator (one worker).",
    )
    parser.add_argument("--rank", type=non_negative_int, required=True, help="index in --peers")
    parser.add_argument(
        "--peers", type=_peers, required=True, help="IP:PORT,IP:PORT,... in ring order"
    )
    parser.add_argument("--size", type=positive_int, required=True, help="bytes to all-reduce")
    parser.add_argument(
        "--duration", type=positive_float, required=True, help="measured seconds (rank 0)"
    )
    parser.add_argument(
        "--compute-ms", type=non_negative_float, default=0.0, help="sleep per iteration"
    )
    parser.add_argument(
        "--max-iterations", type=positive_int, default=None, help="measured iterations (rank 0)"
    )
    parser.add_argument(
        "--warmup-iterations", type=non_negative_int, default=1, help="unreported (default 1)"
    )
    parser.add_argument(
        "--connect-timeout",
        type=positive_float,
        default=10.0,
        help="bound for connecting, accepting and the start token, seconds (default 10)",
    )
    parser.add_argument(
        "--start-delay",
        type=non_negative_float,
        default=0.0,
        help="seconds to wait before listening (a job that starts after the others)",
    )
    parser.add_argument("--output", type=Path, default=None, help="also write the JSON here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (see the module docstring)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    peers: tuple[Peer, ...] = args.peers
    if args.rank >= len(peers):
        parser.error(f"--rank {args.rank} is not an index of the {len(peers)} peers")
    if chunk_bytes(args.size, len(peers)) > MAX_CHUNK_BYTES:
        parser.error(f"--size too large: a chunk must fit in {MAX_CHUNK_BYTES} bytes")
    cfg = Config(
        rank=args.rank,
        peers=peers,
        size=args.size,
        duration=args.duration,
        compute_s=args.compute_ms / 1000.0,
        max_iterations=args.max_iterations,
        warmup_iterations=args.warmup_iterations,
        connect_timeout=args.connect_timeout,
    )
    prefix = f"allreduce rank {cfg.rank}"
    _install_signal_handlers()
    try:
        time.sleep(args.start_delay)
        text = json.dumps(run(cfg))
        print(text, flush=True)
        output: Path | None = args.output
        if output is not None:
            try:
                output.write_text(text + "\n", encoding="utf-8")
            except OSError as exc:
                print(f"{prefix}: cannot write {output}: {exc}", file=sys.stderr)
                return 1
    except RingError as exc:
        print(f"{prefix}: {exc}", file=sys.stderr, flush=True)
        return 1
    except Interrupted as exc:
        name = signal.Signals(exc.signum).name
        print(f"{prefix}: stopped by {name}", file=sys.stderr, flush=True)
        return 128 + exc.signum
    return 0


if __name__ == "__main__":
    sys.exit(main())
