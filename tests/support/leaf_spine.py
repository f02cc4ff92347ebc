"""The two-leaf, two-spine fabric and the policy document the plan tests plan it with.

Shared by the desired state's tests (``tests/pipeline/test_desired.py``) and the
simulated switch's (``tests/support/test_ofswitch.py``), which installs that very plan.
"""

from __future__ import annotations

from typing import Any

from controller.fabric.model import Host, Link, PortRef, Topology

SPINES = (1, 2)
LEAVES = (11, 12)
"""Leaf ``10 + i`` port ``s`` faces spine ``s``; spine port ``i`` faces leaf ``10 + i``.
Hosts sit on leaf port 5."""

HOST_PORT = 5

DOCUMENT: dict[str, Any] = {
    "classes": {
        "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
        "training": {"priority": 1, "dscp": 26, "min_rate": "70%"},
        "best-effort": {"priority": 2, "dscp": 0, "min_rate": "10%"},
    },
    "default_class": "inference",
    "rules": [
        {"name": "rocev2", "match": {"ip_proto": "udp", "udp_dst": 4791}, "class": "training"},
        {"name": "ssh", "match": {"tcp_dst": 22}, "class": "best-effort"},
    ],
    "detection": {"interval": "500ms", "elephant": {"bytes": "10MiB", "class": "training"}},
}
"""Three classes, two rules, elephant detection (deep-copy it before changing it)."""


def leaf_spine() -> Topology:
    """Every link both ways, and host ``10.0.0.<leaf>`` on each leaf's ``HOST_PORT``."""
    topology = Topology()
    for dpid in (*SPINES, *LEAVES):
        topology = topology.with_switch(dpid)
    for leaf in LEAVES:
        for spine in SPINES:
            up = Link(PortRef(leaf, spine), PortRef(spine, leaf - 10))
            topology = topology.with_link(up).with_link(up.reversed())
        topology = topology.with_host(Host(0x020000000000 + leaf, PortRef(leaf, HOST_PORT), leaf))
    return topology
