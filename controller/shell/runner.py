"""Start os-ken in this process with the flowlane app, and stop all of it on SIGTERM.

os-ken 4.x ships no ``osken-manager``; the documented way is to parse its
config and hand the app list to ``AppManager``, which is what this does,
passing our settings to the app's constructor.

A stop (SIGTERM or SIGINT) ends every thread and loop within about two
seconds and the process exits with status 0, so a supervisor can tell a
clean stop from a crash: the listener stops accepting and hangs up the
switches (which keep their flows), the apps stop their workers and loops,
then the Redis link stops and removes this controller's heartbeat, so
``/readyz`` stops counting it at once instead of after its heartbeat ages.
"""

from __future__ import annotations

import gc
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, Protocol

from os_ken import cfg
from os_ken.base.app_manager import AppManager
from os_ken.controller import controller as _ofp_controller  # noqa: F401  (ofp-* options)
from os_ken.lib import hub

from controller.openflow.listener import Listener
from controller.openflow.settings import ControllerSettings
from controller.openflow.tls import OfpTls, listener_args
from controller.policy.jobs import JobSpec
from controller.policy.model import Policy

LOG = logging.getLogger("flowlane.controller")
APP_MODULE = "controller.openflow.app"
APP_NAME = "FlowlaneApp"

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
ready gets it (CPython's default: 5 ms).  A policy change crosses several threads per
switch (worker, send loop, receive loop, store writer), and at each the ready thread
waited for whichever was serialising a report or planning another switch: a shorter
slice costs a little throughput and took tens of milliseconds off a change on ten
switches."""


def run_controller(
    settings: ControllerSettings,
    ofp_host: str,
    ofp_port: int,
    reload_policy: Callable[[], Policy | None] | None = None,
    redis_link: PolicyFeed | None = None,
    tls: OfpTls | None = None,
) -> None:
    """Listen for switches until SIGTERM/SIGINT, then stop everything and return.

    On SIGHUP, ``reload_policy`` is asked for a new policy (None keeps the
    current one, e.g. when the file no longer validates).  With a
    ``redis_link`` the policy follows the store instead.  If the OpenFlow
    listener cannot run (its port is taken), the process exits with status 1.
    """
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    cfg.CONF(args=listener_args(ofp_host, ofp_port, tls), project="os_ken")
    stop = _StopRequest()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    listener = Listener()
    listener.install()
    manager = AppManager.get_instance()
    services: list[threading.Thread] = []
    link_thread: threading.Thread | None = None
    failed = False
    try:
        manager.load_apps([APP_MODULE])
        contexts = manager.create_contexts()
        services = manager.instantiate_apps(flowlane=settings, **contexts)
        app = manager.applications[APP_NAME]
        # Everything loaded so far (os-ken, pydantic's schemas, the apps) lives as long as
        # the process: out of the collector's sight, a full collection no longer walks it.
        # Unfrozen, one took 40-80 ms every second or two during a burst of policy changes,
        # holding every switch's worker.
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
        LOG.info(
            "listening for OpenFlow 1.3 switches on %s:%d%s",
            ofp_host,
            ofp_port,
            f" (mutual TLS, switches certified by {tls.ca})" if tls else "",
        )
        while stop.signum is None:
            if not any(thread.is_alive() for thread in services):
                LOG.error("the OpenFlow listener on %s:%d stopped; exiting", ofp_host, ofp_port)
                failed = True
                break
            time.sleep(_POLL_S)
    finally:
        _shutdown(listener, manager, services, redis_link, link_thread)
    if failed:
        raise SystemExit(1)


def _reloader(
    reload_policy: Callable[[], Policy | None], app: Any
) -> Callable[[int, FrameType | None], None]:
    def reload(_signum: int, _frame: FrameType | None) -> None:
        policy = reload_policy()
        if policy is not None:
            hub.spawn(app.set_policy, policy)

    return reload


def _shutdown(
    listener: Listener,
    manager: AppManager,
    services: list[threading.Thread],
    redis_link: PolicyFeed | None,
    link_thread: threading.Thread | None,
) -> None:
    """Stop in the order that loses nothing, within ``STOP_TIMEOUT_S`` in all.

    Switches first, so the apps see each one go (``DEAD_DISPATCHER``) while
    their event loops still run; the apps next (workers, audit, fabric
    loops); the Redis link last, since the apps report through it until
    they stop.
    """
    deadline = time.monotonic() + STOP_TIMEOUT_S

    def left(share: float = 1.0) -> float:
        return max(0.0, (deadline - time.monotonic()) * share)

    listener.stop(left(0.4))
    try:
        manager.close()  # every app's stop(): FlowlaneApp.stop bounds its own joins
    except Exception:
        LOG.exception("stopping the os-ken apps failed")
    listener.uninstall()
    if redis_link is not None:
        # stop() ends the heartbeat thread, then removes this controller's heartbeat and
        # switch reports from Redis.
        _bounded(redis_link.stop, left(0.7), "stopping the Redis link")
        if link_thread is not None:
            link_thread.join(left())
    for thread in services:  # os-ken's listener thread: its accept loop ended above
        thread.join(left())
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
