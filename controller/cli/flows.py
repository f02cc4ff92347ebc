"""``flowlane flows`` and ``flowlane events``: what the fabric carries, and what happened.

``flows`` is one read of ``GET /v1/flows``.  ``events`` reads
``GET /v1/events`` once, or with ``--follow`` keeps polling from the last id
it saw, like ``tail -f``, until Ctrl-C (which is a normal end: exit 0).
Rendering is pure functions of the API's JSON, so it is tested without a
terminal.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Annotated, Any

import typer

from controller.classify.records import FLOW_RECORDS, FlowRecord
from controller.cli.credentials import ApiCallError
from controller.cli.remote import (
    DEFAULT_API,
    ApiClient,
    ApiOption,
    JsonOption,
    print_json,
    report_request_failure,
    when,
)
from controller.cli.render import out, print_table, version_note

POLL_INTERVAL_S = 0.5
_PROTOCOLS = {1: "icmp", 6: "tcp", 17: "udp", 58: "icmpv6"}
_IP_ETH_TYPES = (0x0800, 0x86DD)

sleep: Callable[[float], None] = time.sleep
"""What ``--follow`` waits with between polls; tests replace it."""


# --------------------------------------------------------------------------------------------
# flows
# --------------------------------------------------------------------------------------------


def _scaled(value: float, units: tuple[str, ...], step: int = 1000) -> str:
    for unit in units[:-1]:
        if abs(value) < step:
            return f"{value:.3g}{unit}"
        value /= step
    return f"{value:.3g}{units[-1]}"


def human_bytes(count: object) -> str:
    """``1.5KB``, ``9MB``: decimal, three significant digits (a table, not an invoice)."""
    if not isinstance(count, int | float):
        return "-"
    return _scaled(float(count), ("B", "KB", "MB", "GB", "TB", "PB"))


def human_rate(bps: object) -> str:
    if not isinstance(bps, int | float):
        return "-"
    return _scaled(float(bps), ("bit/s", "Kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"))


def human_age(seconds: float) -> str:
    """``45s``, ``3m 12s``, ``2h 5m``: two units at most."""
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole}s"
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    first = next(i for i, (value, _) in enumerate(parts) if value)
    return " ".join(f"{value}{unit}" for value, unit in parts[first : first + 2] if value)


def _end(address: object, port: object, with_port: bool, ipv6: bool) -> str:
    if not with_port:
        return str(address)
    return f"[{address}]:{port}" if ipv6 else f"{address}:{port}"


def five_tuple(flow: FlowRecord) -> str:
    """``tcp 10.0.0.1:40000 -> 10.0.0.2:8000``; ports only where the protocol has them."""
    eth_type, proto = flow.eth_type, flow.ip_proto
    if eth_type not in _IP_ETH_TYPES:
        name = f"eth 0x{eth_type:04x}"
    else:
        name = _PROTOCOLS.get(proto, f"proto {proto}")
    with_port = eth_type in _IP_ETH_TYPES and proto in (6, 17)
    ipv6 = eth_type == 0x86DD
    src = _end(flow.src, flow.src_port, with_port, ipv6)
    dst = _end(flow.dst, flow.dst_port, with_port, ipv6)
    return f"{name} {src} -> {dst}"


def render_flows(body: dict[str, Any], now: float) -> None:
    """The API's answer as a table, read into the API's own records (``FlowRecord``)."""
    flows = FLOW_RECORDS.validate_python(body.get("flows", []))
    print_table(
        f"flows ({len(flows)}, largest first)",
        ("switch", "flow", "class", "why", "bytes", "rate", "age"),
        [
            (
                flow.switch,
                five_tuple(flow),
                flow.traffic_class,
                flow.why,
                human_bytes(flow.bytes),
                human_rate(flow.rate_bps),
                human_age(now - flow.first_seen),
            )
            for flow in flows
        ],
        empty="no tracked flow matches (only switches of live controllers are shown)",
        right=("bytes", "rate", "age"),
    )


def flows(
    traffic_class: Annotated[
        str | None, typer.Option("--class", help="Only flows of this class", show_default=False)
    ] = None,
    switch: Annotated[
        str | None,
        typer.Option(
            help="Only this switch: dpid in hex (000000000000002a, 0x2a, 2a) or decimal (42)",
            show_default=False,
        ),
    ] = None,
    min_bytes: Annotated[
        int, typer.Option("--min-bytes", min=0, help="Only flows that sent at least this much")
    ] = 0,
    limit: Annotated[
        int, typer.Option(min=1, max=100_000, help="At most this many flows, largest first")
    ] = 1000,
    api: ApiOption = DEFAULT_API,
    as_json: JsonOption = False,
) -> None:
    """List tracked flows, largest first: switch, 5-tuple, class, why, bytes, rate, age."""
    params: dict[str, str | int] = {"min_bytes": min_bytes, "limit": limit}
    if traffic_class is not None:
        params["class"] = traffic_class
    if switch is not None:
        params["switch"] = switch
    try:
        body = ApiClient(api).flows(params)
    except ApiCallError as failure:
        raise report_request_failure(failure, as_json=as_json, what="query") from None
    if as_json:
        print_json(body)
        return
    render_flows(body, time.time())
    if not body.get("flows"):
        _say_if_detection_is_off(api)


def _say_if_detection_is_off(api: str) -> None:
    """No flow at all is what a policy without detection shows: say why, not just "none"."""
    try:
        active = ApiClient(api).get_policy()
    except ApiCallError:
        return  # the flows answered; a hint that cannot be had is no error
    document = active.get("policy") if isinstance(active, dict) else None
    if isinstance(document, dict) and document.get("detection") is None:
        out.print(
            f"detection is off in the active policy (version {active.get('version')}):"
            " no flow is counted, so none is tracked; add a detection section to see them",
            highlight=False,
        )


# --------------------------------------------------------------------------------------------
# events
# --------------------------------------------------------------------------------------------

_BASE_FIELDS = ("id", "kind", "time")


def _value(value: object) -> str:
    """A field as people read it: ``0.546`` rather than ``0.5460000000000491``."""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _rest(event: dict[str, Any], skip: tuple[str, ...] = ()) -> str:
    return " ".join(
        f"{key}={_value(value)}"
        for key, value in event.items()
        if key not in (*_BASE_FIELDS, *skip)
    )


def _job_endpoints(endpoints: object) -> str:
    if not isinstance(endpoints, list):
        return ""
    shown = []
    for endpoint in endpoints:
        if isinstance(endpoint, dict):
            ports = endpoint.get("ports")
            suffix = f":{','.join(str(p) for p in ports)}" if isinstance(ports, list) else ""
            shown.append(f"{endpoint.get('ipv4')}{suffix}")
    return ", ".join(shown)


def event_summary(event: dict[str, Any]) -> str:
    """One line about an event; kinds this CLI does not know show their fields as key=value."""
    from controller.fabric.snapshot import describe_event  # the fabric model: only here

    kind = event.get("kind")
    fabric = describe_event(str(kind), event)
    if fabric is not None:
        return fabric
    if kind == "policy":
        return f"version {event.get('version')} by {event.get('author')}" + version_note(
            event.get("rollback_of"), event.get("comment")
        )
    if kind == "job":
        line = f"{event.get('name')} {event.get('op')}"
        if event.get("op") == "registered":
            line += f": class {event.get('class')}, {_job_endpoints(event.get('endpoints'))}"
        return line
    if kind == "reclassified":
        line = (
            f"switch {event.get('switch')} {event.get('flow')}:"
            f" {event.get('from')} -> {event.get('to')}"
        )
        details = _rest(event, ("switch", "flow", "from", "to"))
        return f"{line} ({details})" if details else line
    return _rest(event)


def event_line(event: dict[str, Any]) -> str:
    return f"{when(event.get('time'))}  {event.get('kind', '?'):<12}  {event_summary(event)}"


def _print_events(
    events: list[dict[str, Any]],
    as_json: bool,
    line: Callable[[dict[str, Any]], str] = event_line,
) -> None:
    for event in events:
        if as_json:
            typer.echo(json.dumps(event, separators=(",", ":")))
        else:
            out.print(line(event), highlight=False, soft_wrap=True)


def follow_stream(
    read: Callable[[dict[str, str | int]], Any],
    params: dict[str, str | int],
    *,
    limit: int,
    as_json: bool,
    interval_s: float,
    max_polls: int | None,
    line: Callable[[dict[str, Any]], str] = event_line,
) -> None:
    """Poll a stream route (events, audit) from the last id seen; a full page is followed at
    once, a short one after a pause."""
    polls = 0
    while True:
        body = read(params)
        polls += 1
        events = body.get("events", [])
        _print_events(events, as_json, line)
        if body.get("last_id"):
            params["since"] = body["last_id"]
        if max_polls is not None and polls >= max_polls:
            return
        if len(events) < limit:
            sleep(interval_s)


def events(
    since: Annotated[
        str | None,
        typer.Option(help="Only events after this id (an event's id, or a last id)"),
    ] = None,
    kind: Annotated[
        str | None,
        typer.Option(
            help="Only this kind: policy, job, reclassified, link, host, placement, reroute",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Events per request")] = 100,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new events until Ctrl-C")
    ] = False,
    api: ApiOption = DEFAULT_API,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print the API's JSON (with --follow: one event per line, as JSON)"
        ),
    ] = False,
    interval: Annotated[float, typer.Option(min=0.0, hidden=True)] = POLL_INTERVAL_S,
    max_polls: Annotated[int | None, typer.Option(min=1, hidden=True)] = None,
) -> None:
    """Print events oldest first: policy versions, jobs, reclassifications, fabric changes.

    With --follow, keep polling (every 0.5 s) from the last event seen and
    print new ones as they come, until Ctrl-C.
    """
    client = ApiClient(api)
    params: dict[str, str | int] = {"limit": limit}
    if since is not None:
        params["since"] = since
    if kind is not None:
        params["kind"] = kind
    try:
        if follow:
            follow_stream(
                client.events,
                params,
                limit=limit,
                as_json=as_json,
                interval_s=interval,
                max_polls=max_polls,
            )
            return
        body = client.events(params)
    except ApiCallError as failure:
        raise report_request_failure(failure, as_json=as_json, what="query") from None
    except KeyboardInterrupt:
        raise typer.Exit(0) from None
    if as_json:
        print_json(body)
        return
    found = body.get("events", [])
    if not found:
        out.print("no events" + (f" after {since}" if since else ""), highlight=False)
        return
    _print_events(found, as_json=False)
    if len(found) == limit:
        out.print(
            f"(more may follow: flowlane events --since {body.get('last_id')})", highlight=False
        )
