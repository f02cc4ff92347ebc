"""Run the controller in this process, and stop all of it on SIGTERM.

The OpenFlow hub serves every switch from one thread; the actors' runtime
runs every switch's logic, the registry and the fabric on a fixed pool.  So
the process has the same threads with one switch or a hundred.

A stop (SIGTERM or SIGINT) ends every thread within about two seconds and
the process exits with status 0, so a supervisor can tell a clean stop from
a crash: the hub stops accepting and hangs up the switches (which keep their
flows), the actors stop, then the Redis link stops and removes this
controller's heartbeat, so ``/readyz`` stops counting it at once instead of
after its heartbeat ages.
"""

from __future__ import annotations

import gc
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Protocol

from controller.actors.runtime import Runtime
from controller.mastership.changes import Change, MastershipReport
from controller.mastership.leases import Leases
from controller.openflow.hub import Hub
from controller.openflow.settings import ControllerSettings
from controller.openflow.tls import OfpTls, server_context
from controller.policy.jobs import JobSpec
from controller.policy.model import Policy

if TYPE_CHECKING:
    from controller.shell.app import FlowlaneController

LOG = logging.getLogger("flowlane.controller")
ACTOR_THREADS = 2
"""Threads stepping actors: planning is Python, so more than the cores buys nothing."""
IO_THREADS = 2
"""Threads for blocking work (OVSDB writes, tc reads), shared by every switch."""

STOP_TIMEOUT_S = 2.0
"""How long a stop may take in all; each step below gets what is left of it."""
_POLL_S = 0.1


class PolicyFeed(Protocol):
    """What the runner needs of the Redis link (``controller.link``), which it does not import.

    ``run`` feeds policy and jobs versions to the app until ``stop``.
    """

    def run(
        self,
        apply: Callable[[Policy, int], None],
        apply_jobs: Callable[[tuple[JobSpec, ...]], None] | None = None,
    ) -> None: ...

    def stop(self) -> None: ...

    def on_beat(self, hook: Callable[[], object]) -> None: ...

    def wake_beat(self) -> None: ...

    def mastership_changed(self, changes: Sequence[Change]) -> None: ...


class _StopRequest:
    """Set by the signal handlers, read by the main thread.

    A plain flag polled with ``time.sleep`` rather than a ``threading.Event``:
    a handler runs on the main thread between two bytecodes, and setting an
    Event there could wait for the Event's own lock, held by the interrupted
    ``wait``.
    """

    def __init__(self) -> None:
        self.signum: int | None = None

    def __call__(self, signum: int, _frame: FrameType | None) -> None:
        if self.signum is None:
            LOG.info("signal %d: stopping; switches keep the installed pipeline", signum)
            self.signum = signum
        else:
            LOG.info("signal %d: already stopping", signum)


SWITCH_INTERVAL_S = 0.001
"""How long a thread busy with Python code keeps the interpreter before one that is
ready gets it (CPython's default: 5 ms).  A policy change crosses several threads
(Redis link, actor pool, hub, store writer), and at each the ready thread waited for
whichever was serialising a report or planning another switch: a shorter slice costs a
little throughput and took tens of milliseconds off a change on ten switches (measured
with the thread-per-switch shell)."""


def run_controller(
    settings: ControllerSettings,
    ofp_host: str,
    ofp_port: int,
    reload_policy: Callable[[], Policy | None] | None = None,
    redis_link: PolicyFeed | None = None,
    tls: OfpTls | None = None,
    leases: Leases | None = None,
) -> None:
    """Listen for switches until SIGTERM/SIGINT, then stop everything and return.

    With ``leases`` (and a ``redis_link``, whose heartbeat thread renews the lease),
    several controllers share the switches: each is master of its share.

    On SIGHUP, ``reload_policy`` is asked for a new policy (None keeps the
    current one, e.g. when the file no longer validates).  With a
    ``redis_link`` the policy follows the store instead.  If the OpenFlow
    listener cannot run (its port is taken), the process exits with status 1.
    """
    from controller.shell.app import FlowlaneController

    sys.setswitchinterval(SWITCH_INTERVAL_S)
    stop = _StopRequest()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    runtime = Runtime(threads=ACTOR_THREADS, name="actor", io_threads=IO_THREADS)
    app = FlowlaneController(settings, runtime, leases if redis_link is not None else None)
    if app.keeper is not None and redis_link is not None:
        app.keeper.watch(
            MastershipReport(redis_link.mastership_changed, settings.metrics.switch_master)
        )
        redis_link.on_beat(app.keeper.round)
        app.keeper.set_wake(redis_link.wake_beat)
        app.keeper.start_watch()  # a killed instance's switches: taken in ~0.1 s
    hub = Hub(app, [(ofp_host, ofp_port)], server_context(tls) if tls else None)
    link_thread: threading.Thread | None = None
    failed = False
    try:
        try:
            hub.start()
        except OSError as exc:
            LOG.error("cannot listen for OpenFlow on %s:%d: %s", ofp_host, ofp_port, exc)
            failed = True
            return
        # Said at once: a switch may connect, and be in sync, before the rest has started.
        LOG.info(
            "listening for OpenFlow 1.3 switches on %s:%d%s",
            ofp_host,
            ofp_port,
            f" (mutual TLS, switches certified by {tls.ca})" if tls else "",
        )
        app.start()
        # Everything loaded so far (os-ken's parser, pydantic's schemas) lives as long as
        # the process: out of the collector's sight, a full collection no longer walks it.
        # Unfrozen, one took 40-80 ms every second or two during a burst of policy changes.
        gc.collect()
        gc.freeze()
        if redis_link is not None:
            # Ours, so a daemon: a Redis call stuck in its socket timeout cannot hold the exit.
            link_thread = threading.Thread(
                target=redis_link.run,
                args=(app.set_policy, app.set_jobs),
                name="redis-link",
                daemon=True,
            )
            link_thread.start()
        if reload_policy is not None:
            signal.signal(signal.SIGHUP, _reloader(reload_policy, app))
        while stop.signum is None:
            if not hub.running:
                LOG.error("the OpenFlow listener on %s:%d stopped; exiting", ofp_host, ofp_port)
                failed = True
                break
            time.sleep(_POLL_S)
    finally:
        _shutdown(hub, runtime, app, redis_link, link_thread)
        if failed:
            raise SystemExit(1)


def _reloader(
    reload_policy: Callable[[], Policy | None], app: FlowlaneController
) -> Callable[[int, FrameType | None], None]:
    def reload(_signum: int, _frame: FrameType | None) -> None:
        policy = reload_policy()
        if policy is not None:
            app.set_policy(policy)  # only tells the registry: safe in a signal handler

    return reload


def _shutdown(
    hub: Hub,
    runtime: Runtime,
    app: FlowlaneController,
    redis_link: PolicyFeed | None,
    link_thread: threading.Thread | None,
) -> None:
    """Stop in the order that loses nothing, within ``STOP_TIMEOUT_S`` in all.

    Switches first (the hub hangs up each, and the registry sees each go
    while the actors still run); the actors next; the Redis link last, since
    the actors report through it until they stop.
    """
    deadline = time.monotonic() + STOP_TIMEOUT_S

    def left(share: float = 1.0) -> float:
        return max(0.0, (deadline - time.monotonic()) * share)

    hub.stop(left(0.3))
    runtime.stop(left(0.4))
    app.stop()
    if redis_link is not None:
        # stop() ends the heartbeat thread, then removes this controller's heartbeat and
        # switch reports from Redis.
        _bounded(redis_link.stop, left(0.7), "stopping the Redis link")
        if link_thread is not None:
            link_thread.join(left())
    if app.keeper is not None:
        # After the heartbeat thread stopped (it would renew the lease again): the others
        # take this instance's switches at their next renewal, not after the lease's TTL.
        _bounded(app.keeper.resign, left(), "ending the mastership lease")
    alive = [thread.name for thread in threading.enumerate() if _blocks_exit(thread)]
    if alive:
        LOG.warning("threads still running after the stop: %s", ", ".join(alive))


def _bounded(step: Callable[[], None], timeout_s: float, what: str) -> None:
    """Run a store call on a daemon thread for at most ``timeout_s``: an unreachable Redis
    costs its connect timeout, which the stop has no time for."""
    thread = threading.Thread(target=step, name=what, daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        LOG.warning("gave up %s after %.1f s (Redis slow or unreachable)", what, timeout_s)


def _blocks_exit(thread: threading.Thread) -> bool:
    return thread is not threading.main_thread() and not thread.daemon and thread.is_alive()
