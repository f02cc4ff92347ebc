"""Mininet topologies for flowlane; also usable with ``mn --custom mininet/topologies.py``.

Each topology is built from a plan (``flowlane_bench.suite.topology``) that
fixes the order of links, so port names (``s1-eth3``) are known before the
network exists: scenario files and policies name ports by them.

Port rates come from the flowlane policy (OVS queues), never from TCLink:
TCLink's HTB on a switch port would fight OVS QoS for the root qdisc.

    mn --custom mininet/topologies.py --topo flowlane-leafspine,2,2,2 \\
       --switch ovs,datapath=user,protocols=OpenFlow13 --controller remote \\
       --test fabric-ready+pingall+iperf3

Loaded by ``mn --custom mininet/topologies.py`` (which imports this module under Debian's
``/usr/bin/python3``, so it imports only the standard library and Mininet here) it gives ``mn``:

- ``--topo`` ``flowlane-single``, ``flowlane-dumbbell``, ``flowlane-leafspine``,
  whose hosts come up with TX checksum offload off;
- ``--host offload-off``: the same host for any other topology;
- ``--test`` ``fabric-ready`` (wait until every host reaches every other) and
  ``iperf3`` (a short TCP iperf3 between two hosts);
- a ``cleanup`` that replaces ``mn``'s own when ``mn`` fails (see ``cleanup``).

A leaf-spine with more than one spine has loops: run it with the policy's
``forwarding: fabric`` or turn on a spanning tree, as ``harness.network``
does with RSTP.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from mininet.link import Intf
from mininet.log import error, info, output
from mininet.node import Host, Switch
from mininet.topo import Topo

from flowlane_bench.nodes import Net, Node
from flowlane_bench.suite import topology
from flowlane_bench.suite.topology import ETHERNET_MTU, TopologyPlan

SWITCH = "s1"

READY_TIMEOUT_S = 30.0
"""How long ``fabric-ready`` waits: a fabric discovers its links in about two LLDP intervals."""

_BUILT_SWITCHES: set[str] = set()
"""Bridges of this process's networks (a flowlane topology's, or a switch an ``OffloadOffHost``
is linked to): what ``cleanup`` may delete."""


class OffloadError(RuntimeError):
    """An interface kept TX checksum offload on: TCP through OVS's userspace datapath stalls."""


def tx_offload_off(host: Node) -> None:
    """Turn TX checksum offload off on every interface of ``host`` (a Mininet node), or raise.

    A veth hands the userspace datapath packets whose TCP checksum is still to
    be filled in; OVS forwards them as they are and the receiver drops them,
    so ping works and TCP never connects.  With offload off the sender's
    kernel computes the checksum itself.
    """
    for intf in host.intfNames():
        if intf == "lo":
            continue
        host.cmd(f"ethtool -K {intf} tx off >/dev/null 2>&1")
        features = host.cmd(f"ethtool -k {intf} 2>&1")
        if "tx-checksumming: off" not in features:
            raise OffloadError(
                f"{host.name}: could not turn TX checksum offload off on {intf}"
                f" (is ethtool installed?): {features.strip()[:200]}"
            )


class OffloadOffHost(Host):  # type: ignore[misc]
    """A Mininet host whose interfaces have TX checksum offload off (``mn --host offload-off``)."""

    def config(self, **params: Any) -> Any:
        result = super().config(**params)
        tx_offload_off(self)
        for intf in self.intfList():  # remembered for `cleanup`, whatever the topology
            link = getattr(intf, "link", None)
            for end in (link.intf1, link.intf2) if link is not None else ():
                if isinstance(end.node, Switch):
                    _BUILT_SWITCHES.add(end.node.name)
        return result


class MtuError(RuntimeError):
    """An interface did not take its link's MTU."""


class MtuIntf(Intf):  # type: ignore[misc]
    """An interface with its link's ``mtu``, set in its node's namespace (Mininet has no MTU).

    Both ends of a link get it, the switch's port included: OVS takes a port's
    MTU from its kernel interface (``ovs-vsctl get interface <port> mtu`` shows
    it), and its userspace datapath forwarded 9000-byte frames between veths
    here (docs/jobs.md, "Jumbo frames on the training fabric").
    """

    def config(self, mtu: int | None = None, **params: Any) -> Any:
        result = super().config(**params)
        if mtu is not None:
            self.cmd(f"ip link set dev {self.name} mtu {int(mtu)}")
            found = self.cmd(f"cat /sys/class/net/{self.name}/mtu").strip()
            if found != str(mtu):
                raise MtuError(f"{self.name}: MTU {found!r} after asking for {mtu}")
        return result


class PlannedTopo(Topo):  # type: ignore[misc]
    """Whatever a ``TopologyPlan`` says, links in plan order, at the plan's MTU."""

    def build(self, plan: TopologyPlan) -> None:
        self.plan = plan
        for switch in plan.switches:
            self.addSwitch(switch.name, dpid=f"{switch.dpid:016x}")
            _BUILT_SWITCHES.add(switch.name)
        for host in plan.hosts:
            self.addHost(host.name, cls=OffloadOffHost, ip=f"{host.ip}/24", mac=host.mac)
        mtu: dict[str, Any] = {} if plan.mtu == ETHERNET_MTU else {"intf": MtuIntf, "mtu": plan.mtu}
        for link in plan.links:
            self.addLink(link.a, link.b, **mtu)


class SingleSwitchTopo(PlannedTopo):
    """Training senders, inference clients and one server on one switch.

    Links are added senders first, then clients, then the server, so the
    server's switch port is always the last: ``s1-eth<senders+clients+1>``.
    """

    def build(self, training_senders: int = 2, inference_clients: int = 1) -> None:  # type: ignore[override]
        names = [f"train{i + 1}" for i in range(training_senders)]
        names += [f"infer{i + 1}" for i in range(inference_clients)]
        super().build(topology.single([*names, "server"]))


class DumbbellTopo(PlannedTopo):
    """``left`` hosts on s1, ``right`` hosts on s2, one s1-s2 link between them."""

    def build(self, left: int = 2, right: int = 2) -> None:  # type: ignore[override]
        names = [f"h{i + 1}" for i in range(left + right)]
        super().build(topology.dumbbell(names[:left], names[left:]))


class LeafSpineTopo(PlannedTopo):
    """Two-tier Clos: ``leaves`` leaves of ``hosts_per_leaf`` hosts, each linked to every spine."""

    def build(self, leaves: int = 2, spines: int = 2, hosts_per_leaf: int = 2) -> None:  # type: ignore[override]
        super().build(topology.leaf_spine(leaves, spines, hosts_per_leaf))


def server_port(training_senders: int = 2, inference_clients: int = 1) -> str:
    return f"{SWITCH}-eth{training_senders + inference_clients + 1}"


# ---- tests for `mn --test` ----------------------------------------------------------------


def _fail(net: Net, message: str) -> None:
    """End ``mn`` with status 1 after stopping its network.

    Raising would send ``mn`` into its failure path (``cleanup``); a test that
    did its job and found a problem stops this network and exits instead.
    """
    error(f"*** {message}\n")
    net.stop()
    raise SystemExit(1)


def unreachable(net: Net) -> list[tuple[str, str]]:
    """Host pairs (source, destination) whose one ping got no answer within a second.

    Each host pings all the others at once, so a round takes about a second
    however many hosts there are.
    """
    missing = []
    for source in net.hosts:
        targets = {other.IP(): other.name for other in net.hosts if other is not source}
        pings = " ".join(
            f"(ping -c1 -W1 {ip} >/dev/null 2>&1 && echo reached {ip}) &" for ip in targets
        )
        reached = {
            line.split()[1]
            for line in source.cmd(f"{pings} wait").splitlines()
            if line.startswith("reached ")
        }
        missing += [(source.name, name) for ip, name in targets.items() if ip not in reached]
    return missing


def fabric_ready(net: Net, timeout: float = READY_TIMEOUT_S) -> None:
    """``--test fabric-ready``: wait until every host reaches every other, and say how long it took.

    A controller that forwards (``forwarding: fabric``) must first discover the
    links (LLDP, about an interval) and the edge ports (up for 1.5 intervals,
    facing no switch) before it answers ARP and installs paths: packets sent
    in those first seconds are dropped, so a ``pingall`` right after start can
    lose some.
    """
    started = time.monotonic()
    info("*** Waiting for every host to reach every other (the controller discovers the fabric)\n")
    pairs = len(net.hosts) * (len(net.hosts) - 1)
    first_round: int | None = None
    while True:
        missing = unreachable(net)
        took = time.monotonic() - started
        first_round = len(missing) if first_round is None else first_round
        if not missing:
            output(
                f"*** fabric ready after {took:.1f} s: every host reaches every other"
                f" (the first round reached {pairs - first_round} of {pairs} pairs)\n"
            )
            return
        if took >= timeout:
            silent = ", ".join(f"{a}->{b}" for a, b in missing[:8])
            _fail(net, f"fabric not ready after {took:.0f} s; no answer on {silent}")


def iperf3(net: Net, client: str = "", server: str = "", seconds: float = 2) -> None:
    """``--test iperf3[,CLIENT,SERVER,SECONDS]``: TCP from CLIENT to SERVER (first and last host).

    Prints the goodput the server received; ends ``mn`` with status 1 when
    iperf3 cannot connect or moves nothing.
    """
    source = net.get(client) if client else net.hosts[0]
    sink = net.get(server) if server else net.hosts[-1]
    listener = sink.popen(["iperf3", "--server", "--one-off", "--port", "5201"])
    try:
        deadline = time.monotonic() + 5
        while "LISTEN" not in sink.cmd("ss -Hltn sport = :5201 | sed 's/^/LISTEN /'"):
            if time.monotonic() > deadline:
                _fail(net, f"iperf3 server on {sink.name} did not start")
            time.sleep(0.05)
        args = ["iperf3", "--client", sink.IP(), "--port", "5201", "--time", str(seconds)]
        args += ["--connect-timeout", "3000", "--json"]
        raw = source.cmd(shlex.join(args))
    finally:
        with contextlib.suppress(ProcessLookupError):
            listener.kill()
        listener.wait()
    try:
        report = json.loads(raw)
    except ValueError:
        report = {"error": raw.strip()[-300:]}
    received = report.get("end", {}).get("sum_received", {}).get("bits_per_second", 0)
    if "error" in report or not received:
        _fail(net, f"iperf3 {source.name} -> {sink.name} failed: {report.get('error', 'no data')}")
    output(
        f"*** iperf3 {source.name} -> {sink.name}: {received / 1e6:.1f} Mbit/s"
        f" (TCP, {seconds:g} s)\n"
    )


# ---- what `mn --custom` reads -------------------------------------------------------------


def cleanup() -> None:
    """Stands in for ``mn``'s cleanup when ``mn`` fails or is interrupted.

    ``mn`` runs ``mininet.clean.cleanup`` on any error: it deletes every OVS
    bridge on the machine, kills every Mininet host and every process called
    ``controller``, and removes ``/tmp/*.log``, whoever they belong to.  A
    ``--custom`` file may replace ``mn``'s globals, so this file replaces that
    with a cleanup of this ``mn`` alone: its own host shells (each in its own
    session, taking its namespace and veths with it) and the bridges and
    switch ports its flowlane topologies made.  (``mn -c`` without this file
    is still the full one.)
    """
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            if stat[stat.rindex(")") + 2 :].split()[1] == me:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(int(entry.name), signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(entry.name), signal.SIGKILL)
    for bridge in sorted(_BUILT_SWITCHES):
        subprocess.run(["ovs-vsctl", "--if-exists", "del-br", bridge], check=False)
    # A switch-to-switch veth has both ends here, in no host's namespace: delete it by name.
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    for line in links.splitlines():
        name = line.split(": ")[1].split("@")[0] if ": " in line else ""
        if name.rpartition("-eth")[0] in _BUILT_SWITCHES:
            subprocess.run(["ip", "link", "del", name], capture_output=True, check=False)
    info(
        "*** flowlane's cleanup: stopped this run's hosts"
        f"{' and deleted bridges ' + ' '.join(sorted(_BUILT_SWITCHES)) if _BUILT_SWITCHES else ''}"
        " (Mininet's own cleanup deletes every bridge on the machine: skipped)\n"
    )


topos = {
    "flowlane-single": SingleSwitchTopo,
    "flowlane-dumbbell": DumbbellTopo,
    "flowlane-leafspine": LeafSpineTopo,
}
hosts = {"offload-off": OffloadOffHost}
tests = {"fabric-ready": fabric_ready, "iperf3": iperf3}
