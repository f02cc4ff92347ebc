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
from controller.cli.render import out
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
    table = Table(title=f"switches ({len(body.get('switches', []))})", title_justify="left")
    for column in ("dpid", "decimal", "links up", "hosts"):
        table.add_column(column, justify="left" if column == "dpid" else "right")
    for dpid in body.get("switches", []):
        up = sum(
            1
            for link in links
            if link.get("usable", True) and (link.get("src") or {}).get("dpid") == dpid
        )
        attached = sum(1 for host in hosts if (host.get("at") or {}).get("dpid") == dpid)
        table.add_row(dpid_text(dpid), str(dpid), str(up), str(attached))
    return table


def _link_table(links: list[dict[str, Any]]) -> Table:
    table = Table(title=f"links ({len(links)} directions)", title_justify="left")
    for column in ("from", "to", "capacity", "rate", "utilisation", "state"):
        table.add_column(column, justify="right" if column in ("capacity", "rate") else "left")
    for link in links:
        table.add_row(
            port_full(link.get("src")),
            port_full(link.get("dst")),
            human_rate(link.get("capacity_bps")),
            human_rate(link.get("tx_bps")),
            utilization_text(link.get("utilization")),
            "up" if link.get("usable", True) else "[yellow]one way only[/]",
        )
    return table


def _host_table(hosts: list[dict[str, Any]]) -> Table:
    table = Table(title=f"hosts ({len(hosts)})", title_justify="left")
    for column in ("mac", "ipv4", "switch", "port"):
        table.add_column(column)
    for host in hosts:
        at = host.get("at") or {}
        table.add_row(
            str(host.get("mac", "?")),
            str(host.get("ipv4") or "-"),
            dpid_text(at.get("dpid")),
            f"{at['name']} ({at.get('port')})" if at.get("name") else str(at.get("port", "?")),
        )
    return table


def pinned_table(pinned: list[dict[str, Any]], now: float) -> Table:
    table = Table(title=f"pinned elephants ({len(pinned)})", title_justify="left")
    for column in ("flow", "class", "rate", "demand", "pinned for", "path"):
        table.add_column(column, justify="right" if column in ("rate", "demand") else "left")
    for flow in pinned:
        since = flow.get("since")
        table.add_row(
            _flow_text(flow),
            str(flow.get("traffic_class", "-")),
            human_rate(flow.get("rate_bps")),
            human_rate(flow.get("demand_bps")),
            human_age(now - since) if isinstance(since, int | float) else "-",
            hops_text(flow.get("path")),
        )
    return table


def render_topology(body: dict[str, Any], now: float) -> None:
    out.print(
        f"fabric of controller [bold]{body.get('controller', '?')}[/],"
        f" {freshness(body.get('updated'), now)}",
        highlight=False,
    )
    out.print(_switch_table(body))
    links = [link for link in body.get("links", []) if isinstance(link, dict)]
    if links:
        out.print(_link_table(links))
    else:
        out.print("no switch-to-switch link discovered (LLDP)")
    hosts = [host for host in body.get("hosts", []) if isinstance(host, dict)]
    if hosts:
        out.print(_host_table(hosts))
    else:
        out.print("no host learned yet (hosts are learned from their first packets)")
    pinned = [flow for flow in body.get("pinned", []) if isinstance(flow, dict)]
    if pinned:
        out.print(pinned_table(pinned, now))
    else:
        out.print("no elephant pinned: every flow follows ECMP hashing")


def _host_line(role: str, host: object) -> str:
    if not isinstance(host, dict):
        return f"{role}: ?"
    address = f"{host.get('ipv4')} ({host.get('mac')})" if host.get("ipv4") else host.get("mac")
    return f"{role}: {address} at switch {port_full(host.get('at'))}"


def render_paths(body: dict[str, Any], now: float) -> None:
    out.print(_host_line("src", body.get("src")), highlight=False)
    out.print(_host_line("dst", body.get("dst")), highlight=False)
    ecmp = [path for path in body.get("ecmp", []) if isinstance(path, list)]
    if not ecmp:
        out.print("[yellow]no path: the two switches are not connected[/]", highlight=False)
    else:
        table = Table(title=f"ECMP paths ({len(ecmp)})", title_justify="left")
        table.add_column("#", justify="right")
        table.add_column("switches")
        table.add_column("output ports")
        for index, path in enumerate(ecmp, start=1):
            switches = " > ".join(
                dpid_text(hop.get("dpid")) for hop in path if isinstance(hop, dict)
            )
            table.add_row(str(index), switches, hops_text(path))
        out.print(table)
    pinned = [flow for flow in body.get("pinned", []) if isinstance(flow, dict)]
    if pinned:
        out.print(pinned_table(pinned, now))
    else:
        out.print("no elephant between them is pinned: their flows follow ECMP hashing")


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
