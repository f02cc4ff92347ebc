"""One OVSDB connection, through the OVS Python IDL, owned by one thread (an actor).

``ovs.db.idl.Idl`` keeps a replica of the monitored tables and tells which
rows changed, but it is not thread-safe, and the controller asks for queues
from several threads (the actors' runtime's blocking pool).  So one thread
owns the IDL: callers on any thread submit *reads* (functions of the
replica) and *writes* (functions that fill a transaction) and wait on a
future; the thread runs the IDL and
serves them in its own loop without ever blocking on one (reads are answered
while a commit is on its way, and a write waiting for ovs-vswitchd does not
hold up the next), and tells subscribers which tables changed, so nobody
polls OVSDB.

A write can also wait until ovs-vswitchd has applied it (``next_cfg`` /
``cur_cfg``, what ``ovs-vsctl`` does by default): tc filters can only go on
the HTB qdisc ovs-vswitchd creates for a new QoS once it exists.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

with warnings.catch_warnings():
    # ovs.poller imports eventlet when it is installed (os-ken's dependency), only to
    # check for monkey-patching; eventlet warns that it is deprecated on import.
    warnings.simplefilter("ignore")
    import ovs.db.idl
    import ovs.dirs
    import ovs.poller

LOG = logging.getLogger("flowlane.qos")

T = TypeVar("T")

ALL_TABLES = frozenset({"*"})
"""What subscribers are told when the whole replica was (re)loaded, e.g. after a reconnect."""


class IdlError(RuntimeError):
    """A request the connection could not carry out (not connected, refused, timed out)."""


def default_remote() -> str:
    """The local ovsdb-server, where ``ovs-vsctl`` looks by default."""
    return f"unix:{ovs.dirs.RUNDIR}/db.sock"


def vswitch_schema() -> Path:
    """The schema of the installed Open vSwitch (python3-openvswitch ships with it)."""
    return Path(ovs.dirs.PKGDATADIR) / "vswitch.ovsschema"


class _Idl(ovs.db.idl.Idl):  # type: ignore[misc]
    """The IDL, remembering which tables its last ``run`` changed."""

    def __init__(self, remote: str, helper: Any) -> None:
        super().__init__(remote, helper)
        self.changed_tables: set[str] = set()

    def notify(self, event: Any, row: Any, updates: Any = None) -> None:
        # The IDL's own hook, called per row as it applies an update; a row knows its table
        # only through this attribute in the 3.1 bindings.
        self.changed_tables.add(row._table.name)


@dataclass(eq=False)
class _Request(Generic[T]):
    future: Future[T]
    deadline: float
    read: Callable[[Any], T] | None = None
    build: Callable[[Any, Any], T] | None = None
    """Fills the transaction (second argument) from the replica (first); returns the result."""
    wait_applied: bool = False


@dataclass(eq=False)
class _Inflight:
    """The write being committed: one at a time, so each is built on the replica its
    predecessor left (a later write sees the rows an earlier one created)."""

    request: _Request[Any]
    baseline: int
    """``change_seqno`` before the commit: after TRY_AGAIN, rebuild once it moved."""
    txn: Any = None
    result: Any = None


@dataclass(eq=False)
class _Applying:
    """A committed write waiting for ovs-vswitchd; the next write need not wait with it."""

    request: _Request[Any]
    result: Any
    target_cfg: int
    """The ``next_cfg`` the write set: done once ovs-vswitchd's ``cur_cfg`` reaches it."""


Subscriber = Callable[[Any, frozenset[str]], None]
"""Called on the loop thread with the IDL (to read the replica, never to write) and the
names of the tables that changed."""


@dataclass
class _Subscriber:
    tables: frozenset[str]
    callback: Subscriber


@dataclass
class _Inbox:
    """What other threads hand to the loop (under ``IdlActor._lock``)."""

    requests: list[_Request[Any]] = field(default_factory=list)
    subscribers: list[_Subscriber] = field(default_factory=list)
    closing: bool = False


class IdlActor:
    """Owns the IDL and the one thread that touches it; any thread may submit.

    The thread starts on the first request or subscription, so building one
    (a settings default, a unit test) connects to nothing.
    """

    def __init__(self, remote: str, columns: Mapping[str, Sequence[str]], schema: Path) -> None:
        self.remote = remote
        self._columns = {table: list(names) for table, names in columns.items()}
        self._schema = schema
        self._lock = threading.Lock()
        self._inbox = _Inbox()
        self._thread: threading.Thread | None = None
        self._dead: str | None = None
        self._wake_r, self._wake_w = -1, -1
        # Loop-thread state.
        self._reads: list[_Request[Any]] = []
        self._writes: list[_Request[Any]] = []
        self._inflight: _Inflight | None = None
        self._applying: list[_Applying] = []
        self._subscribers: list[_Subscriber] = []
        self._new_subscribers: list[_Subscriber] = []
        """Not called yet: each is called once with ``ALL_TABLES`` when the replica is ready."""

    # ---- any thread ----------------------------------------------------------------

    def submit_read(self, read: Callable[[Any], T], timeout_s: float) -> Future[T]:
        """``read(idl)`` on the loop thread once the replica is current."""
        return self._submit(_Request(Future(), time.monotonic() + timeout_s, read=read))

    def submit_write(
        self, build: Callable[[Any, Any], T], timeout_s: float, wait_applied: bool = False
    ) -> Future[T]:
        """``build(idl, txn)`` on the loop thread, then commit (rebuilt when OVSDB says
        try again); the result is ``build``'s once committed (and, with ``wait_applied``,
        applied by ovs-vswitchd)."""
        request = _Request(
            Future(), time.monotonic() + timeout_s, build=build, wait_applied=wait_applied
        )
        return self._submit(request)

    def subscribe(self, tables: Iterable[str], callback: Subscriber) -> None:
        """Call ``callback(idl, changed tables)`` on the loop thread whenever one of
        ``tables`` changes (and once the replica is first loaded).  It must not block on
        this actor: it may read the replica and submit, never wait."""
        with self._lock:
            self._inbox.subscribers.append(_Subscriber(frozenset(tables), callback))
        self._start()
        self._wake()

    def close(self, timeout_s: float = 2.0) -> None:
        with self._lock:
            self._inbox.closing = True
            thread = self._thread
        self._wake()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)

    def _submit(self, request: _Request[T]) -> Future[T]:
        with self._lock:
            if self._inbox.closing or self._dead:
                request.future.set_exception(IdlError(self._dead or "OVSDB connection closed"))
                return request.future
            self._inbox.requests.append(request)
        self._start()
        self._wake()
        return request.future

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None or self._inbox.closing:
                return
            self._wake_r, self._wake_w = os.pipe()
            os.set_blocking(self._wake_r, False)
            os.set_blocking(self._wake_w, False)
            self._thread = threading.Thread(target=self._run, name="ovsdb", daemon=True)
            self._thread.start()

    def _wake(self) -> None:
        # Under the lock: the loop closes the pipe under it, so the descriptor written to
        # cannot have been closed (and reused by another file) in between.
        with self._lock:
            if self._wake_w >= 0:
                with contextlib.suppress(BlockingIOError):  # a full pipe: already awake
                    os.write(self._wake_w, b"x")

    # ---- the loop thread -------------------------------------------------------------

    def _run(self) -> None:
        idl: Any = None
        try:
            helper = ovs.db.idl.SchemaHelper(location=str(self._schema))
            for table, names in self._columns.items():
                helper.register_columns(table, names)
            idl = _Idl(self.remote, helper)
            self._loop(idl)
            reason = "OVSDB connection closed"
        except Exception as exc:
            LOG.exception("OVSDB connection to %s failed", self.remote)
            reason = f"OVSDB connection to {self.remote} failed: {exc}"
            with self._lock:
                self._dead = reason
        finally:
            if idl is not None:
                idl.close()
            with self._lock:
                pending = self._inbox.requests
                self._inbox.requests = []
                wake_r, wake_w = self._wake_r, self._wake_w
                self._wake_r = self._wake_w = -1
            os.close(wake_r)
            os.close(wake_w)
        if self._inflight is not None:
            pending.append(self._inflight.request)
        pending += [applying.request for applying in self._applying]
        for request in [*self._reads, *self._writes, *pending]:
            _fail(request, reason)

    def _loop(self, idl: Any) -> None:
        seqno = idl.change_seqno
        while True:
            with contextlib.suppress(BlockingIOError):
                while os.read(self._wake_r, 512):
                    pass
            with self._lock:
                if self._inbox.closing:
                    return
                incoming, self._inbox.requests = self._inbox.requests, []
                self._new_subscribers += self._inbox.subscribers
                self._inbox.subscribers = []
            self._reads += [r for r in incoming if r.read is not None]
            self._writes += [r for r in incoming if r.build is not None]
            idl.run()
            ready = _ready(idl)
            if idl.change_seqno != seqno and ready:
                changed = frozenset(idl.changed_tables) or ALL_TABLES
                idl.changed_tables.clear()
                seqno = idl.change_seqno
                self._notify(self._subscribers, idl, changed)
            if ready and self._new_subscribers:
                new, self._new_subscribers = self._new_subscribers, []
                self._subscribers += new
                self._notify(new, idl, ALL_TABLES)  # the replica once, as it is now
            now = time.monotonic()
            self._expire(now, ready)
            if ready:
                reads, self._reads = self._reads, []
                for request in reads:
                    _serve(request, idl)
            self._advance_writes(idl, ready)
            self._block(idl)

    @staticmethod
    def _notify(subscribers: list[_Subscriber], idl: Any, changed: frozenset[str]) -> None:
        for subscriber in subscribers:
            if changed is ALL_TABLES or changed & subscriber.tables:
                try:
                    subscriber.callback(idl, changed)
                except Exception:
                    LOG.exception("OVSDB change subscriber failed")

    def _expire(self, now: float, ready: bool) -> None:
        why = "no answer" if ready else f"OVSDB at {self.remote} not connected"
        for queue in (self._reads, self._writes):
            for request in [r for r in queue if r.deadline <= now or r.future.cancelled()]:
                queue.remove(request)
                _fail(request, f"{why} within the timeout")
        for applying in [a for a in self._applying if a.request.deadline <= now]:
            self._applying.remove(applying)
            _fail(applying.request, "committed, but ovs-vswitchd did not apply it in time")
        inflight = self._inflight
        if inflight is not None and inflight.request.deadline <= now:
            if inflight.txn is None:
                why = "OVSDB kept asking to try again" if ready else why
            if inflight.txn is not None:
                inflight.txn.abort()  # it may still commit: every caller re-reads before acting
            _fail(inflight.request, f"{why} within the timeout")
            self._inflight = None

    def _advance_writes(self, idl: Any, ready: bool) -> None:
        txn_status = ovs.db.idl.Transaction  # the status constants
        if ready:
            self._resolve_applied(idl)
        while True:
            inflight = self._inflight
            if inflight is None:
                if not ready or not self._writes:
                    return
                request = self._writes.pop(0)
                if not request.future.set_running_or_notify_cancel():
                    continue
                inflight = self._inflight = _Inflight(request, idl.change_seqno)
                if not self._build(idl, inflight):
                    continue
            if inflight.txn is None:  # told to try again: rebuild once the replica moved
                if not ready or idl.change_seqno == inflight.baseline:
                    return
                inflight.baseline = idl.change_seqno
                if not self._build(idl, inflight):
                    continue
            status = inflight.txn.commit()
            if status == txn_status.INCOMPLETE:
                return
            if status == txn_status.SUCCESS and inflight.request.wait_applied:
                target = inflight.txn.get_increment_new_value()
                self._applying.append(_Applying(inflight.request, inflight.result, target))
                self._inflight = None
                self._resolve_applied(idl)  # ovs-vswitchd may have been quicker than the reply
                continue
            if status in (txn_status.SUCCESS, txn_status.UNCHANGED):
                self._finish(inflight.result)
                continue
            if status == txn_status.TRY_AGAIN:
                # Rebuilt above once the replica moved: at once when the change that
                # outdated it came with the reply, else when it comes.
                inflight.txn = None
                continue
            error = inflight.txn.get_error()
            self._inflight = None
            _fail(inflight.request, error)

    def _resolve_applied(self, idl: Any) -> None:
        if not self._applying:
            return
        cur_cfg = _cur_cfg(idl)
        for applying in [a for a in self._applying if a.target_cfg <= cur_cfg]:
            self._applying.remove(applying)
            applying.request.future.set_result(applying.result)

    def _build(self, idl: Any, inflight: _Inflight) -> bool:
        """A fresh transaction from the current replica; False when ``build`` raised (the
        request then carries the exception)."""
        txn = ovs.db.idl.Transaction(idl)
        request = inflight.request
        assert request.build is not None
        try:
            inflight.result = request.build(idl, txn)
            txn.add_comment("flowlane")  # names the writer in the database's log
            if request.wait_applied:
                _open_vswitch(idl).increment("next_cfg")
        except Exception as exc:
            txn.abort()
            self._inflight = None
            request.future.set_exception(exc)
            return False
        inflight.txn = txn
        return True

    def _finish(self, result: Any) -> None:
        assert self._inflight is not None
        request = self._inflight.request
        self._inflight = None
        request.future.set_result(result)

    def _block(self, idl: Any) -> None:
        poller = ovs.poller.Poller()
        idl.wait(poller)
        if self._inflight is not None and self._inflight.txn is not None:
            self._inflight.txn.wait(poller)
        poller.fd_wait(self._wake_r, ovs.poller.POLLIN)
        pending = [*self._reads, *self._writes, *(a.request for a in self._applying)]
        if self._inflight is not None:
            pending.append(self._inflight.request)
        if pending:
            earliest = min(r.deadline for r in pending)
            poller.timer_wait(max(0, int((earliest - time.monotonic()) * 1000) + 1))
        try:
            poller.block()
        except OSError as exc:  # a signal interrupted poll(): just go round again
            if exc.errno != errno.EINTR:
                raise


def _ready(idl: Any) -> bool:
    """Connected, and the replica loaded: a read now sees what OVSDB holds."""
    return bool(
        idl.has_ever_connected()
        and idl.state == idl.IDL_S_MONITORING
        and idl._session.is_connected()  # no public accessor in the 3.1 IDL
    )


def _open_vswitch(idl: Any) -> Any:
    rows = list(idl.tables["Open_vSwitch"].rows.values())
    if not rows:
        raise IdlError("OVSDB has no Open_vSwitch row (ovs-vswitchd never initialised it)")
    return rows[0]


def _cur_cfg(idl: Any) -> int:
    return int(_open_vswitch(idl).cur_cfg)


def _serve(request: _Request[Any], idl: Any) -> None:
    if not request.future.set_running_or_notify_cancel():
        return
    assert request.read is not None
    try:
        request.future.set_result(request.read(idl))
    except Exception as exc:
        request.future.set_exception(exc)


def _fail(request: _Request[Any], reason: str) -> None:
    if request.future.done():
        return
    if request.future.running() or request.future.set_running_or_notify_cancel():
        request.future.set_exception(IdlError(reason))
