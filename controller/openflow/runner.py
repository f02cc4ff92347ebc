"""Start os-ken in this process with the flowlane app.

os-ken 4.x ships no ``osken-manager``; the documented way is to parse its
config and hand the app list to ``AppManager``, which is what this does,
passing our settings to the app's constructor.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Callable
from types import FrameType

from os_ken import cfg
from os_ken.base.app_manager import AppManager
from os_ken.controller import controller as _ofp_controller  # noqa: F401  (ofp-* options)
from os_ken.lib import hub

from controller.openflow.redis_link import RedisLink
from controller.openflow.settings import ControllerSettings
from controller.policy.model import Policy

LOG = logging.getLogger("flowlane.controller")
APP_MODULE = "controller.openflow.app"
APP_NAME = "FlowlaneApp"


def _stop(signum: int, _frame: FrameType | None) -> None:
    LOG.info("signal %d: stopping; switches keep the installed pipeline", signum)
    raise SystemExit(0)


def run_controller(
    settings: ControllerSettings,
    ofp_host: str,
    ofp_port: int,
    reload_policy: Callable[[], Policy | None] | None = None,
    redis_link: RedisLink | None = None,
) -> None:
    """Listen for switches until SIGTERM/SIGINT; blocks.

    On SIGHUP, ``reload_policy`` is asked for a new policy (None keeps the
    current one, e.g. when the file no longer validates).  With a
    ``redis_link`` the policy follows the store instead.
    """
    cfg.CONF(
        args=["--ofp-listen-host", ofp_host, "--ofp-tcp-listen-port", str(ofp_port)],
        project="os_ken",
    )
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    manager = AppManager.get_instance()
    manager.load_apps([APP_MODULE])
    contexts = manager.create_contexts()
    services = manager.instantiate_apps(flowlane=settings, **contexts)
    app = manager.applications[APP_NAME]
    if redis_link is not None:
        hub.spawn(redis_link.run, app.set_policy, app.set_jobs)
    if reload_policy is not None:

        def _reload(_signum: int, _frame: FrameType | None) -> None:
            policy = reload_policy()
            if policy is not None:
                hub.spawn(app.set_policy, policy)

        signal.signal(signal.SIGHUP, _reload)
    LOG.info("listening for OpenFlow 1.3 switches on %s:%d", ofp_host, ofp_port)
    try:
        hub.joinall(services)
    finally:
        if redis_link is not None:
            redis_link.stop()
        manager.close()
        # os-ken's hub threads (datapath loops, our sync threads) are not
        # daemons and would keep the interpreter alive. Switches keep the
        # installed pipeline on their own, so there is nothing left to wait for.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
