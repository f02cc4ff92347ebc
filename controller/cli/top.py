"""``flowlane top``: a live view of switches, port queues by class, and the top flows.

One refresh is three reads of the API (switches, each switch's queues, the
largest flows); ``top_view`` turns them into plain rows and ``render_top``
into rich tables, both pure, so they are tested without a terminal. The
loop redraws in place every ``--interval`` (plain text over SSH works: rich
falls back to redrawing below when the terminal cannot move the cursor).
``--once`` prints one view; with ``--json`` it prints the rows instead.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated, Any, Final

import typer
from pydantic import TypeAdapter
from rich.console import Group
from rich.live import Live

from controller.classify.records import FLOW_RECORDS, FlowRecord
from controller.cli.credentials import ApiCallError
from controller.cli.flows import five_tuple, human_bytes, human_rate
from controller.cli.remote import (
    DEFAULT_API,
    ApiClient,
    ApiOption,
    JsonOption,
    print_json,
    report_request_failure,
)
from controller.cli.render import Row, out, table
from controller.qos.records import QueueStats

TOP_FLOWS = 10


QUEUE_COLUMNS: Final = (
    "port",
    "traffic_class",
    "rate_bps",
    "min_bps",
    "drops",
    "backlog_bytes",
    "backlog_packets",
)
"""What ``--json`` shows of each queue, after its switch (the table's columns)."""

FLOW_COLUMNS: Final = ("traffic_class", "why", "rate_bps", "bytes")
"""What ``--json`` shows of each flow, after its switch and 5-tuple."""

_QUEUES: TypeAdapter[list[QueueStats]] = TypeAdapter(list[QueueStats])


@dataclass(frozen=True, slots=True)
class QueueRow:
    """One port queue of the view: the API's record, and the switch it is on."""

    switch: str
    queue: QueueStats

    def to_dict(self) -> dict[str, Any]:
        return {
            "switch": self.switch,
            **{name: getattr(self.queue, name) for name in QUEUE_COLUMNS},
        }


def flow_row(flow: FlowRecord) -> dict[str, Any]:
    """One flow of the view as ``--json`` shows it."""
    return {
        "switch": flow.switch,
        "flow": five_tuple(flow),
        **{name: getattr(flow, name) for name in FLOW_COLUMNS},
    }


@dataclass(frozen=True, slots=True)
class TopView:
    active_version: int | None
    switches: list[dict[str, Any]]
    queues: list[QueueRow]
    flows: list[FlowRecord]
    """The fastest flows, as the API's records."""
    missing_queues: list[str]
    """Switches whose controller publishes no queue telemetry (remote, or --no-qos)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "active_version": self.active_version,
            "switches": self.switches,
            "queues": [row.to_dict() for row in self.queues],
            "flows": [flow_row(flow) for flow in self.flows],
            "missing_queues": self.missing_queues,
        }


def top_view(
    switches: dict[str, Any],
    queues: dict[str, dict[str, Any] | None],
    flows: dict[str, Any],
    top: int = TOP_FLOWS,
) -> TopView:
    """The view of one refresh, from the API's answers (queues: dpid → answer, or None),
    read into the API's own records (a malformed answer raises pydantic's ValidationError)."""
    reported = switches.get("switches", [])
    summary = [
        {
            "dpid": s.get("dpid"),
            "applied_version": s.get("applied_version"),
            "ports": len(s.get("ports", [])),
            "flows": s.get("flow_count"),
            "datapath": s.get("datapath_type"),
        }
        for s in reported
    ]
    rows: list[QueueRow] = []
    missing = []
    for dpid, answer in queues.items():
        if answer is None:
            missing.append(dpid)
            continue
        rows.extend(QueueRow(dpid, queue) for queue in _QUEUES.validate_python(answer["queues"]))
    by_rate = sorted(
        FLOW_RECORDS.validate_python(flows.get("flows", [])),
        key=lambda f: (-(f.rate_bps or 0.0), -f.bytes),
    )
    return TopView(switches.get("active_version"), summary, rows, by_rate[:top], sorted(missing))


def _queue_row(row: QueueRow) -> Row:
    q = row.queue
    backlog = f"{human_bytes(q.backlog_bytes)} / {q.backlog_packets}p" if q.backlog_packets else "-"
    return (
        row.switch,
        q.port,
        q.traffic_class,
        human_rate(q.rate_bps),
        human_rate(q.min_bps),
        f"[red]{q.drops}[/]" if q.drops else "0",
        backlog,
    )


def render_top(view: TopView, at: float) -> Group:
    stamp = time.strftime("%H:%M:%S", time.localtime(at))
    switches = table(
        f"flowlane top  {stamp}  active version {view.active_version or '-'}",
        ("switch", "applied", "datapath", "ports", "flows"),
        [
            (
                str(s["dpid"]),
                str(s["applied_version"] if s["applied_version"] is not None else "-"),
                str(s["datapath"] or "-"),
                str(s["ports"]),
                str(s["flows"]),
            )
            for s in view.switches
        ],
    )
    queues = table(
        "queues by port and class",
        ("switch", "port", "class", "rate", "guarantee", "drops", "backlog"),
        [_queue_row(row) for row in view.queues],
        right=("rate", "guarantee", "drops", "backlog"),
    )
    flows = table(
        f"top {len(view.flows)} flows by rate",
        ("switch", "flow", "class", "why", "rate", "bytes"),
        [
            (
                f.switch,
                five_tuple(f),
                f.traffic_class,
                f.why,
                human_rate(f.rate_bps),
                human_bytes(f.bytes),
            )
            for f in view.flows
        ],
        right=("rate", "bytes"),
    )
    parts: list[Any] = [switches, queues, flows]
    if view.missing_queues:
        parts.append(f"no queue telemetry from {', '.join(view.missing_queues)}")
    return Group(*parts)


def read_view(client: ApiClient) -> TopView:
    switches = client.switches()
    queues: dict[str, dict[str, Any] | None] = {}
    for switch in switches.get("switches", []):
        dpid = str(switch["dpid"])
        try:
            queues[dpid] = client.queues(dpid)
        except ApiCallError as failure:
            if failure.status != 404:
                raise
            queues[dpid] = None
    flows = client.flows({"limit": 1000})
    return top_view(switches, queues, flows)


def top(
    api: ApiOption = DEFAULT_API,
    interval: Annotated[float, typer.Option(min=0.2, help="Seconds between refreshes")] = 1.0,
    once: Annotated[bool, typer.Option(help="Print one view and exit")] = False,
    as_json: JsonOption = False,
) -> None:
    """A live view: switches, every port queue by class (rate, guarantee, drops, backlog), and
    the top flows by rate with their class and why. Ctrl-C ends it."""
    client = ApiClient(api)
    try:
        if once or as_json:
            view = read_view(client)
            if as_json:
                print_json(view.to_dict())
            else:
                out.print(render_top(view, time.time()))
            return
        with Live(console=out, auto_refresh=False, screen=False) as live:
            while True:
                live.update(render_top(read_view(client), time.time()), refresh=True)
                time.sleep(interval)
    except ApiCallError as failure:
        raise report_request_failure(failure, as_json=as_json, what="read") from None
    except KeyboardInterrupt:
        return
