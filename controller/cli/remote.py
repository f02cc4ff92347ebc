"""The CLI side of the REST API: a small client, readable failures, and ``flowlane switches``.

Every failure the API or the network can produce becomes an ``ApiCallError``
with a message written for an operator and an exit code a script can test:

- 1: the API refused the request (invalid policy or job, version conflict, unknown version
  or job, a job while no policy exists)
- 3: the API is unreachable, or answers that Redis is (503)
- 4: the policy is stored and active, but some switches did not confirm it in time (504)
- 5: no token, a bad one, or one whose role may not do this (401, 403)

(2 stays typer's: a usage error.)  No traceback ever reaches the terminal.

The token comes from ``flowlane --token``, else ``$FLOWLANE_TOKEN``, else the
token file (``flowlane --token-file``, ``$FLOWLANE_TOKEN_FILE``, or the file
the API writes its first admin token to: ``~/.config/flowlane/token``).
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any
from urllib.parse import quote

import httpx
import typer

from controller.auth.files import TOKEN_ENV
from controller.cli.credentials import (
    CREDENTIALS,
    EXIT_DENIED,
    EXIT_NOT_APPLIED,
    EXIT_REJECTED,
    EXIT_UNAVAILABLE,
    ApiCallError,
)
from controller.cli.render import Row, err, out, print_policy_error, print_table, safe, table
from controller.policy.errors import FieldError, PolicyError
from controller.policy.units import format_rate

DEFAULT_API = "http://127.0.0.1:8080"
REQUEST_TIMEOUT_S = 10.0
WAIT_MARGIN_S = 10.0
"""Extra HTTP read time on top of a ``?wait=applied`` timeout: the server answers 504 first."""


ApiOption = Annotated[
    str,
    typer.Option(
        "--api", envvar="FLOWLANE_API", help="Base URL of the flowlane API (or $FLOWLANE_API)"
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the API's JSON, not tables")]


def _no_tls() -> ssl.SSLContext:
    """The context of a plain http:// call, which never uses TLS.

    httpx builds its default context (the whole CA bundle, about 25 ms) for every
    client; this one costs nothing to build, trusts no CA and so refuses any
    certificate, should such a call ever reach TLS."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def _body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _detail(body: Any, response: httpx.Response) -> str:
    if isinstance(body, dict) and isinstance(body.get("detail"), str):
        return str(body["detail"])
    text = response.text.strip()
    return text[:300] if text else response.reason_phrase


def failure_of(response: httpx.Response, token_source: str | None = None) -> ApiCallError:
    """What a non-2xx answer means, in words (pure: the response, and where the token sent
    came from, None when none was sent, are all it reads)."""
    status = response.status_code
    body = _body(response)
    detail = _detail(body, response)
    if status == 422 and isinstance(body, dict) and isinstance(body.get("errors"), list):
        errors = [
            FieldError(str(e.get("path", "?")), str(e.get("message", "")))
            for e in body["errors"]
            if isinstance(e, dict)
        ]
        return ApiCallError(detail, EXIT_REJECTED, status, body, errors)
    if status == 412 and isinstance(body, dict):
        active = body.get("active_version")
        expected = body.get("expected_version")
        now = "no policy exists yet" if active is None else f"the active version is {active}"
        wanted = "no policy" if expected is None else f"version {expected}"
        hint = (
            ""
            if active is None
            else f"; re-read it (flowlane policy show), then --if-match {active}"
        )
        return ApiCallError(
            f"conflict: you expected {wanted}, but {now}{hint}", EXIT_REJECTED, status, body
        )
    if status == 401:
        return ApiCallError(
            f"not authorized: {detail}; {_token_hint(token_source)}", EXIT_DENIED, status, body
        )
    if status == 403:
        return ApiCallError(f"forbidden: {detail}", EXIT_DENIED, status, body)
    if status == 503:
        return ApiCallError(f"the API is not ready: {detail}", EXIT_UNAVAILABLE, status, body)
    if status == 504 and isinstance(body, dict):
        pending = ", ".join(str(dpid) for dpid in body.get("pending", [])) or "(none listed)"
        return ApiCallError(
            f"{detail}; not confirmed by: {pending}", EXIT_NOT_APPLIED, status, body
        )
    if status in (404, 409):  # no such thing; no policy yet to check a job against
        return ApiCallError(detail, EXIT_REJECTED, status, body)
    return ApiCallError(f"API error {status}: {detail}", EXIT_REJECTED, status, body)


def _token_hint(source: str | None) -> str:
    """What to change about the token: the setting it came from first, as it wins over the
    others (a stale $FLOWLANE_TOKEN hides a good token file)."""
    if source is None:
        return (
            f"no token was sent: pass --token, set ${TOKEN_ENV}, or put a token in"
            f" {CREDENTIALS.file()}"
        )
    if source == f"${TOKEN_ENV}":
        return (
            f"the token sent came from ${TOKEN_ENV}, which comes before the token file"
            f" {CREDENTIALS.file()}: set it to a valid token, or unset it"
        )
    if source == "--token":
        return "the token sent came from --token: pass a valid one"
    return f"the token sent came from {source}: put a valid token there, or pass --token"


class ApiClient:
    """The API's routes as methods returning decoded JSON; ``ApiCallError`` on any failure."""

    def __init__(
        self,
        base_url: str,
        transport: httpx.BaseTransport | None = None,
        token: str | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._transport = transport
        self._token, self._token_source = (
            (token, "the token given") if token is not None else CREDENTIALS.resolve_with_source()
        )

    def request(
        self,
        method: str,
        path: str,
        *,
        timeout_s: float = REQUEST_TIMEOUT_S,
        **kwargs: Any,
    ) -> Any:
        url = f"{self.base_url}{path}"
        if self._token:
            kwargs["headers"] = {
                "Authorization": f"Bearer {self._token}",
                **kwargs.get("headers", {}),
            }
        try:
            verify = CREDENTIALS.verify() if url.startswith("https:") else _no_tls()
            with httpx.Client(
                transport=self._transport, timeout=timeout_s, verify=verify
            ) as client:
                response = client.request(method, url, **kwargs)
        except httpx.TimeoutException:
            raise ApiCallError(
                f"the flowlane API at {self.base_url} did not answer within {timeout_s:g} s",
                EXIT_UNAVAILABLE,
            ) from None
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise ApiCallError(
                f"cannot reach the flowlane API at {self.base_url}: {exc or type(exc).__name__}"
                " (is `flowlane api` running? --api or $FLOWLANE_API sets its URL)",
                EXIT_UNAVAILABLE,
            ) from None
        if response.status_code == 204:
            return None  # DELETE /v1/jobs/{name}: done, nothing to say
        if response.is_success:
            body = _body(response)
            if body is None:
                raise ApiCallError(
                    f"the API at {self.base_url} answered {response.status_code} without JSON:"
                    f" is it the flowlane API?",
                    EXIT_UNAVAILABLE,
                )
            return body
        raise failure_of(response, self._token_source if self._token else None)

    def get_policy(self) -> Any:
        return self.request("GET", "/v1/policy")

    def history(self, limit: int) -> Any:
        return self.request("GET", "/v1/policy/history", params={"limit": limit})

    def plan(self, document: object) -> Any:
        return self.request("POST", "/v1/policy/plan", content=encode(document), headers=_JSON)

    def switches(self) -> Any:
        return self.request("GET", "/v1/switches")

    def queues(self, dpid: str) -> Any:
        return self.request("GET", f"/v1/switches/{quote(dpid, safe='')}/queues")

    def put_policy(self, document: object, write: WriteOptions) -> Any:
        return self.request(
            "PUT",
            "/v1/policy",
            content=encode(document),
            headers={**_JSON, **write.headers},
            params=write.params,
            timeout_s=write.http_timeout_s,
        )

    def rollback(self, version: int, write: WriteOptions) -> Any:
        return self.request(
            "POST",
            "/v1/policy/rollback",
            json={"version": version},
            headers=write.headers,
            params=write.params,
            timeout_s=write.http_timeout_s,
        )

    def add_job(self, document: object) -> Any:
        return self.request("POST", "/v1/jobs", content=encode(document), headers=_JSON)

    def jobs(self) -> Any:
        return self.request("GET", "/v1/jobs")

    def delete_job(self, name: str) -> None:
        self.request("DELETE", f"/v1/jobs/{quote(name, safe='')}")

    def flows(self, params: dict[str, str | int]) -> Any:
        return self.request("GET", "/v1/flows", params=params)

    def events(self, params: dict[str, str | int]) -> Any:
        return self.request("GET", "/v1/events", params=params)


_JSON = {"Content-Type": "application/json"}


def encode(document: object) -> bytes:
    """JSON of a YAML document; values JSON lacks (dates) become strings the API can reject."""
    return json.dumps(document, default=str).encode("utf-8")


@dataclass(frozen=True)
class WriteOptions:
    """How a write is made: why, on which version, and whether to wait for the switches
    (who is the token's name)."""

    comment: str = ""
    wait: bool = True
    timeout_s: float = 30.0
    if_match: int | None = None

    @property
    def params(self) -> dict[str, str]:
        params: dict[str, str] = {}
        if self.comment:
            params["comment"] = self.comment
        if self.wait:
            params.update(wait="applied", timeout=f"{self.timeout_s:g}")
        return params

    @property
    def headers(self) -> dict[str, str]:
        return {} if self.if_match is None else {"If-Match": f'"{self.if_match}"'}

    @property
    def http_timeout_s(self) -> float:
        return self.timeout_s + WAIT_MARGIN_S if self.wait else REQUEST_TIMEOUT_S


def print_json(body: Any) -> None:
    """Machine output: the API's JSON as it came, indented, nothing else on stdout."""
    typer.echo(json.dumps(body, indent=2, sort_keys=False))


def report_failure(failure: ApiCallError, *, as_json: bool, source: str = "policy") -> typer.Exit:
    """Print a failure (its JSON body too with ``--json``); the ``Exit`` to raise."""
    if as_json and failure.body is not None:
        print_json(failure.body)
    if failure.errors:
        print_policy_error(PolicyError(failure.errors, source))
    else:
        err.print(f"[bold red]error[/]: {safe(failure.message)}", highlight=False)
    return typer.Exit(failure.exit_code)


def report_request_failure(
    failure: ApiCallError,
    *,
    as_json: bool,
    what: str,
    hint: Callable[[FieldError], str] | None = None,
) -> typer.Exit:
    """``report_failure`` for requests that are not policies: ``invalid job x: 1 error(s)``.

    ``hint`` may add a few words to an error line (the option it came from).
    """
    if not failure.errors:
        return report_failure(failure, as_json=as_json)
    if as_json and failure.body is not None:
        print_json(failure.body)
    err.print(f"[bold red]invalid {what}[/]: {len(failure.errors)} error(s)", highlight=False)
    for error in failure.errors:
        extra = hint(error) if hint is not None else ""
        err.print(f"  [cyan]{safe(error.path)}[/]: {safe(error.message)}{extra}", highlight=False)
    return typer.Exit(failure.exit_code)


def when(timestamp: object) -> str:
    """Unix time in local time, to the second."""
    if not isinstance(timestamp, int | float):
        return "-"
    return datetime.fromtimestamp(timestamp).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def rate(bps: object) -> str:
    return format_rate(bps) if isinstance(bps, int) and bps > 0 else "-"


def _applied_cell(applied: object, active: object) -> str:
    if applied is None:
        return "[yellow]none[/]"
    if applied == active:
        return f"[green]{applied}[/]"
    return f"[yellow]{applied}[/] (behind {active})"


def _port_row(dpid: str, port: dict[str, Any]) -> Row:
    queues = ", ".join(
        f"{q['queue_id']}:{q['class_name']} {rate(q['min_bps'])}-{rate(q['max_bps'])}"
        for q in port.get("queues", [])
    )
    return (
        dpid,
        port["name"],
        str(port["number"]),
        rate(port.get("link_bps")),
        rate(port.get("rate_bps")),
        queues or "-",
    )


def render_switches(body: dict[str, Any]) -> None:
    switches = body.get("switches", [])
    active = body.get("active_version")
    print_table(
        f"switches (active policy version {active})",
        ("dpid", "controller", "datapath", "connected", "applied", "ports", "flows"),
        [
            (
                switch["dpid"],
                switch["controller"],
                switch.get("datapath_type") or "-",
                when(switch.get("connected_at")),
                _applied_cell(switch.get("applied_version"), active),
                str(len(switch.get("ports", []))),
                str(switch.get("flow_count", 0)),
            )
            for switch in switches
        ],
        empty=f"no live switch (active policy version: {active if active else 'none'})",
    )
    if switches:
        out.print(
            table(
                "ports",
                ("dpid", "port", "number", "link", "rate", "queues (min-max)"),
                [
                    _port_row(switch["dpid"], port)
                    for switch in switches
                    for port in switch.get("ports", [])
                ],
            )
        )


def switches(api: ApiOption = DEFAULT_API, as_json: JsonOption = False) -> None:
    """List the switches of live controllers: applied version, ports, queues, flow count."""
    try:
        body = ApiClient(api).switches()
    except ApiCallError as failure:
        raise report_failure(failure, as_json=as_json) from None
    if as_json:
        print_json(body)
    else:
        render_switches(body)
