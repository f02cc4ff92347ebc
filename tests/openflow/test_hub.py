"""The OpenFlow hub against switches played by the test over real loopback sockets.

Each peer here is a blocking socket driven by the test's own thread, so the
thread count the hub adds can be measured; the handler records every callback
in a queue the test waits on (no sleeps: each wait ends at the event, or
fails after a few seconds).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import socket
import ssl
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from os_ken.ofproto import ofproto_v1_3_parser as parser

from controller.auth.certs import (
    Authority,
    dpid_binding_error,
    issue,
    new_authority,
    switch_name,
)
from controller.openflow import framing, hub_connection
from controller.openflow.framing import Framer, FramingError
from controller.openflow.hub import Connection, Hub
from controller.openflow.osken_internals import CodecDatapath, encode
from controller.openflow.tls import OfpTls, server_context

DPID = 0x00000000000000A1
WAIT_S = 5.0
BARRIER_REQUEST, BARRIER_REPLY, PACKET_IN, PACKET_OUT = 20, 21, 10, 13


# ---- the handler ------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    kind: str  # connected, received, disconnected
    conn: Connection
    data: bytes = b""


class Recorder:
    """A ``HubHandler`` that records each callback and the thread it ran on."""

    def __init__(self) -> None:
        self.events: queue.Queue[Event] = queue.Queue()
        self.seen: list[Event] = []
        self.threads: set[str] = set()

    def connected(self, conn: Connection) -> None:
        self._record(Event("connected", conn))

    def received(self, conn: Connection, data: bytes) -> None:
        self._record(Event("received", conn, data))

    def disconnected(self, conn: Connection) -> None:
        self._record(Event("disconnected", conn))

    def _record(self, event: Event) -> None:
        self.threads.add(threading.current_thread().name)
        self.seen.append(event)
        self.events.put(event)

    def next(self, kind: str | None = None, timeout_s: float = WAIT_S) -> Event:
        event = self.events.get(timeout=timeout_s)
        if kind is not None:
            assert event.kind == kind, f"expected {kind}, got {event}"
        return event

    def quiet(self, timeout_s: float = 0.2) -> bool:
        """Whether no callback comes within ``timeout_s`` (for what must not happen)."""
        try:
            event = self.events.get(timeout=timeout_s)
        except queue.Empty:
            return True
        self.events.put(event)
        return False

    def count(self, kind: str, conn: Connection) -> int:
        return sum(1 for e in self.seen if e.kind == kind and e.conn is conn)


# ---- a switch played by the test -----------------------------------------------------------


class Peer:
    """A switch over a blocking socket: says HELLO, answers FEATURES_REQUEST with ``dpid``."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.framer = Framer()
        self.inbox: list[bytes] = []

    @classmethod
    def connect(cls, port: int, context: ssl.SSLContext | None = None) -> Peer:
        sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
        if context is not None:
            sock = context.wrap_socket(sock)
        return cls(sock)

    def send(self, kind: int, xid: int = 0, body: bytes = b"", version: int = 4) -> None:
        self.sock.sendall(framing.message(kind, xid, body, version))

    def recv(self) -> tuple[int, int, int, bytes]:
        """(version, type, xid, whole message) of the next message; EOFError at hang-up."""
        while not self.inbox:
            data = self.sock.recv(1 << 16)
            if not data:
                raise EOFError("the controller hung up")
            self.inbox += self.framer.feed(data)
        message = self.inbox.pop(0)
        version, kind, _, xid = framing.header(message)
        return version, kind, xid, message

    def expect(self, kind: int) -> tuple[int, bytes]:
        """(xid, message) of the next message, which must be of ``kind``."""
        _, got, xid, message = self.recv()
        assert got == kind, f"expected type {kind}, got {got}"
        return xid, message

    def handshake(self, dpid: int = DPID, n_tables: int = 254) -> None:
        self.send(framing.HELLO)
        self.expect(framing.HELLO)
        xid, _ = self.expect(framing.FEATURES_REQUEST)
        body = framing.FEATURES.pack(dpid, 0, n_tables, 0, 0, 0)
        self.send(framing.FEATURES_REPLY, xid, body)

    def hung_up(self) -> bool:
        """Whether the controller closes the connection (read until EOF; messages dropped)."""
        try:
            while True:
                self.recv()
        except (EOFError, ConnectionResetError, ssl.SSLError):
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@contextlib.contextmanager
def running(hub: Hub) -> Iterator[Hub]:
    hub.start()
    try:
        yield hub
    finally:
        hub.stop(2.0)


@pytest.fixture
def hub(recorder: Recorder) -> Iterator[Hub]:
    with running(Hub(recorder, [("127.0.0.1", 0)])) as started:
        yield started


def connected_peer(hub: Hub, recorder: Recorder, dpid: int = DPID) -> tuple[Peer, Connection]:
    peer = Peer.connect(hub.ports[0])
    peer.handshake(dpid)
    conn = recorder.next("connected").conn
    return peer, conn


# ---- framing and encoding --------------------------------------------------------------------


def test_the_framer_cuts_a_stream_into_messages_wherever_reads_end() -> None:
    stream = b"".join(framing.message(PACKET_IN, xid, bytes(xid % 50)) for xid in range(1, 40))
    for step in (1, 7, 8, 9, 64, len(stream)):
        framer = Framer()
        got = [m for at in range(0, len(stream), step) for m in framer.feed(stream[at : at + step])]
        assert [framing.header(m)[3] for m in got] == list(range(1, 40))
        assert b"".join(got) == stream
        assert framer.buffered == 0


def test_the_framer_refuses_a_length_shorter_than_the_header() -> None:
    with pytest.raises(FramingError, match="length 4"):
        Framer().feed(struct.pack("!BBHI", 4, 0, 4, 0))


def test_encode_sets_the_xid_the_caller_chose() -> None:
    msg = parser.OFPBarrierRequest(CodecDatapath(DPID))
    assert framing.header(encode(msg, 0x1234)) == (4, BARRIER_REQUEST, 8, 0x1234)
    # The same message again, with another xid: no counter was taken or moved.
    assert framing.header(encode(msg, 7))[3] == 7


# ---- handshake and messages ----------------------------------------------------------------------


def test_the_handshake_reports_the_switch_by_its_datapath_id(hub: Hub, recorder: Recorder) -> None:
    peer, conn = connected_peer(hub, recorder)
    assert (conn.dpid, conn.n_tables) == (DPID, 254)
    assert conn.address == f"127.0.0.1:{peer.sock.getsockname()[1]}"
    assert conn.peer_certificate() is None
    assert conn.datapath().id == DPID
    assert recorder.threads == {"openflow-hub"}
    peer.close()


def test_messages_go_both_ways_whole_and_in_order(hub: Hub, recorder: Recorder) -> None:
    peer, conn = connected_peer(hub, recorder)
    # Switch to controller: the largest message OpenFlow allows (its length is 16 bits),
    # then 300 small ones in one write (one TCP segment on loopback).
    largest = framing.message(PACKET_IN, 1, bytes(range(256)) * 255 + bytes(range(247)))
    assert len(largest) == 65535
    peer.sock.sendall(largest)
    peer.sock.sendall(b"".join(framing.message(BARRIER_REPLY, xid) for xid in range(2, 302)))
    assert recorder.next("received").data == largest
    for xid in range(2, 302):
        event = recorder.next("received")
        assert event.conn is conn
        assert framing.header(event.data) == (4, BARRIER_REPLY, 8, xid)
    # Controller to switch: a message built by os-ken on the connection's datapath, then
    # 8 MiB in one send from this thread, far beyond what the socket buffers take at once.
    assert conn.send(encode(parser.OFPBarrierRequest(conn.datapath()), 7))
    assert peer.expect(BARRIER_REQUEST)[0] == 7
    bulk = [framing.message(PACKET_OUT, xid, bytes([xid % 256]) * 60_000) for xid in range(140)]
    assert conn.send(b"".join(bulk))
    for xid in range(140):
        assert peer.recv()[3:] == (bulk[xid],)
    peer.close()


def test_sends_from_many_threads_arrive_whole(hub: Hub, recorder: Recorder) -> None:
    peer, conn = connected_peer(hub, recorder)

    def send(first: int) -> None:
        for xid in range(first, first + 200):
            conn.send(framing.message(BARRIER_REQUEST, xid))

    senders = [threading.Thread(target=send, args=(n * 1000,)) for n in range(4)]
    for thread in senders:
        thread.start()
    for thread in senders:
        thread.join()
    xids = [peer.expect(BARRIER_REQUEST)[0] for _ in range(800)]
    assert sorted(xids) == [n * 1000 + i for n in range(4) for i in range(200)]
    for n in range(4):  # each thread's messages in the order it sent them
        mine = [x for x in xids if x // 1000 == n]
        assert mine == sorted(mine)
    peer.close()


def test_the_hub_answers_echo_requests_itself(hub: Hub, recorder: Recorder) -> None:
    peer, _ = connected_peer(hub, recorder)
    peer.send(framing.ECHO_REQUEST, 99, b"are you there")
    xid, reply = peer.expect(framing.ECHO_REPLY)
    assert (xid, reply[8:]) == (99, b"are you there")
    peer.send(framing.ECHO_REPLY, 5)
    peer.send(framing.HELLO, 6)
    assert recorder.quiet(), "echo and HELLO must never reach the handler"
    peer.close()


def test_a_silent_switch_is_probed_then_closed(recorder: Recorder) -> None:
    with running(Hub(recorder, [("127.0.0.1", 0)], echo_interval_s=0.1, echo_timeout_s=0.3)) as h:
        lively, lively_conn = connected_peer(h, recorder, dpid=1)
        silent, silent_conn = connected_peer(h, recorder, dpid=2)
        probed = time.monotonic()
        silent.expect(framing.ECHO_REQUEST)
        for _ in range(3):  # the one that answers stays, whatever the probes cost
            xid, _ = lively.expect(framing.ECHO_REQUEST)
            lively.send(framing.ECHO_REPLY, xid)
        event = recorder.next("disconnected")
        assert event.conn is silent_conn
        assert 0.3 <= time.monotonic() - probed < 2.0
        assert silent.hung_up()
        assert lively_conn.send(framing.message(BARRIER_REQUEST, 1))
        lively.close()
        assert recorder.next("disconnected").conn is lively_conn


def test_disconnected_comes_once_whoever_ends_the_connection(recorder: Recorder) -> None:
    with running(Hub(recorder, [("127.0.0.1", 0)])) as h:
        by_switch, conn1 = connected_peer(h, recorder, dpid=1)
        by_close, conn2 = connected_peer(h, recorder, dpid=2)
        by_stop, conn3 = connected_peer(h, recorder, dpid=3)
        by_switch.close()
        assert recorder.next("disconnected").conn is conn1
        assert not conn1.send(framing.message(BARRIER_REQUEST))
        # close() from another thread, twice; what was sent before it still goes out
        assert conn2.send(framing.message(BARRIER_REQUEST, 42))
        conn2.close()
        conn2.close()
        assert recorder.next("disconnected").conn is conn2
        assert not conn2.send(framing.message(BARRIER_REQUEST))
        assert by_close.expect(BARRIER_REQUEST)[0] == 42
        assert by_close.hung_up()
        assert h.running
        h.stop(2.0)
        assert not h.running
        assert recorder.next("disconnected").conn is conn3
        assert by_stop.hung_up()
        assert not conn3.send(framing.message(BARRIER_REQUEST))
    for conn in (conn1, conn2, conn3):
        assert recorder.count("connected", conn) == 1
        assert recorder.count("disconnected", conn) == 1
    assert recorder.seen[-1].kind == "disconnected"


def test_a_switch_without_openflow_13_is_refused(hub: Hub, recorder: Recorder) -> None:
    peer = Peer.connect(hub.ports[0])
    peer.send(framing.HELLO, version=1)
    version, kind, _, _ = peer.recv()
    assert (version, kind) == (4, framing.HELLO)
    version, kind, _, error = peer.recv()
    assert (version, kind) == (1, framing.ERROR)  # in the switch's own version
    assert struct.unpack_from("!HH", error, 8) == (0, 0)  # HELLO_FAILED, INCOMPATIBLE
    assert b"OpenFlow 1.3" in error[12:]
    assert peer.hung_up()
    assert recorder.quiet()


@pytest.mark.parametrize(
    ("versions", "served"),
    [({1, 4, 6}, True), ({1, 6}, False)],
)
def test_a_version_bitmap_decides(
    hub: Hub, recorder: Recorder, versions: set[int], served: bool
) -> None:
    bits = sum(1 << v for v in versions)
    element = struct.pack("!HHI", framing.HELLO_ELEMENT_VERSIONBITMAP, 8, bits)
    peer = Peer.connect(hub.ports[0])
    peer.send(framing.HELLO, 0, element, version=6)
    peer.expect(framing.HELLO)
    if served:
        xid, _ = peer.expect(framing.FEATURES_REQUEST)
        peer.send(framing.FEATURES_REPLY, xid, framing.FEATURES.pack(DPID, 0, 1, 0, 0, 0))
        assert recorder.next("connected").conn.dpid == DPID
    else:
        assert peer.expect(framing.ERROR)
        assert peer.hung_up()
        assert recorder.quiet()
    peer.close()


def test_an_unfinished_handshake_is_closed_without_callbacks(recorder: Recorder) -> None:
    with running(Hub(recorder, [("127.0.0.1", 0)], handshake_timeout_s=0.2)) as h:
        quiet = Peer.connect(h.ports[0])  # never says HELLO
        halfway = Peer.connect(h.ports[0])
        halfway.send(framing.HELLO)  # never answers FEATURES_REQUEST
        started = time.monotonic()
        assert quiet.hung_up()
        assert halfway.hung_up()
        assert time.monotonic() - started < 2.0
        assert recorder.quiet()


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (struct.pack("!BBHI", 4, PACKET_IN, 4, 0), "shorter than its header"),
        (framing.message(PACKET_IN, version=1), "OpenFlow version 1"),
    ],
)
def test_a_broken_stream_closes_the_connection(
    hub: Hub, recorder: Recorder, caplog: pytest.LogCaptureFixture, bad: bytes, why: str
) -> None:
    peer, conn = connected_peer(hub, recorder)
    with caplog.at_level(logging.WARNING, logger="flowlane.controller"):
        peer.sock.sendall(bad)
        assert recorder.next("disconnected").conn is conn
    assert peer.hung_up()
    assert why in caplog.text


def test_a_failing_handler_does_not_stop_the_hub(recorder: Recorder) -> None:
    class Failing(Recorder):
        def received(self, conn: Connection, data: bytes) -> None:
            super().received(conn, data)
            raise RuntimeError("handler bug")

    failing = Failing()
    with running(Hub(failing, [("127.0.0.1", 0)])) as h:
        peer, _ = connected_peer(h, failing)
        peer.send(BARRIER_REPLY, 1)
        peer.send(BARRIER_REPLY, 2)
        assert framing.header(failing.next("received").data)[3] == 1
        assert framing.header(failing.next("received").data)[3] == 2
        peer.close()
        failing.next("disconnected")


def test_callbacks_may_send_and_close_on_the_hub_thread(recorder: Recorder) -> None:
    """A handler that answers at once (as an actor system would, for tests) and hangs up."""

    class Answering(Recorder):
        def received(self, conn: Connection, data: bytes) -> None:
            super().received(conn, data)
            xid = framing.header(data)[3]
            conn.send(framing.message(BARRIER_REQUEST, xid + 100))
            if xid == 3:
                conn.close()

    answering = Answering()
    with running(Hub(answering, [("127.0.0.1", 0)], echo_interval_s=30)) as h:
        peer, conn = connected_peer(h, answering)
        peer.sock.sendall(b"".join(framing.message(BARRIER_REPLY, x) for x in (1, 2, 3, 4)))
        assert [peer.expect(BARRIER_REQUEST)[0] for _ in range(3)] == [101, 102, 103]
        assert peer.hung_up()
        kinds = [answering.next().kind for _ in range(4)]
        assert kinds == ["received", "received", "received", "disconnected"]
        assert answering.count("received", conn) == 3  # nothing after close()


# ---- listening -----------------------------------------------------------------------------------


def test_start_names_an_address_it_cannot_bind(recorder: Recorder) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        hub = Hub(recorder, [("127.0.0.1", 0), ("127.0.0.1", port)])
        with pytest.raises(OSError, match=f"127.0.0.1:{port}"):
            hub.start()
    assert "openflow-hub" not in {t.name for t in threading.enumerate()}


def test_every_listen_address_serves(recorder: Recorder) -> None:
    with running(Hub(recorder, [("127.0.0.1", 0), ("127.0.0.1", 0)])) as h:
        assert len(set(h.ports)) == 2
        for dpid, port in enumerate(h.ports, start=1):
            peer = Peer.connect(port)
            peer.handshake(dpid)
            assert recorder.next("connected").conn.dpid == dpid
            peer.close()
            recorder.next("disconnected")


def test_a_hundred_switches_take_one_thread(recorder: Recorder) -> None:
    baseline = threading.active_count()
    peers: list[Peer] = []
    with running(Hub(recorder, [("127.0.0.1", 0)])) as h:
        try:
            for _ in range(100):  # all connected first, then all handshakes at once
                peers.append(Peer.connect(h.ports[0]))
            for peer in peers:
                peer.send(framing.HELLO)
            for dpid, peer in enumerate(peers, start=1):
                peer.expect(framing.HELLO)
                xid, _ = peer.expect(framing.FEATURES_REQUEST)
                peer.send(framing.FEATURES_REPLY, xid, framing.FEATURES.pack(dpid, 0, 1, 0, 0, 0))
            conns: dict[int, Connection] = {}
            for _ in peers:
                conn = recorder.next("connected").conn
                conns[conn.dpid] = conn
            assert sorted(conns) == list(range(1, 101))
            assert threading.active_count() <= baseline + 1
            for dpid, conn in conns.items():
                assert conn.send(framing.message(BARRIER_REQUEST, dpid))
            for dpid, peer in enumerate(peers, start=1):
                assert peer.expect(BARRIER_REQUEST)[0] == dpid
                peer.send(BARRIER_REPLY, dpid)
            replies = {recorder.next("received").conn.dpid for _ in peers}
            assert replies == set(range(1, 101))
            assert threading.active_count() <= baseline + 1
        finally:
            for peer in peers:
                peer.close()
        for _ in peers:
            recorder.next("disconnected")
    assert threading.active_count() == baseline


# ---- TLS ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pki:
    authority: Authority
    server: OfpTls
    directory: Path

    def client(self, name: str, authority: Authority | None = None) -> ssl.SSLContext:
        """A switch's context: trusts our CA, presents a certificate of ``authority``."""
        issued = issue(authority or self.authority, name, server=False, client=True)
        cert, key = self.directory / f"{name}.pem", self.directory / f"{name}.key"
        cert.write_bytes(issued.cert_pem)
        key.write_bytes(issued.key_pem)
        context = ssl.create_default_context(cafile=str(self.server.ca))
        context.check_hostname = False
        context.load_cert_chain(str(cert), str(key))
        return context


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    authority = new_authority()
    controller = issue(authority, "controller", server=True, client=False, hosts=["127.0.0.1"])
    files = OfpTls(tmp_path / "ctl.pem", tmp_path / "ctl.key", tmp_path / "ca.pem")
    files.cert.write_bytes(controller.cert_pem)
    files.key.write_bytes(controller.key_pem)
    files.ca.write_bytes(authority.issued.cert_pem)
    return Pki(authority, files, tmp_path)


def test_tls_serves_a_certified_switch_and_shows_its_certificate(
    pki: Pki, recorder: Recorder
) -> None:
    with running(Hub(recorder, [("127.0.0.1", 0)], tls=server_context(pki.server))) as h:
        peer = Peer.connect(h.ports[0], pki.client(switch_name(DPID)))
        peer.handshake(DPID)
        conn = recorder.next("connected").conn
        assert conn.address.endswith(" over TLSv1.3")
        der = conn.peer_certificate()
        assert der is not None
        presented = pki.directory / f"{switch_name(DPID)}.pem"
        assert der == x509.load_pem_x509_certificate(presented.read_bytes()).public_bytes(
            Encoding.DER
        )
        assert dpid_binding_error(der, DPID) is None
        assert dpid_binding_error(der, DPID + 1) is not None
        # both ways, beyond one TLS record and the socket buffers
        bulk = [framing.message(PACKET_OUT, xid, bytes([xid]) * 65_000) for xid in range(60)]
        assert conn.send(b"".join(bulk))
        for message in bulk:
            assert peer.recv()[3] == message
        peer.sock.sendall(b"".join(bulk))
        for message in bulk:
            assert recorder.next("received").data == message
        peer.send(framing.ECHO_REQUEST, 3, b"x")
        assert peer.expect(framing.ECHO_REPLY) == (3, framing.message(framing.ECHO_REPLY, 3, b"x"))
        peer.close()
        assert recorder.next("disconnected").conn is conn


@pytest.mark.parametrize("client", ["other CA", "no certificate"])
def test_tls_refuses_a_switch_the_ca_did_not_certify(
    pki: Pki, recorder: Recorder, caplog: pytest.LogCaptureFixture, client: str
) -> None:
    if client == "other CA":
        context = pki.client("intruder", new_authority("another CA"))
    else:
        context = ssl.create_default_context(cafile=str(pki.server.ca))
        context.check_hostname = False
    with (
        caplog.at_level(logging.WARNING, logger="flowlane.controller"),
        running(Hub(recorder, [("127.0.0.1", 0)], tls=server_context(pki.server))) as h,
    ):
        peer = Peer.connect(h.ports[0], context)
        with contextlib.suppress(ssl.SSLError, OSError):
            peer.send(framing.HELLO)  # TLS 1.3: the refusal shows on the first read
        assert peer.hung_up()
        assert recorder.quiet()
        served = Peer.connect(h.ports[0], pki.client(switch_name(DPID)))  # the hub goes on
        served.handshake()
        assert recorder.next("connected").conn.dpid == DPID
        served.close()
    assert "TLS handshake failed" in caplog.text


def test_a_switch_that_stops_reading_is_closed_not_buffered_for_ever(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(hub_connection, "MAX_BACKLOG", 4 << 20)
    with (
        caplog.at_level(logging.WARNING, logger="flowlane.controller"),
        running(Hub(recorder, [("127.0.0.1", 0)])) as h,
    ):
        peer, conn = connected_peer(h, recorder)  # and then never reads again
        chunk = framing.message(PACKET_OUT, 0, bytes(60_000))
        sent = 0
        while conn.send(chunk):
            sent += 1
            assert sent < 10_000, "the backlog never reached its limit"
        assert recorder.next("disconnected").conn is conn
        assert not conn.send(chunk)
        peer.close()
    assert "stopped reading" in caplog.text


def test_a_send_from_another_thread_wakes_the_idle_hub(recorder: Recorder) -> None:
    """The hub waits up to half a second between its timer checks; a send must not."""
    with running(Hub(recorder, [("127.0.0.1", 0)], echo_interval_s=60, echo_timeout_s=60)) as h:
        peer, conn = connected_peer(h, recorder)
        started = time.monotonic()
        for xid in range(10):  # one at a time: each waits for the hub to be idle again
            assert conn.send(framing.message(BARRIER_REQUEST, xid))
            assert peer.expect(BARRIER_REQUEST)[0] == xid
        assert time.monotonic() - started < 1.0
        peer.close()


def test_a_callback_may_stop_the_hub(recorder: Recorder) -> None:
    class Stopping(Recorder):
        hub: Hub | None = None

        def received(self, conn: Connection, data: bytes) -> None:
            super().received(conn, data)
            assert self.hub is not None
            self.hub.stop()  # on the hub thread: must not wait for itself

    stopping = Stopping()
    with running(Hub(stopping, [("127.0.0.1", 0)])) as h:
        stopping.hub = h
        first, conn1 = connected_peer(h, stopping, dpid=1)
        second, conn2 = connected_peer(h, stopping, dpid=2)
        first.send(BARRIER_REPLY, 1)
        stopping.next("received")
        gone = {stopping.next("disconnected").conn, stopping.next("disconnected").conn}
        assert gone == {conn1, conn2}
        assert first.hung_up()
        assert second.hung_up()
