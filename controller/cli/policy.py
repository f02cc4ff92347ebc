"""``flowlane policy``: work with policy documents."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from controller.cli.render import out, print_policy_error
from controller.pipeline.planner import plan_switch
from controller.policy.errors import PolicyError
from controller.policy.load import load_policy_file
from controller.policy.units import format_rate
from controller.qos.plan import plan_port_qos

app = typer.Typer(help="Validate and inspect policy documents.", no_args_is_help=True)


@app.command()
def validate(
    file: Annotated[Path, typer.Argument(help="Policy YAML file", show_default=False)],
) -> None:
    """Check a policy file; print every error with its field path, exit 1 if any."""
    try:
        policy = load_policy_file(file)
    except PolicyError as exc:
        print_policy_error(exc)
        raise typer.Exit(1) from None
    plan = plan_switch(policy, {})
    table = Table(title=f"{file}: valid", title_justify="left")
    for column in ("class", "queue", "priority", "dscp", "min", "max", "on a port of"):
        table.add_column(column)
    port = plan_port_qos(policy, "(default)", None)
    for queue in port.queues:
        table.add_row(
            queue.class_name,
            str(queue.queue_id),
            str(queue.priority),
            str(queue.dscp),
            format_rate(queue.min_bps),
            format_rate(queue.max_bps),
            format_rate(port.rate_bps),
        )
    out.print(table)
    out.print(
        f"{len(policy.rules)} rules, default class {policy.default_class!r},"
        f" {len(plan.flows)} OpenFlow entries per switch"
    )
