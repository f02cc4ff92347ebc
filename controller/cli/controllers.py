"""``flowlane controllers``: the controller instances sharing the store, from
``GET /v1/controllers`` — whose lease is current, what each masters, its last takeover.

Rendering is a pure function of the API's JSON and the time, tested without a terminal.
"""

from __future__ import annotations

import time
from typing import Any

from controller.cli.credentials import ApiCallError
from controller.cli.flows import human_age
from controller.cli.remote import (
    DEFAULT_API,
    ApiClient,
    ApiOption,
    JsonOption,
    print_json,
    report_failure,
)
from controller.cli.render import Row, out, print_table


def _seconds(value: object) -> str:
    return f"{value:.1f}s" if isinstance(value, int | float) else "-"


def _masters(controller: dict[str, Any]) -> str:
    masters = controller.get("masters", [])
    if not masters:
        return "-"
    return ", ".join(f"{m['dpid'].lstrip('0') or '0'} (gen {m['generation']})" for m in masters)


def _takeover(takeover: object, now: float) -> str:
    if not isinstance(takeover, dict):
        return "-"
    dpid = str(takeover.get("dpid", "?")).lstrip("0") or "0"
    ago = human_age(now - float(takeover.get("at", now)))
    return f"{dpid} from {takeover.get('previous')} {ago} ago"


def _controller_row(controller: dict[str, Any], now: float) -> Row:
    alive = controller.get("alive")
    registered = controller.get("registered_at")
    return (
        str(controller["id"]),
        "[green]live[/]" if alive else "[red]expired[/]",
        f"{_seconds(controller.get('lease_age_s'))} ago" if alive else "-",
        _seconds(controller.get("lease_expires_in_s")),
        human_age(now - registered) if isinstance(registered, int | float) else "-",
        str(len(controller.get("connected", []))),
        _masters(controller),
        _takeover(controller.get("last_takeover"), now),
    )


def render_controllers(body: dict[str, Any], now: float) -> None:
    controllers = body.get("controllers", [])
    print_table(
        "controllers",
        (
            "instance",
            "lease",
            "renewed",
            "expires in",
            "up",
            "connected",
            "masters",
            "last takeover",
        ),
        [_controller_row(controller, now) for controller in controllers],
        empty="no controller instance in the store (none runs with Redis, or all stopped)",
    )
    unmastered = body.get("unmastered", [])
    if controllers and unmastered:
        out.print(
            f"[yellow]no live master[/] for {len(unmastered)} connected switch(es):"
            f" {', '.join(unmastered)} (taken at the next renewal once a lease expires)"
        )


def controllers(api: ApiOption = DEFAULT_API, as_json: JsonOption = False) -> None:
    """List the controller instances sharing the store: lease, switches each masters
    (with generation ids), last takeover; and the connected switches with no live master."""
    try:
        body = ApiClient(api).request("GET", "/v1/controllers")
    except ApiCallError as failure:
        raise report_failure(failure, as_json=as_json) from None
    if as_json:
        print_json(body)
    else:
        render_controllers(body, time.time())
