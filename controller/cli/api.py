"""``flowlane api``: serve the REST API over the Redis policy store."""

from __future__ import annotations

import gc
import os
import ssl
from pathlib import Path
from typing import Annotated, Any

import typer
from typer._click.core import ParameterSource

from controller.api.settings import BODY_TIMEOUT_S, HEAD_TIMEOUT_S, MAX_BODY_BYTES, ApiSettings
from controller.auth.files import TOKEN_FILE_ENV, default_token_file
from controller.cli.credentials import (
    REDIS_URL_ENV,
    REDIS_URL_FILE_ENV,
    redis_url_from_file,
    redis_url_warning,
    token_ttl_seconds,
)
from controller.cli.render import LogFormatOption
from controller.logs import LogFormat, uvicorn_log_config
from controller.store.liveness import CONTROLLER_MAX_AGE_S
from controller.store.policies import HISTORY_LIMIT

LIMIT_CONCURRENCY = 512
"""Connections at most (uvicorn answers 503 beyond): below the usual 1024 open files, above
what flowlane's clients hold (a waiting write, a followed stream, each a connection)."""
TIMEOUT_KEEP_ALIVE_S = 5


def api(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="Listen address")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Listen port")] = 8080,
    redis_url: Annotated[
        str,
        typer.Option(
            envvar=REDIS_URL_ENV,
            help="Redis holding policies and switches; one with a password from"
            " $FLOWLANE_REDIS_URL or --redis-url-file, never the command line (ps shows it)",
        ),
    ] = "redis://127.0.0.1:6379/0",
    redis_url_file: Annotated[
        Path | None,
        typer.Option(
            envvar=REDIS_URL_FILE_ENV, help="A file (0600) holding the Redis URL, password and all"
        ),
    ] = None,
    prefix: Annotated[str, typer.Option(help="Prefix of the Redis keys")] = "flowlane",
    controller_max_age: Annotated[
        float,
        typer.Option(
            min=0.1,
            help="Seconds after which a silent controller is gone (it beats every second)",
        ),
    ] = CONTROLLER_MAX_AGE_S,
    wait_timeout: Annotated[
        float, typer.Option(min=0.001, help="Default seconds of ?wait=applied")
    ] = 10.0,
    max_wait_timeout: Annotated[
        float, typer.Option(min=0.001, help="Longest ?wait=applied a request may ask for")
    ] = 120.0,
    history_limit: Annotated[
        int,
        typer.Option(
            min=1, help="Policy versions kept; each write trims older ones, never the active one"
        ),
    ] = HISTORY_LIMIT,
    token_file: Annotated[
        Path | None,
        typer.Option(
            envvar=TOKEN_FILE_ENV,
            help="Where a store without tokens gets its first admin token written (0600)"
            " [default: ~/.config/flowlane/token]",
            show_default=False,
        ),
    ] = None,
    token_ttl: Annotated[
        str | None,
        typer.Option(
            help="The first admin token expires this long after it is made (30d, 12h);"
            " default: never. Rotate it with flowlane token create, then revoke",
            show_default=False,
        ),
    ] = None,
    max_body: Annotated[
        int, typer.Option(min=1024, help="Largest request body in bytes (413 above it)")
    ] = MAX_BODY_BYTES,
    body_timeout: Annotated[
        float,
        typer.Option(min=0.1, help="Seconds a request may take to send its body (408 after)"),
    ] = BODY_TIMEOUT_S,
    head_timeout: Annotated[
        float,
        typer.Option(
            min=0.1,
            help="Seconds a connection may take to send a request's headers (closed after)",
        ),
    ] = HEAD_TIMEOUT_S,
    limit_concurrency: Annotated[
        int,
        typer.Option(
            min=1,
            help="Open connections (and requests in progress) at most; 503 beyond them",
        ),
    ] = LIMIT_CONCURRENCY,
    timeout_keep_alive: Annotated[
        int, typer.Option(min=1, help="Seconds an idle keep-alive connection stays open")
    ] = TIMEOUT_KEEP_ALIVE_S,
    forwarded_allow_ips: Annotated[
        str,
        typer.Option(
            envvar="FLOWLANE_FORWARDED_ALLOW_IPS",
            help="Proxies (comma-separated addresses or networks) whose X-Forwarded-For and"
            " X-Forwarded-Proto are believed; none by default, so the client address is the"
            " connection's",
        ),
    ] = "",
    tls_cert: Annotated[
        Path | None, typer.Option(help="Serve HTTPS with this PEM certificate (flowlane certs)")
    ] = None,
    tls_key: Annotated[Path | None, typer.Option(help="The certificate's private key")] = None,
    tls_client_ca: Annotated[
        Path | None,
        typer.Option(help="Also require a client certificate signed by this CA (mutual TLS)"),
    ] = None,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error")] = "info",
    log_format: LogFormatOption = LogFormat.text,
    access_log: Annotated[bool, typer.Option(help="Log every request (uvicorn's access log)")] = (
        False
    ),
) -> None:
    """Serve the REST API: OpenAPI at /docs, metrics at /metrics.

    It starts while Redis is down (routes answer 503 until it is back). Every
    route but /healthz and /readyz needs a token; on a store with none, the
    first start creates an admin token and writes it to --token-file.
    """
    source = ctx.get_parameter_source("redis_url")
    warning = redis_url_warning(redis_url, source is ParameterSource.COMMANDLINE)
    if warning is not None:
        typer.echo(warning, err=True)
    try:
        if redis_url_file is not None:
            redis_url = redis_url_from_file(redis_url_file)
        bootstrap_ttl_s = token_ttl_seconds(token_ttl)
        settings = ApiSettings(
            redis_url=redis_url,
            prefix=prefix,
            controller_max_age_s=controller_max_age,
            default_wait_timeout_s=wait_timeout,
            max_wait_timeout_s=max_wait_timeout,
            history_limit=history_limit,
            max_body_bytes=max_body,
            body_timeout_s=body_timeout,
            token_file=token_file or default_token_file(os.environ, Path.home()),
            bootstrap_token_ttl_s=bootstrap_ttl_s,
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    tls = tls_options(tls_cert, tls_key, tls_client_ca)
    # Imported late: the policy and switch commands need neither uvicorn nor FastAPI.
    import uvicorn

    from controller.api.app import create_app
    from controller.api.limits import head_deadline_protocol

    app = create_app(settings)
    # Everything loaded so far (FastAPI's routes, pydantic's schemas, the services) lives
    # as long as the process: out of the collector's sight, as in the controller. Unfrozen,
    # a full collection took about 50 ms every few hundred policy writes, and the write it
    # fell on waited for it.
    gc.collect()
    gc.freeze()
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level=log_level.lower(),
        log_config=uvicorn_log_config(log_level, log_format, access_log),
        access_log=access_log,
        http=head_deadline_protocol(head_timeout),
        **server_limits(limit_concurrency, timeout_keep_alive),
        **proxy_options(forwarded_allow_ips),
        **tls,
    )


def server_limits(limit_concurrency: int, timeout_keep_alive: int) -> dict[str, Any]:
    """uvicorn's bounds on connections: how many, and how long an idle one is kept."""
    return {"limit_concurrency": limit_concurrency, "timeout_keep_alive": timeout_keep_alive}


def proxy_options(forwarded_allow_ips: str) -> dict[str, Any]:
    """uvicorn's proxy settings: X-Forwarded-* is read only from the listed proxies.

    uvicorn's own default trusts 127.0.0.1, so any local process could write
    the client address it liked into the audit log and dodge the per-address
    limit on failed tokens; with no proxy listed the headers are ignored.
    """
    listed = [part.strip() for part in forwarded_allow_ips.split(",") if part.strip()]
    if not listed:
        return {"proxy_headers": False, "forwarded_allow_ips": ""}
    return {"proxy_headers": True, "forwarded_allow_ips": listed}


def tls_options(cert: Path | None, key: Path | None, client_ca: Path | None) -> dict[str, Any]:
    """uvicorn's TLS arguments, after checking the files are there and belong together."""
    if cert is None and key is None:
        if client_ca is not None:
            raise typer.BadParameter("--tls-client-ca needs --tls-cert and --tls-key")
        return {}
    if cert is None or key is None:
        raise typer.BadParameter("give --tls-cert and --tls-key together")
    for option, path in (("--tls-cert", cert), ("--tls-key", key), ("--tls-client-ca", client_ca)):
        if path is not None and not path.is_file():
            raise typer.BadParameter(f"{option} {path}: no such file")
    try:  # a wrong key or a corrupt file is reported here, not as a uvicorn traceback
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as exc:
        raise typer.BadParameter(f"--tls-cert/--tls-key: cannot load them: {exc}") from None
    options: dict[str, Any] = {"ssl_certfile": str(cert), "ssl_keyfile": str(key)}
    if client_ca is not None:
        options |= {"ssl_ca_certs": str(client_ca), "ssl_cert_reqs": ssl.CERT_REQUIRED}
    return options
