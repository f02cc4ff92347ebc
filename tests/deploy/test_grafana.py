"""deploy/grafana/flowlane.json: a dashboard whose every query, legend and variable names only
metrics and labels flowlane exports, and recording rules the shipped rules define."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.conftest import Exported

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
DASHBOARD = json.loads((DEPLOY / "grafana" / "flowlane.json").read_text())
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "le", "bool"}


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def queries() -> list[str]:
    found = [t["expr"] for p in panels(DASHBOARD) for t in p.get("targets", [])]
    for variable in DASHBOARD["templating"]["list"]:
        if isinstance(variable.get("query"), dict):
            found.append(variable["query"]["query"])
    return found


def recorded() -> set[str]:
    rules = yaml.safe_load((DEPLOY / "prometheus" / "flowlane-rules.yml").read_text())
    return {r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r}


def test_the_dashboard_has_the_panels_operators_need() -> None:
    titles = {p["title"] for p in panels(DASHBOARD)}
    for wanted in (
        "Fabric overview",
        "Sent per class (bit/s)",
        "Drops per class (packets/s)",
        "Backlog per class",
        "Detections and releases (per s)",
        "Placements and reroutes (per s)",
        "Policy version per switch",
        "API latency p99 by route",
    ):
        assert wanted in titles
    ids = [p["id"] for p in panels(DASHBOARD)]
    assert len(ids) == len(set(ids)), "two panels share an id"


def test_every_query_names_exported_metrics_or_shipped_recording_rules(
    exported: Exported,
) -> None:
    rules = recorded()
    for expr in queries():
        for name in re.findall(r"\b(flowlane_\w+|flowlane:[\w:]+)", expr):
            if ":" in name:
                assert name in rules, f"{name} is not a shipped recording rule ({expr})"
            else:
                assert name in exported.names, f"{name} is not exported ({expr})"


def test_every_label_a_query_or_legend_uses_is_exported(exported: Exported) -> None:
    used: set[str] = set()
    for expr in queries():
        used |= set(re.findall(r"[{,]\s*(\w+)\s*=~?", expr))
        for group in re.findall(r"\bby\s*\(([^)]*)\)", expr):
            used |= {label.strip() for label in group.split(",") if label.strip()}
        used |= set(re.findall(r"label_values\(\w+,\s*(\w+)\)", expr))
    for panel in panels(DASHBOARD):
        for target in panel.get("targets", []):
            used |= set(re.findall(r"\{\{(\w+)\}\}", target.get("legendFormat", "")))
    unknown = used - exported.labels - PROMQL_WORDS
    assert not unknown, f"labels flowlane does not export: {unknown}"
