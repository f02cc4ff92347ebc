"""``flowlane jobs``: register, list and delete jobs through the API.

A job puts endpoints in a class of the active policy for a while (``--ttl``);
a scheduler runs ``flowlane jobs add`` again before it expires to keep it.
The API is the one judge of what is valid: the options are passed on as they
are written, and its errors come back with their paths
(``endpoints[1].ports``), each shown next to the ``--endpoint`` it came from.
"""

from __future__ import annotations

import re
import time
from typing import Annotated, Any

import typer

from controller.cli.credentials import ApiCallError
from controller.cli.groups import HintingGroup
from controller.cli.remote import (
    DEFAULT_API,
    ApiClient,
    ApiOption,
    JsonOption,
    print_json,
    report_failure,
    report_request_failure,
    when,
)
from controller.cli.render import Row, out, print_table
from controller.policy.errors import FieldError

app = typer.Typer(
    help="Register, list and delete jobs: endpoints a scheduler puts in a class, for a while.",
    no_args_is_help=True,
    cls=HintingGroup,
)

_ENDPOINT_PATH = re.compile(r"^endpoints\[(\d+)\]")
_OPTION_OF = {"class": "--class", "ttl": "--ttl", "weight": "--weight"}
"""The option each top-level field of the request comes from, named next to its error."""


def parse_endpoint(text: str) -> dict[str, Any]:
    """``10.0.0.0/24:4791,8000-8010`` as the API's endpoint: ``ipv4`` and optional ``ports``.

    Nothing is checked here (the API checks, with paths); numbers become
    integers so the request reads as an operator would write it in JSON.
    """
    address, colon, ports = text.partition(":")
    endpoint: dict[str, Any] = {"ipv4": address.strip()}
    if colon:
        items = [item.strip() for item in ports.split(",")]
        endpoint["ports"] = [
            int(item) if item.isascii() and item.isdigit() else item for item in items
        ]
    return endpoint


def job_document(
    name: str, traffic_class: str, endpoints: list[str], ttl: str, weight: int | None = None
) -> dict[str, Any]:
    """The request body. ``weight`` only when given: the API's default is the one default,
    and an API from before weights still takes a job that does not ask for one."""
    return {
        "name": name,
        "class": traffic_class,
        "endpoints": [parse_endpoint(text) for text in endpoints],
        "ttl": ttl,
        **({"weight": weight} if weight is not None else {}),
    }


def endpoint_text(endpoint: dict[str, Any]) -> str:
    """An endpoint as ``--endpoint`` takes it: ``10.0.0.0/24:4791,8000-8010``."""
    ports = endpoint.get("ports")
    if not ports:
        return str(endpoint.get("ipv4", "?"))
    return f"{endpoint.get('ipv4', '?')}:{','.join(str(p) for p in ports)}"


def remaining(expires_at: object, now: float) -> str:
    """How long a job has left: ``59m 58s``, ``2h 5m``, ``expired``."""
    if not isinstance(expires_at, int | float):
        return "-"
    seconds = int(expires_at - now)
    if seconds <= 0:
        return "expired"
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (seconds, "s")]
    shown = [f"{value}{unit}" for value, unit in parts if value][:2]
    return " ".join(shown)


def _report_job_failure(
    failure: ApiCallError, name: str, endpoints: list[str], *, as_json: bool
) -> typer.Exit:
    """A refused job, each error next to the ``--endpoint`` it came from."""

    def hint(error: FieldError) -> str:
        if error.path in _OPTION_OF:
            return f" ({_OPTION_OF[error.path]})"
        match = _ENDPOINT_PATH.match(error.path)
        if match and int(match.group(1)) < len(endpoints):
            return f" (--endpoint {endpoints[int(match.group(1))]})"
        return ""

    return report_request_failure(failure, as_json=as_json, what=f"job {name}", hint=hint)


def render_job(body: dict[str, Any]) -> None:
    endpoints = ", ".join(endpoint_text(e) for e in body.get("endpoints", []))
    out.print(
        f"[green]registered[/] job {body['name']}: class {body['class']},"
        f" weight {body.get('weight', 1)}, {endpoints};"
        f" expires at {when(body.get('expires_at'))}"
        f" (in {remaining(body.get('expires_at'), time.time())})",
        highlight=False,
    )


def _job_row(job: dict[str, Any], now: float) -> Row:
    return (
        job["name"],
        job["class"],
        str(job.get("weight", 1)),
        "\n".join(endpoint_text(e) for e in job.get("endpoints", [])),
        when(job.get("created_at")),
        when(job.get("expires_at")),
        remaining(job.get("expires_at"), now),
    )


def render_jobs(body: dict[str, Any], now: float) -> None:
    print_table(
        "jobs",
        ("name", "class", "weight", "endpoints", "registered", "expires", "left"),
        [_job_row(job, now) for job in body.get("jobs", [])],
        empty="no live job",
    )


@app.command()
def add(
    name: Annotated[str, typer.Argument(help="The job's name (as a rule's: letters, digits, _.-)")],
    traffic_class: Annotated[
        str, typer.Option("--class", help="A class of the active policy", show_default=False)
    ],
    endpoints: Annotated[
        list[str],
        typer.Option(
            "--endpoint",
            "-e",
            help="CIDR[:PORTS], e.g. 10.0.0.0/24 or 10.0.0.5:4791,8000-8010; repeat for more",
            show_default=False,
        ),
    ],
    ttl: Annotated[
        str, typer.Option(help="How long it lasts unless added again: 30s, 10m, 1h (at most 168h)")
    ] = "1h",
    weight: Annotated[
        int | None,
        typer.Option(
            help="Its share of the class's bandwidth relative to the class's other jobs,"
            " 1..100 (the API's default: 1)",
            show_default=False,
        ),
    ] = None,
    api: ApiOption = DEFAULT_API,
    as_json: JsonOption = False,
) -> None:
    """Register job NAME, or replace it and restart its TTL.

    Exit 1 if the API refuses it (every error with its path, and the
    --endpoint at fault), or there is no policy yet; 3 if the API or Redis is
    unreachable.
    """
    document = job_document(name, traffic_class, endpoints, ttl, weight)
    try:
        body = ApiClient(api).add_job(document)
    except ApiCallError as failure:
        raise _report_job_failure(failure, name, endpoints, as_json=as_json) from None
    if as_json:
        print_json(body)
    else:
        render_job(body)


@app.command("list")
def list_jobs(api: ApiOption = DEFAULT_API, as_json: JsonOption = False) -> None:
    """List live jobs: class, weight, endpoints, and when each expires."""
    try:
        body = ApiClient(api).jobs()
    except ApiCallError as failure:
        raise report_failure(failure, as_json=as_json) from None
    if as_json:
        print_json(body)
    else:
        render_jobs(body, time.time())


@app.command()
def delete(
    name: Annotated[str, typer.Argument(help="The job to delete")],
    api: ApiOption = DEFAULT_API,
) -> None:
    """Delete job NAME now; its flows fall back to the rules and the default class."""
    try:
        ApiClient(api).delete_job(name)
    except ApiCallError as failure:
        raise _report_job_failure(failure, name, [], as_json=False) from None
    out.print(f"deleted job {name}", highlight=False)
