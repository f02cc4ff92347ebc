"""``flowlane topology`` and ``flowlane paths``: the fabric as its controller sees it.

Both are one read of the API (``GET /v1/topology``, ``GET /v1/paths``).
Rendering is pure functions of the API's JSON, so it is tested without a
terminal; ports show by name (``s1-eth3``) where the controller knows it.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from rich.table import Table

from controller.cli.credentials import ApiCallError
from controller.cli.flows import human_age, human_rate
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
from controller.cli.render import Row, out, print_table, table
from controller.policy.errors import FieldError

STALE_AFTER_S = 30.0
"""A snapshot older than this is flagged: its controller has likely stopped or lost Redis."""


def dpid_text(dpid: object) -> str:
    return f"{dpid:016x}" if isinstance(dpid, int) else "?"


def port_text(port: object) -> str:
    """``s1-eth3`` where the name is known, else ``<dpid hex>:<port>``."""
    if not isinstance(port, dict):
        return "?"
    if port.get("name"):
        return str(port["name"])
    return f"{dpid_text(port.get('dpid'))}:{port.get('port')}"


def port_full(port: object) -> str:
    """``s1-eth3 (000000000000001:3)``: the name and where it is."""
    if not isinstance(port, dict):
        return "?"
    where = f"{dpid_text(port.get('dpid'))}:{port.get('port')}"
    return f"{port['name']} ({where})" if port.get("name") else where


def hops_text(path: object) -> str:
    if not isinstance(path, list) or not path:
        return "-"
    return " > ".join(port_text(hop) for hop in path)


def utilization_text(value: object) -> str:
    if not isinstance(value, int | float):
        return "-"
    percent = value * 100
    text = f"{percent:.1f}%"
    if value >= 0.9:
        return f"[red]{text}[/]"
    if value >= 0.7:
        return f"[yellow]{text}[/]"
    return text


def _flow_text(pinned: dict[str, Any]) -> str:
    return (
        f"{pinned.get('protocol', '?')} {pinned.get('src')}:{pinned.get('src_port')}"
        f" -> {pinned.get('dst')}:{pinned.get('dst_port')}"
    )


def freshness(updated: object, now: float) -> str:
    if not isinstance(updated, int | float):
        return "updated: unknown"
    age = now - updated
    line = f"updated {when(updated)} ({human_age(age)} ago)"
    if age > STALE_AFTER_S:
        line += " [yellow]stale: is its controller running?[/]"
    return line


def _switch_table(body: dict[str, Any]) -> Table:
    links = [link for link in body.get("links", []) if isinstance(link, dict)]
    hosts = [host for host in body.get("hosts", []) if isinstance(host, dict)]

    def row(dpid: object) -> Row:
        up = sum(
            1
            for link in links
            if link.get("usable", True) and (link.get("src") or {}).get("dpid") == dpid
        )
        attached = sum(1 for host in hosts if (host.get("at") or {}).get("dpid") == dpid)
        return dpid_text(dpid), str(dpid), str(up), str(attached)

    switches = body.get("switches", [])
    return table(
        f"switches ({len(switches)})",
        ("dpid", "decimal", "links up", "hosts"),
        [row(dpid) for dpid in switches],
        right=("decimal", "links up", "hosts"),
    )


def _link_row(link: dict[str, Any]) -> Row:
    return (
        port_full(link.get("src")),
        port_full(link.get("dst")),
        human_rate(link.get("capacity_bps")),
        human_rate(link.get("tx_bps")),
        utilization_text(link.get("utilization")),
        "up" if link.get("usable", True) else "[yellow]one way only[/]",
    )


def _host_row(host: dict[str, Any]) -> Row:
    at = host.get("at") or {}
    return (
        str(host.get("mac", "?")),
        str(host.get("ipv4") or "-"),
        dpid_text(at.get("dpid")),
        f"{at['name']} ({at.get('port')})" if at.get("name") else str(at.get("port", "?")),
    )


def _pinned_row(flow: dict[str, Any], now: float) -> Row:
    since = flow.get("since")
    return (
        _flow_text(flow),
        str(flow.get("traffic_class", "-")),
        human_rate(flow.get("rate_bps")),
        human_rate(flow.get("demand_bps")),
        human_age(now - since) if isinstance(since, int | float) else "-",
        hops_text(flow.get("path")),
    )


def _dicts(body: dict[str, Any], key: str) -> list[dict[str, Any]]:
    return [item for item in body.get(key, []) if isinstance(item, dict)]


def print_pinned(body: dict[str, Any], now: float, *, empty: str) -> None:
    pinned = _dicts(body, "pinned")
    print_table(
        f"pinned elephants ({len(pinned)})",
        ("flow", "class", "rate", "demand", "pinned for", "path"),
        [_pinned_row(flow, now) for flow in pinned],
        empty=empty,
        right=("rate", "demand"),
    )


def render_topology(body: dict[str, Any], now: float) -> None:
    out.print(
        f"fabric of controller [bold]{body.get('controller', '?')}[/],"
        f" {freshness(body.get('updated'), now)}",
        highlight=False,
    )
    out.print(_switch_table(body))
    links = _dicts(body, "links")
    print_table(
        f"links ({len(links)} directions)",
        ("from", "to", "capacity", "rate", "utilisation", "state"),
        [_link_row(link) for link in links],
        empty="no switch-to-switch link discovered (LLDP)",
        right=("capacity", "rate"),
    )
    hosts = _dicts(body, "hosts")
    print_table(
        f"hosts ({len(hosts)})",
        ("mac", "ipv4", "switch", "port"),
        [_host_row(host) for host in hosts],
        empty="no host learned yet (hosts are learned from their first packets)",
    )
    print_pinned(body, now, empty="no elephant pinned: every flow follows ECMP hashing")


def _host_line(role: str, host: object) -> str:
    if not isinstance(host, dict):
        return f"{role}: ?"
    address = f"{host.get('ipv4')} ({host.get('mac')})" if host.get("ipv4") else host.get("mac")
    return f"{role}: {address} at switch {port_full(host.get('at'))}"


def _ecmp_row(index: int, path: list[Any]) -> Row:
    switches = " > ".join(dpid_text(hop.get("dpid")) for hop in path if isinstance(hop, dict))
    return str(index), switches, hops_text(path)


def render_paths(body: dict[str, Any], now: float) -> None:
    out.print(_host_line("src", body.get("src")), highlight=False)
    out.print(_host_line("dst", body.get("dst")), highlight=False)
    ecmp = [path for path in body.get("ecmp", []) if isinstance(path, list)]
    print_table(
        f"ECMP paths ({len(ecmp)})",
        ("#", "switches", "output ports"),
        [_ecmp_row(index, path) for index, path in enumerate(ecmp, start=1)],
        empty="[yellow]no path: the two switches are not connected[/]",
        right=("#",),
        highlight=False,
    )
    print_pinned(
        body, now, empty="no elephant between them is pinned: their flows follow ECMP hashing"
    )


def topology(api: ApiOption = DEFAULT_API, as_json: JsonOption = False) -> None:
    """Show the fabric: switches, links (capacity, rate, utilisation), hosts, pinned flows."""
    try:
        body = ApiClient(api).request("GET", "/v1/topology")
    except ApiCallError as failure:
        raise report_failure(failure, as_json=as_json) from None
    if as_json:
        print_json(body)
    else:
        render_topology(body, time.time())


def _argument_hint(error: FieldError) -> str:
    return {"query.src": " (SRC)", "query.dst": " (DST)"}.get(error.path, "")


def paths(
    src: Annotated[
        str, typer.Argument(help="The source host: IPv4 (10.0.0.1) or MAC", show_default=False)
    ],
    dst: Annotated[
        str,
        typer.Argument(help="The destination host: IPv4 (10.0.0.2) or MAC", show_default=False),
    ],
    api: ApiOption = DEFAULT_API,
    as_json: JsonOption = False,
) -> None:
    """Show every shortest path between two hosts (ECMP) and the elephants pinned between them."""
    try:
        body = ApiClient(api).request("GET", "/v1/paths", params={"src": src, "dst": dst})
    except ApiCallError as failure:
        raise report_request_failure(
            failure, as_json=as_json, what="query", hint=_argument_hint
        ) from None
    if as_json:
        print_json(body)
    else:
        render_paths(body, time.time())
