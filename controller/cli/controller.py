"""``flowlane controller``: run the OpenFlow controller."""

from __future__ import annotations

import logging
import os
import socket
import ssl
from pathlib import Path
from typing import Annotated

import typer
from prometheus_client import start_http_server

from controller.auth.redact import redact
from controller.cli.credentials import REDIS_URL_FILE_ENV, redis_url_from_file
from controller.cli.render import LogFormatOption, print_policy_error
from controller.logs import LogFormat, setup_logging
from controller.metrics import ControllerMetrics
from controller.openflow.tls import OfpTls
from controller.policy.errors import PolicyError
from controller.policy.load import load_policy_document, load_policy_file
from controller.policy.model import Policy
from controller.store.liveness import HEARTBEAT_INTERVAL_S
from controller.store.url import parse_store_url

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
        str | None,
        typer.Option(
            help="OVSDB remote for queues, e.g. tcp:127.0.0.1:6640"
            " (default: unix:/var/run/openvswitch/db.sock)"
        ),
    ] = None,
    qos: Annotated[bool, typer.Option(help="Provision port queues through OVSDB")] = True,
    audit_interval: Annotated[
        float, typer.Option(help="Seconds between checks of every switch against its plan")
    ] = 5.0,
    ofp_tls_cert: Annotated[
        Path | None,
        typer.Option(help="OpenFlow over TLS only: the controller's PEM certificate"),
    ] = None,
    ofp_tls_key: Annotated[Path | None, typer.Option(help="Its private key")] = None,
    ofp_ca: Annotated[
        Path | None,
        typer.Option(help="Accept only switches whose certificate this CA signed"),
    ] = None,
    ofp_bind_dpid: Annotated[
        bool,
        typer.Option(
            help="With --ofp-tls-*: serve a switch only under the datapath id its certificate"
            " names (dpid:<16 hex digits> in its CN or a SAN); others are refused"
        ),
    ] = False,
    redis_url_file: Annotated[
        Path | None,
        typer.Option(
            envvar=REDIS_URL_FILE_ENV, help="A file (0600) holding the Redis URL, password and all"
        ),
    ] = None,
    instance_id: Annotated[
        str | None,
        typer.Option(
            help="This controller's name among the controllers sharing one Redis (its lease,"
            " its heartbeat, its reports); default host:pid"
        ),
    ] = None,
    lease_ttl: Annotated[
        float,
        typer.Option(
            help="With Redis: seconds a silent controller keeps its lease before the others"
            " take its switches (renewed every second)"
        ),
    ] = 3.0,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error")] = "info",
    log_format: LogFormatOption = LogFormat.text,
) -> None:
    """Run the controller: install the policy on every switch that connects.

    With --ofp-tls-cert, --ofp-tls-key and --ofp-ca, switches connect over
    mutual TLS on --ofp-port and there is no plain TCP listener.

    An invalid policy stops it before it listens, so nothing is installed.
    Without Redis, SIGHUP re-reads the policy file (an invalid file is
    reported and ignored); with Redis, the active version there rules.
    """
    setup_logging(log_level, log_format)
    if lease_ttl <= HEARTBEAT_INTERVAL_S:
        raise typer.BadParameter(
            f"--lease-ttl {lease_ttl:g}: must be above the {HEARTBEAT_INTERVAL_S:g} s renewal"
            " interval (3 s lets two renewals be missed)"
        )
    tls = ofp_tls(ofp_tls_cert, ofp_tls_key, ofp_ca)
    if ofp_bind_dpid and tls is None:
        raise typer.BadParameter(
            "--ofp-bind-dpid needs --ofp-tls-cert, --ofp-tls-key and --ofp-ca: over plain TCP"
            " a switch presents no certificate to bind"
        )
    try:
        if redis_url_file is not None:
            redis_url = redis_url_from_file(redis_url_file)
        if redis_url:
            parse_store_url(redis_url)  # a bad URL stops it here, naming the wrong part
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    try:
        file_policy, document = load_policy_document(policy)
    except PolicyError as exc:
        print_policy_error(exc)
        raise typer.Exit(2) from None
    # Imported late: os-ken is heavy and not needed to report a bad policy.
    from controller.link.redis_link import RedisLink
    from controller.mastership.leases import Leases
    from controller.openflow.settings import ActivePolicy, ControllerSettings
    from controller.qos.ovsdb import Ovsdb  # the OVS Python IDL: python3-openvswitch
    from controller.shell.runner import run_controller
    from controller.store.client import connect

    metrics = ControllerMetrics()
    if metrics_port:
        start_http_server(metrics_port, addr=metrics_host, registry=metrics.registry)
        LOG.info("metrics on http://%s:%d/metrics", metrics_host, metrics_port)
    link = None
    leases = None
    active = ActivePolicy(file_policy)
    if redis_url:
        LOG.info("following Redis at %s", redact(redis_url))
        name = instance_id or f"{socket.gethostname()}:{os.getpid()}"
        link = RedisLink(redis_url, name, metrics=metrics)
        active = ActivePolicy(*link.bootstrap(file_policy, document))
        # Every controller sharing this Redis masters its share of the switches.
        leases = Leases(connect(redis_url), name, ttl_s=lease_ttl, time_floor=True)
    settings = ControllerSettings(
        active=active,
        ovsdb=Ovsdb(ovsdb),
        metrics=metrics,
        observers=[link] if link else [],
        audit_interval_s=audit_interval,
        manage_qos=qos,
        bind_dpid=ofp_bind_dpid,
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
    run_controller(settings, ofp_host, ofp_port, reload_policy, link, tls, leases)


def ofp_tls(cert: Path | None, key: Path | None, ca: Path | None) -> OfpTls | None:
    """The controller's TLS files, checked: all three, or none."""
    given = {"--ofp-tls-cert": cert, "--ofp-tls-key": key, "--ofp-ca": ca}
    if all(path is None for path in given.values()):
        return None
    missing = [option for option, path in given.items() if path is None]
    if missing:
        raise typer.BadParameter(
            f"OpenFlow over TLS needs --ofp-tls-cert, --ofp-tls-key and --ofp-ca; missing"
            f" {', '.join(missing)} (a controller that checks no switch certificate would"
            " let any process pose as a switch)"
        )
    assert cert is not None and key is not None and ca is not None
    for option, path in given.items():
        if path is not None and not path.is_file():
            raise typer.BadParameter(f"{option} {path}: no such file")
    try:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(ca))
        context.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as exc:
        raise typer.BadParameter(f"--ofp-tls-*: cannot load them: {exc}") from None
    return OfpTls(cert, key, ca)
