"""The policy each mode runs, derived from the scenario's one policy so that only the mode differs.

Modes are derived from the policy *document* (what the operator wrote), so the
file a mode's controller reads is the operator's own text minus what the mode
turns off.  Every mode keeps the policy's port rates: the bottleneck has the
same capacity in all of them.

Two families compare different things:

- ``fifo``, ``static`` and ``flowlane`` compare *classification and queueing*.
  ``fifo`` and ``static`` forward with OVS's ``NORMAL`` (over a spanning tree
  where the fabric has loops), as any fabric without a routing controller
  would; ``flowlane`` is the whole document, its forwarding included.
- ``perflow`` and ``flowlane`` compare *jobs against flows*: ``perflow`` is
  the whole document with every class shared per flow and no job
  registered, so jobs get neither shares nor job-aware placement.
- ``stp``, ``ecmp`` and ``flowlane`` compare *forwarding* with the same
  classes and queues: ``stp`` forwards with ``NORMAL`` over RSTP, ``ecmp``
  routes the fabric with select groups and places nothing, ``flowlane``
  also pins the placement classes' big flows on the least-loaded path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.policy.load import parse_policy
from controller.policy.model import Policy
from flowlane_bench.suite.spec import Mode

FIFO_CLASS = "fifo"
FORWARDING = "forwarding"


def _forwarding(document: Mapping[str, Any]) -> dict[str, Any]:
    """The document's forwarding section in its long form (``fabric`` is ``{mode: fabric}``)."""
    section = document.get(FORWARDING)
    if section is None:
        return {}
    if isinstance(section, str):
        return {"mode": section}
    return dict(section)


def _without(document: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {key: value for key, value in document.items() if key not in keys}


def mode_document(document: Mapping[str, Any], mode: Mode) -> dict[str, Any]:
    """``fifo``: one class, no rules; ``static``: no detection; ``stp``/``ecmp``: forwarding.

    ``fifo`` and ``static`` drop the forwarding section too (``NORMAL``): a
    placement needs detection's flow rates, and these modes show what
    classification alone does.  ``ecmp`` keeps the document's discovery and
    punt rate, so it differs from ``flowlane`` by placement only.
    """
    if mode is Mode.FIFO:
        fifo: dict[str, Any] = {
            "classes": {FIFO_CLASS: {"priority": 0, "dscp": 0, "min_rate": "100%"}},
            "default_class": FIFO_CLASS,
            "rules": [],
        }
        if "ports" in document:
            fifo["ports"] = document["ports"]
        return fifo
    if mode is Mode.STATIC:
        return _without(document, "detection", FORWARDING)
    if mode is Mode.STP:
        return {**_without(document, FORWARDING), FORWARDING: {"mode": "normal"}}
    if mode is Mode.ECMP:
        forwarding = {**_forwarding(document), "mode": "fabric", "placement": None}
        return {**_without(document, FORWARDING), FORWARDING: forwarding}
    if mode is Mode.PERFLOW:
        return {**document, "classes": per_flow_classes(document.get("classes", {}))}
    return dict(document)


def per_flow_classes(classes: Mapping[str, Any]) -> dict[str, Any]:
    """Every class ``share: per-flow`` (the default): the ``perflow`` mode's classes.

    The mode also registers no job (the runner registers jobs in flowlane mode
    only), so a fabric places the jobs' flows one by one, as it does flows of no job.
    """
    return {
        name: {**spec, "share": "per-flow"} if isinstance(spec, Mapping) else spec
        for name, spec in classes.items()
    }


def mode_policy(document: Mapping[str, Any], mode: Mode) -> Policy:
    """The validated policy of ``mode``; a scenario's policy is valid, so this one is too."""
    return parse_policy(mode_document(document, mode), f"{mode} mode")


def needs_rstp(policy: Policy, loops: bool) -> bool:
    """``NORMAL`` forwarding floods: on a fabric with loops it needs a spanning tree.

    The controller's fabric forwarding floods on a tree of its own, and RSTP
    would block half the links it spreads flows over, so fabric modes run
    with RSTP off.
    """
    return loops and not policy.forwarding.fabric
