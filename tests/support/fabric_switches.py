"""What the Mininet leaf-spine tests read of their bridges, shared by the fabric test
(``tests/mininet/test_fabric.py``) and the three-controller test
(``tests/mininet/test_controllers.py``): their plans renamed so their bridges never clash,
and the next hops a leaf forwards a host's MAC to, read from Open vSwitch itself."""

from __future__ import annotations

import re
import subprocess

from flowlane_bench import harness
from flowlane_bench.suite.topology import LinkPlan, SwitchPlan, TopologyPlan

from controller.pipeline import tables


def own_names(plan: TopologyPlan, prefix: str, dpid_base: int) -> TopologyPlan:
    """``plan`` with its switches renamed and renumbered, so this network's bridges and ports
    cannot clash with another leaf-spine (a scenario run) on the same Open vSwitch."""
    names = {switch.name: prefix + switch.name for switch in plan.switches}
    return TopologyPlan(
        switches=tuple(SwitchPlan(names[s.name], dpid_base + s.dpid) for s in plan.switches),
        hosts=plan.hosts,
        links=tuple(
            LinkPlan(names.get(link.a, link.a), names.get(link.b, link.b)) for link in plan.links
        ),
        loops=plan.loops,
    )


def ofctl_numbers(*args: str) -> str:
    """``ovs-ofctl`` output with port numbers, not names (what the parsers read)."""
    return harness.ofctl("--no-names", *args)


def group_watch_ports(bridge: str) -> dict[int, frozenset[int]]:
    """Group id -> the ports its buckets watch."""
    found = {}
    for line in ofctl_numbers("dump-groups", bridge).splitlines():
        group_id = re.search(r"group_id=(\d+)", line)
        if group_id is not None:
            found[int(group_id[1])] = frozenset(
                int(p) for p in re.findall(r"watch_port:(\d+)", line)
            )
    return found


def next_hops(bridge: str, mac: str) -> frozenset[int] | None:
    """The ports ``bridge`` sends frames for ``mac`` to: one output, or a select group's
    watched buckets; None when it has no entry for that MAC."""
    dump = ofctl_numbers("dump-flows", bridge, f"table={tables.FORWARD}")
    for line in dump.splitlines():
        parsed = re.search(r"priority=(\d+),?(\S*)\s+actions=(\S+)", line)
        if not parsed or int(parsed[1]) != tables.HOST_PRIORITY or f"dl_dst={mac}" not in parsed[2]:
            continue
        group = re.search(r"group:(\d+)", parsed[3])
        if group is None:
            return frozenset(int(p) for p in re.findall(r"output:(\d+)", parsed[3]))
        return group_watch_ports(bridge).get(int(group[1]), frozenset())
    return None


def bridges() -> list[str]:
    """The bridges Open vSwitch has now."""
    listed = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True, check=True)
    return listed.stdout.split()


def require_free(names: tuple[str, ...] | list[str]) -> None:
    """Fail loudly when a bridge a test is about to make exists already."""
    taken = sorted(set(bridges()) & set(names))
    if taken:
        raise harness.PrerequisiteError(
            f"bridges {', '.join(taken)} exist already: another run holds them, or a crashed one"
            " left them (`ovs-vsctl del-br <name>` when nothing else runs)"
        )
