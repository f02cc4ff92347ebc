"""``flowlane policy``: validate policy files, and manage the versioned policy through the API.

``validate`` works on a file alone.  ``show``, ``apply``, ``plan``, ``history``
and ``rollback`` talk to the REST API (``flowlane api``): the API validates,
stores and versions; the controllers apply.  A file is read and parsed as YAML
here, then sent as JSON, so the errors about its content come from the API,
the one judge of what is valid, with the same paths ``validate`` prints.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from controller.cli.credentials import EXIT_NOT_APPLIED, ApiCallError
from controller.cli.groups import HintingGroup
from controller.cli.remote import (
    DEFAULT_API,
    ApiClient,
    ApiOption,
    JsonOption,
    WriteOptions,
    print_json,
    rate,
    report_failure,
    when,
)
from controller.cli.render import (
    Row,
    err,
    out,
    plain,
    print_policy_error,
    print_table,
    safe,
    table,
    version_note,
)
from controller.policy.errors import PolicyError
from controller.policy.units import format_rate

if TYPE_CHECKING:  # the model loads with the planner, in the commands that need it
    from controller.policy.model import Policy

app = typer.Typer(
    help="Validate policy files; show, apply, plan and roll back the policy through the API.",
    no_args_is_help=True,
    cls=HintingGroup,
)

FileArgument = Annotated[Path, typer.Argument(help="Policy YAML file", show_default=False)]
CommentOption = Annotated[str, typer.Option(help="Why; shown in the history")]
WaitOption = Annotated[
    bool,
    typer.Option(
        "--wait/--store-only",
        " /--no-wait",
        help="Return once every live switch runs the version, and fail when no switch is live;"
        " --store-only (or --no-wait) stores it and returns",
    ),
]
TimeoutOption = Annotated[
    float, typer.Option(min=0.001, help="Seconds to wait for the switches (with --wait)")
]


@app.command()
def default() -> None:
    """Print the shipped default policy (commented YAML), e.g. to start a policy file from."""
    from controller.policy.load import default_policy_path

    sys.stdout.write(default_policy_path().read_text(encoding="utf-8"))


@app.command()
def validate(file: FileArgument) -> None:
    """Check a policy file; print every error with its field path, exit 1 if any."""
    # The model, planner and queue planner load here, not at import: most policy
    # commands only talk to the API and should not pay for them.
    from controller.pipeline.planner import plan_switch
    from controller.policy.load import load_policy_file
    from controller.policy.warnings import policy_warnings
    from controller.qos.plan import plan_port_qos

    try:
        policy = load_policy_file(file)
    except PolicyError as exc:
        print_policy_error(exc)
        raise typer.Exit(1) from None
    plan = plan_switch(policy, {})
    port = plan_port_qos(policy, "(default)", None)
    out.print(
        table(
            f"{file}: valid",
            ("class", "queue", "priority", "dscp", "min", "max", "on a port of"),
            [
                (
                    queue.class_name,
                    str(queue.queue_id),
                    str(queue.priority),
                    str(queue.dscp),
                    format_rate(queue.min_bps),
                    format_rate(queue.max_bps),
                    format_rate(port.rate_bps),
                )
                for queue in port.queues
            ],
        )
    )
    out.print(
        f"{len(policy.rules)} rules, default class {policy.default_class!r},"
        f" {entries_text(policy, len(plan.flows))}",
        highlight=False,
    )
    for warning in policy_warnings(policy):  # valid, but some setting will never act
        out.print(f"[yellow]warning:[/] {warning}", highlight=False)


def entries_text(policy: Policy, planned: int) -> str:
    """What the ``planned`` entries of a switch are made of, so the count can be told from the
    rule-entry count of ``policy plan`` (the rules' part only, and an upper bound)."""
    from controller.pipeline.planner import forwarding_flows, learning_flows, marking_flows
    from controller.policy.limits import rule_entries

    parts = {
        "the rules": 0,
        "the default class": 1,
        "detection (flow counting)": len(learning_flows(policy)),
        "DSCP marking (3 per class)": len(marking_flows(policy)),
        "forwarding": len(forwarding_flows()),
    }
    parts["the rules"] = planned - sum(parts.values())
    shown = ", ".join(f"{count} for {what}" for what, count in parts.items() if count)
    line = f"{planned} OpenFlow entries per switch: {shown}"
    if policy.forwarding.fabric:
        line += " (in fabric mode, more to forward: per discovered link and host)"
    return (
        f"{line}. `policy plan` counts the rules' entries alone, as an upper bound:"
        f" {rule_entries(policy.rules)} (every match and its mirror, before identical mirrors"
        " are merged; with the rules on an in_port, which a switch without that port skips)"
    )


# --------------------------------------------------------------------------------------------
# Reading a file for the API
# --------------------------------------------------------------------------------------------


def read_document(path: Path) -> object:
    """The YAML document in ``path``, unvalidated; file and YAML problems as ``PolicyError``."""
    from controller.policy.load import read_document_file

    return read_document_file(path)


def _document_or_exit(path: Path) -> object:
    try:
        return read_document(path)
    except PolicyError as exc:
        print_policy_error(exc)
        raise typer.Exit(1) from None


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------


def _match_text(match: object) -> str:
    if not isinstance(match, dict) or not match:
        return "any"
    parts = []
    for name, value in match.items():
        shown = ",".join(str(v) for v in value) if isinstance(value, list) else str(value)
        parts.append(f"{name}={shown}")
    return " ".join(parts)


def _version_line(body: dict[str, Any]) -> str:
    author = safe(body["author"])  # the line is printed as markup
    line = f"policy version {body['version']} by {author} at {when(body['created_at'])}"
    return line + version_note(body.get("rollback_of"), body.get("comment"))


def _class_row(queue: int, name: object, spec: object) -> Row:
    spec = spec if isinstance(spec, dict) else {}
    return (
        str(name),
        str(queue),
        str(spec.get("priority", "-")),
        str(spec.get("dscp", "-")),
        str(spec.get("min_rate", "-")),
        str(spec.get("max_rate", "port rate")),
        str(spec.get("share", "per-flow")),
    )


def _rule_row(index: int, rule: object) -> Row:
    rule = rule if isinstance(rule, dict) else {}
    return (
        str(index),
        str(rule.get("name", "")),
        _match_text(rule.get("match")),
        str(rule.get("class", "")),
        "yes" if rule.get("bidirectional", True) else "no",
    )


def render_policy(body: dict[str, Any]) -> None:
    document = body.get("policy", {})
    out.print(f"[bold]{_version_line(body)}[/]", highlight=False)
    classes = dict(document.get("classes", {})).items()
    out.print(
        table(
            "classes",
            ("class", "queue", "priority", "dscp", "min", "max", "share"),
            [_class_row(queue, name, spec) for queue, (name, spec) in enumerate(classes)],
        )
    )
    out.print(
        table(
            f"rules (default class {document.get('default_class')})",
            ("#", "name", "match", "class", "both ways"),
            [_rule_row(index, rule) for index, rule in enumerate(document.get("rules", []))],
        )
    )
    ports = document.get("ports", {}) if isinstance(document.get("ports"), dict) else {}
    overrides = ports.get("overrides") or {}
    line = f"ports: {ports.get('rate', '10Gbit')}"
    if overrides:
        line += "; " + ", ".join(f"{name} {value}" for name, value in overrides.items())
    out.print(line, highlight=False)
    for section_line in other_sections(document):
        out.print(section_line, highlight=False, soft_wrap=True)
    _print_applied(body)


_SHOWN_ABOVE = ("classes", "default_class", "rules", "ports")
_WHEN_ABSENT = {
    "detection": "detection: none (no flow is counted, so no elephant is found or moved)",
    "forwarding": "forwarding: normal (the default: each switch forwards on its own, OVS NORMAL)",
}


def _inline(value: object) -> str:
    """A value as YAML's flow style writes it: ``{rate: 10%, class: training}``."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {_inline(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_inline(item) for item in value) + "]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def other_sections(document: dict[str, Any]) -> list[str]:
    """Every section the tables above leave out (detection, forwarding, tenants, and any
    added later), as the document has it; detection and forwarding are named when absent too,
    since their absence decides what the controller does."""
    lines: list[str] = []
    names = [*_WHEN_ABSENT, *(key for key in document if key not in _WHEN_ABSENT)]
    for name in names:
        if name in _SHOWN_ABOVE:
            continue
        if name not in document:
            lines.append(_WHEN_ABSENT[name])
            continue
        section = document[name]
        if isinstance(section, dict) and section:
            lines.append(f"{name}:")
            lines += [f"  {key}: {_inline(value)}" for key, value in section.items()]
        else:
            lines.append(f"{name}: {_inline(section)}")
    return lines


def _print_applied(body: dict[str, Any]) -> None:
    applied: dict[str, int] = body.get("applied", {})

    def mark(version: int) -> str:
        return "[green]current[/]" if version >= body["version"] else "[yellow]behind[/]"

    print_table(
        "applied on switches",
        ("dpid", "version"),
        [(dpid, f"{version} {mark(version)}") for dpid, version in applied.items()],
        empty="no live switch reports an applied version",
    )


def render_written(body: dict[str, Any], write: WriteOptions) -> bool:
    """Print what a write did; False when it was to be applied and no live switch runs it."""
    if body.get("unchanged"):
        out.print(
            f"unchanged: nothing stored, already the active {_version_line(body)}",
            highlight=False,
        )
    else:
        out.print(f"[green]stored[/] {_version_line(body)}", highlight=False)
    applied = body.get("applied", {})
    if not write.wait:
        out.print(
            "stored only: not waiting for the switches (`flowlane switches` shows what they run)"
        )
        return True
    if not applied:
        # The API refuses a waiting write with no live switch (409); this is the rare case
        # of every switch confirming and then leaving before the answer.
        err.print(
            "[bold red]error[/]: stored and active, but no live switch reports it now",
            highlight=False,
        )
        return False
    out.print(f"applied on {len(applied)} switch(es): {', '.join(applied)}")
    return True


def _finish_write(body: dict[str, Any], write: WriteOptions, *, as_json: bool) -> None:
    if as_json:
        print_json(body)
        ok = not write.wait or bool(body.get("applied"))
    else:
        ok = render_written(body, write)
    if not ok:
        raise typer.Exit(EXIT_NOT_APPLIED)


def _version_row(version: dict[str, Any]) -> Row:
    notes = []
    if version.get("active"):
        notes.append("[green]active[/]")
    if version.get("rollback_of"):
        notes.append(f"rollback to {version['rollback_of']}")
    return (
        str(version["version"]),
        when(version["created_at"]),
        plain(version["author"]),  # stored text: shown as it is, never as markup
        plain(version["comment"]),
        ", ".join(notes),
    )


def render_history(body: dict[str, Any]) -> None:
    print_table(
        "policy history (newest first)",
        ("version", "created", "author", "comment", ""),
        [_version_row(version) for version in body.get("versions", [])],
        empty="no policy stored yet",
    )


def _changes_cell(changes: dict[str, Any]) -> str:
    return (
        f"+{len(changes['added'])} ~{len(changes['changed'])} -{len(changes['removed'])}"
        f" ={changes['unchanged']}"
    )


def _meters_cell(changes: dict[str, Any]) -> str:
    """Meters are added and changed, never removed: the ones kept unplanned show as ``kept``."""
    cell = f"+{len(changes['added'])} ~{len(changes['changed'])} ={changes['unchanged']}"
    return cell + (f" kept {len(changes['kept'])}" if changes.get("kept") else "")


def quota_lines(quotas: list[dict[str, Any]]) -> list[str]:
    """One line per quota of the plan: its use under the planned policy and the headroom
    left (a tenant's name is the API's text: printed without markup)."""
    lines = []
    for use in quotas:
        whose = f" (tenant {use['tenant']})" if use.get("tenant") else ""
        if use["quota"].endswith("jobs_per_tenant") and not use.get("tenant"):
            whose = " (tokens without a tenant)"
        headroom = use["headroom"]
        left = f"{headroom} left" if headroom >= 0 else f"{-headroom} over: new jobs refused"
        lines.append(f"quota {use['quota']}{whose}: {use['used']} of {use['limit']}, {left}")
    return lines


def _plan_row(switch: dict[str, Any]) -> Row:
    queue_changes = sum(
        len(p["queues"][k]) for p in switch["ports"] for k in ("added", "changed", "removed")
    )
    return (
        switch["dpid"],
        str(switch.get("applied_version") or "-"),
        _changes_cell(switch["flows"]),
        _changes_cell(switch["groups"]) if "groups" in switch else "-",
        _meters_cell(switch["meters"]) if "meters" in switch else "-",
        str(queue_changes),
        "[green]in sync[/]" if switch["in_sync"] else "[yellow]changes[/]",
    )


def render_plan(body: dict[str, Any]) -> None:
    switches = body.get("switches", [])
    if "rule_entries" in body:
        out.print(
            f"rules: at most {body['rule_entries']} classification entries per switch"
            f" (limit {body['rule_entry_limit']}; every match and its mirror for two-way rules),"
            " besides the default-class, detection, marking and forwarding entries that"
            " `policy validate` adds to its count",
            highlight=False,
        )
    for line in quota_lines(body.get("quotas", [])):
        out.print(line, highlight=False, markup=False)
    for warning in body.get("warnings", []):
        out.print(f"[yellow]warning:[/] {warning}", highlight=False)
    print_table(
        "plan: what applying would change",
        (
            "dpid",
            "runs version",
            "flows +add ~change -remove =same",
            "groups",
            "meters",
            "queues",
            "",
        ),
        [_plan_row(switch) for switch in switches],
        empty="valid; no live switch, so nothing would change now",
    )
    if not switches:
        return
    for switch in switches:
        inputs = switch.get("inputs") or {}
        if inputs.get("note"):
            out.print(
                f"[yellow]note:[/] switch {switch['dpid']}: {inputs['note']}", highlight=False
            )
    for switch in switches:
        if not switch["in_sync"]:
            _print_switch_changes(switch)


def _print_switch_changes(switch: dict[str, Any]) -> None:
    out.print(f"\n[bold]switch {switch['dpid']}[/]", highlight=False)
    flows = switch["flows"]
    for marker, style, key in (("+", "green", "added"), ("~", "yellow", "changed")):
        for line in flows[key]:
            out.print(f"  [{style}]{marker}[/] {line}", highlight=False, soft_wrap=True)
    for line in flows["removed"]:
        out.print(f"  [red]-[/] {line}", highlight=False, soft_wrap=True)
    groups = switch.get("groups") or {"added": [], "changed": [], "removed": []}
    for marker, style, key in (("+", "green", "added"), ("~", "yellow", "changed")):
        for line in groups[key]:
            out.print(f"  [{style}]{marker}[/] {line}", highlight=False, soft_wrap=True)
    for line in groups["removed"]:
        out.print(f"  [red]-[/] {line}", highlight=False, soft_wrap=True)
    meters = switch.get("meters") or {"added": [], "changed": []}
    for marker, style, key in (("+", "green", "added"), ("~", "yellow", "changed")):
        for line in meters[key]:
            out.print(f"  [{style}]{marker}[/] {line}", highlight=False, soft_wrap=True)
    for port in switch["ports"]:
        queues = port["queues"]
        rate_changes = port.get("rate_bps") != port["planned_rate_bps"]
        if not (rate_changes or queues["added"] or queues["changed"] or queues["removed"]):
            continue
        out.print(
            f"  port {port['name']} ({port['number']}): rate {rate(port.get('rate_bps'))}"
            f" -> {rate(port['planned_rate_bps'])} ({port['note']})",
            highlight=False,
        )
        for marker, style, key in (("+", "green", "added"), ("~", "yellow", "changed")):
            for line in queues[key]:
                out.print(f"    [{style}]{marker}[/] {line}", highlight=False)
        for line in queues["removed"]:
            out.print(f"    [red]-[/] {line}", highlight=False)
    if switch["unresolved_rules"]:
        out.print(
            "  rules that install nothing here (in_port names a port this switch lacks): "
            + ", ".join(switch["unresolved_rules"]),
            highlight=False,
        )


# --------------------------------------------------------------------------------------------
# Commands that talk to the API
# --------------------------------------------------------------------------------------------


@app.command()
def show(api: ApiOption = DEFAULT_API, as_json: JsonOption = False) -> None:
    """Show the active policy version, its document, and the version each switch runs."""
    try:
        body = ApiClient(api).get_policy()
    except ApiCallError as failure:
        raise report_failure(failure, as_json=as_json) from None
    if as_json:
        print_json(body)
    else:
        render_policy(body)


@app.command()
def apply(
    file: FileArgument,
    api: ApiOption = DEFAULT_API,
    wait: WaitOption = True,
    timeout: TimeoutOption = 30.0,
    comment: CommentOption = "",
    if_match: Annotated[
        int | None,
        typer.Option(min=1, help="Write only if this is still the active version (else exit 1)"),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Store FILE as the next policy version; by default, wait until every switch runs it.

    Exit 1 if the API refuses it (every error is listed with its path; or, when
    waiting, no live switch would apply it: nothing is stored, --store-only
    stores it anyway), 3 if the API or Redis is unreachable, 4 if some switches
    did not confirm in time.
    """
    document = _document_or_exit(file)
    write = WriteOptions(comment, wait, timeout, if_match)
    try:
        body = ApiClient(api).put_policy(document, write)
    except ApiCallError as failure:
        raise report_failure(failure, as_json=as_json, source=str(file)) from None
    _finish_write(body, write, as_json=as_json)


@app.command()
def plan(file: FileArgument, api: ApiOption = DEFAULT_API, as_json: JsonOption = False) -> None:
    """Show what FILE would change on every live switch (flows, groups, meters, queues);
    apply nothing."""
    document = _document_or_exit(file)
    try:
        body = ApiClient(api).plan(document)
    except ApiCallError as failure:
        raise report_failure(failure, as_json=as_json, source=str(file)) from None
    if as_json:
        print_json(body)
    else:
        render_plan(body)


@app.command()
def history(
    api: ApiOption = DEFAULT_API,
    limit: Annotated[int, typer.Option(min=1, max=500, help="How many versions")] = 20,
    as_json: JsonOption = False,
) -> None:
    """List stored policy versions, newest first."""
    try:
        body = ApiClient(api).history(limit)
    except ApiCallError as failure:
        raise report_failure(failure, as_json=as_json) from None
    if as_json:
        print_json(body)
    else:
        render_history(body)


@app.command()
def rollback(
    version: Annotated[int, typer.Argument(min=1, help="The version to restore")],
    api: ApiOption = DEFAULT_API,
    wait: WaitOption = True,
    timeout: TimeoutOption = 30.0,
    comment: CommentOption = "",
    if_match: Annotated[
        int | None,
        typer.Option(min=1, help="Roll back only if this is still the active version"),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Store VERSION's document as the next version (history only grows); wait for switches
    as ``apply`` does (--store-only not to)."""
    write = WriteOptions(comment, wait, timeout, if_match)
    try:
        body = ApiClient(api).rollback(version, write)
    except ApiCallError as failure:
        raise report_failure(failure, as_json=as_json, source=f"version {version}") from None
    _finish_write(body, write, as_json=as_json)
