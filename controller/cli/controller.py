"""``flowlane controller``: run the OpenFlow controller."""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import Annotated

import typer
from prometheus_client import start_http_server

from controller.cli.render import print_policy_error
from controller.metrics import ControllerMetrics
from controller.policy.errors import PolicyError
from controller.policy.load import load_policy_document, load_policy_file
from controller.policy.model import Policy
from controller.qos.ovsdb import Ovsdb

LOG = logging.getLogger("flowlane.controller")


def controller(
    policy: Annotated[
        Path, typer.Option(help="Policy YAML file (with Redis: used when it has none)")
    ],
    ofp_port: Annotated[int, typer.Option(help="OpenFlow listen port")] = 6653,
    ofp_host: Annotated[str, typer.Option(help="OpenFlow listen address")] = "127.0.0.1",
    metrics_port: Annotated[int, typer.Option(help="Prometheus /metrics port (0 disables)")] = 9100,
    metrics_host: Annotated[str, typer.Option(help="Prometheus listen address")] = "127.0.0.1",
    redis_url: Annotated[
        str | None,
        typer.Option(
            envvar="FLOWLANE_REDIS_URL",
            help="Follow policy versions in this Redis and report switches there"
            " (redis://[:password@]host:port/db or rediss:// for TLS)",
        ),
    ] = None,
    ovsdb: Annotated[
        str | None, typer.Option(help="OVSDB remote for queues (default: ovs-vsctl's)")
    ] = None,
    qos: Annotated[bool, typer.Option(help="Provision port queues through OVSDB")] = True,
    audit_interval: Annotated[
        float, typer.Option(help="Seconds between checks of every switch against its plan")
    ] = 5.0,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error")] = "info",
) -> None:
    """Run the controller: install the policy on every switch that connects.

    An invalid policy stops it before it listens, so nothing is installed.
    Without Redis, SIGHUP re-reads the policy file (an invalid file is
    reported and ignored); with Redis, the active version there rules.
    """
    logging.basicConfig(
        level=log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        file_policy, document = load_policy_document(policy)
    except PolicyError as exc:
        print_policy_error(exc)
        raise typer.Exit(2) from None
    # Imported late: os-ken is heavy and not needed to report a bad policy.
    from controller.openflow.redis_link import RedisLink
    from controller.openflow.runner import run_controller
    from controller.openflow.settings import ActivePolicy, ControllerSettings

    metrics = ControllerMetrics()
    if metrics_port:
        start_http_server(metrics_port, addr=metrics_host, registry=metrics.registry)
        LOG.info("metrics on http://%s:%d/metrics", metrics_host, metrics_port)
    link = None
    active = ActivePolicy(file_policy)
    if redis_url:
        link = RedisLink(redis_url, f"{socket.gethostname()}:{os.getpid()}", metrics=metrics)
        active = ActivePolicy(*link.bootstrap(file_policy, document))
    settings = ControllerSettings(
        active=active,
        ovsdb=Ovsdb(ovsdb),
        metrics=metrics,
        observers=[link] if link else [],
        audit_interval_s=audit_interval,
        manage_qos=qos,
    )

    def reload_policy() -> Policy | None:
        if link is not None:
            LOG.warning("SIGHUP ignored: policy comes from Redis (flowlane policy apply)")
            return None
        try:
            fresh = load_policy_file(policy)
        except PolicyError as exc:
            LOG.error("SIGHUP: keeping the current policy: %s", exc)
            return None
        LOG.info("SIGHUP: applying %s", policy)
        return fresh

    LOG.info(
        "policy version %s: %d classes, %d rules",
        active.version if active.version is not None else f"from {policy}",
        len(active.policy.classes),
        len(active.policy.rules),
    )
    run_controller(settings, ofp_host, ofp_port, reload_policy, link)
