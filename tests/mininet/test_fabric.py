"""End to end: ``forwarding: fabric`` on a leaf-spine with loops and no spanning tree.

One network serves every test: three leaves, two spines, two hosts per leaf,
every port limited to 20 Mbit by the policy, under the whole stack (Redis,
controller, API) so the API's view of the fabric can be checked against the
switches.  The bridges run no RSTP: the controller alone keeps the loops
from multiplying broadcasts.  Each test leaves the fabric as it found it
(every link up again) and fails when the controller logged an error.

What is proven:

- the fabric converges (every host reaches every other) within seconds, the
  leaves spread traffic over both spines with watched select groups, and a
  broadcast or an ARP request reaches each host at most once;
- two TCP flows that hashing may put on one spine are placed on both, and
  get close to twice one link's goodput;
- a failed uplink costs a probe stream a few packets (the select group skips
  the dead bucket in the datapath), a failed spine downlink a little more
  (the controller must re-plan the source leaf), and both heal;
- ``GET /v1/topology`` and ``GET /v1/paths`` describe the fabric as it is.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from flowlane_bench import harness, probe
from flowlane_bench.suite import probe as probe_loss
from flowlane_bench.suite.topology import leaf_spine
from flowlane_bench.topologies import PlannedTopo

from controller.pipeline import tables
from tests.support.fabric_switches import bridges, ofctl_numbers, own_names, require_free

pytestmark = pytest.mark.mininet


PLAN = own_names(leaf_spine(3, 2, 2), "f", 0xF000)
LEAVES = ("fleaf1", "fleaf2", "fleaf3")
SPINES = ("fspine1", "fspine2")
LEAF1, LEAF2 = LEAVES[:2]
BRIDGES = (*LEAVES, *SPINES)
HOSTS = {host.name: host for host in PLAN.hosts}
COUNTER = Path(__file__).resolve().parent / "fabric_net.py"

LINK_BPS = 20_000_000
LINK_GOODPUT_BPS = 0.94 * LINK_BPS
"""What one TCP flow gets through a 20 Mbit HTB port (measured 18.8 Mbit/s here)."""
CONVERGE_S = 15.0
PROBE_RATE = 500
PROBE_PORT = 7000
PROBE_QUIET_S = 1.0
"""A probe receiver stops this long after the last datagram (1000 ms of loss: over any limit)."""
IPERF_PORT = 5201

POLICY = """\
# Fabric forwarding on a leaf-spine with loops: every port 20 Mbit, so two
# flows leaving one leaf need both spines.
classes:
  inference:   {priority: 0, dscp: 46, min_rate: 20%}
  training:    {priority: 1, dscp: 26, min_rate: 70%}
  best-effort: {priority: 2, dscp: 0,  min_rate: 10%}
default_class: inference
rules:
  - name: inference-rpc
    match: {ip_proto: tcp, tcp_dst: 8000}
    class: inference
detection:
  interval: 500ms
  elephant: {rate: 2Mbit, for: 1s, class: training}
  release_after: 5s
forwarding:
  mode: fabric
  placement: {min_rate: 2Mbit, interval: 500ms, hold: 5s}
  discovery: {lldp_interval: 1s, link_timeout: 3500ms}
ports:
  rate: 20Mbit
"""


# --------------------------------------------------------------------------------------------
# reading the switches
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupDesc:
    group_id: int
    kind: str
    watch_ports: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclass(frozen=True)
class FlowLine:
    priority: int
    match: str
    actions: str


def groups(bridge: str) -> dict[int, GroupDesc]:
    found = {}
    for line in ofctl_numbers("dump-groups", bridge).splitlines():
        group_id = re.search(r"group_id=(\d+)", line)
        kind = re.search(r"type=(\w+)", line)
        if group_id is None or kind is None:
            continue
        found[int(group_id[1])] = GroupDesc(
            int(group_id[1]),
            kind[1],
            tuple(int(p) for p in re.findall(r"watch_port:(\d+)", line)),
            tuple(int(p) for p in re.findall(r"output:(\d+)", line)),
        )
    return found


def forward_flows(bridge: str) -> list[FlowLine]:
    flows = []
    for line in ofctl_numbers("dump-flows", bridge, f"table={tables.FORWARD}").splitlines():
        parsed = re.search(r"priority=(\d+),?(\S*)\s+actions=(\S+)", line)
        if parsed:
            flows.append(FlowLine(int(parsed[1]), parsed[2], parsed[3]))
    return flows


def next_hops(bridge: str, mac: str) -> frozenset[int] | None:
    """The ports ``bridge`` sends frames for ``mac`` to: one output, or a select group's
    watched buckets; None when it has no entry for that MAC."""
    for flow in forward_flows(bridge):
        if flow.priority != tables.HOST_PRIORITY or f"dl_dst={mac}" not in flow.match:
            continue
        group = re.search(r"group:(\d+)", flow.actions)
        if group is not None:
            desc = groups(bridge).get(int(group[1]))
            return frozenset(desc.watch_ports) if desc else frozenset()
        return frozenset(int(p) for p in re.findall(r"output:(\d+)", flow.actions))
    return None


def port_number(bridge: str, peer: str) -> int:
    return harness.ofctl_ports(bridge)[PLAN.port_to(bridge, peer)]


def uplinks(leaf: str) -> dict[str, int]:
    """Spine name -> the leaf's port number facing it."""
    ports = harness.ofctl_ports(leaf)
    return {spine: ports[PLAN.port_to(leaf, spine)] for spine in SPINES}


def remote_macs(leaf: str) -> list[str]:
    """MACs of the hosts on other leaves: the ones ``leaf`` reaches through the spines."""
    local = set(PLAN.ports_of(leaf))
    return [
        host.mac
        for port, peer in PLAN.switch_ports().items()
        if peer in HOSTS and port not in local
        for host in (HOSTS[peer],)
    ]


def spread_over_both_spines(leaf: str) -> bool:
    both = frozenset(uplinks(leaf).values())
    return all(next_hops(leaf, mac) == both for mac in remote_macs(leaf))


def fabric_tx_packets() -> int:
    return sum(sum(harness.ofctl_tx_packets(bridge).values()) for bridge in BRIDGES)


def busiest_uplink(leaf: str, seconds: float = 0.4) -> str:
    """The spine that the running probe stream from ``leaf`` crosses: its uplink's counter grows
    by the stream's packets (UDP between two hosts always hashes onto one bucket)."""
    ports = uplinks(leaf)
    before = harness.ofctl_tx_packets(leaf)
    time.sleep(seconds)  # the window the counters are compared over
    after = harness.ofctl_tx_packets(leaf)
    grew = {spine: after[ports[spine]] - before[ports[spine]] for spine in SPINES}
    busiest = max(SPINES, key=lambda spine: grew[spine])
    assert grew[busiest] >= 0.5 * PROBE_RATE * seconds, f"no uplink carries the probe: {grew}"
    return busiest


# --------------------------------------------------------------------------------------------
# the network
# --------------------------------------------------------------------------------------------


@dataclass
class Fabric:
    net: Any
    stack: harness.StackProcess
    started: float
    """``time.monotonic()`` when the network was up (the controller was already running)."""

    def host(self, name: str) -> Any:
        return self.net.get(name)

    def ip(self, name: str) -> str:
        return HOSTS[name].ip

    def pingall(self, timeout_s: float) -> None:
        """Every host answers every other within ``timeout_s`` (a round of Mininet's pingAll)."""

        def clean() -> bool:
            return bool(self.net.pingAll(timeout=1) == 0)

        harness.wait_for("pingall without loss", clean, timeout_s, 0.2)

    def ready(self) -> None:
        """What every test starts from: every pair answering, both spines in use everywhere."""
        self.pingall(30)
        for leaf in LEAVES:
            harness.wait_for(
                f"{leaf} to spread remote hosts over both spines",
                partial(spread_over_both_spines, leaf),
                30,
                0.25,
            )

    def diagnostics(self) -> str:
        sections = []
        for command in (
            ["ovs-vsctl", "show"],
            *(
                ["ovs-ofctl", "-O", "OpenFlow13", what, bridge]
                for bridge in BRIDGES
                for what in ("dump-flows", "dump-groups", "dump-ports")
            ),
        ):
            done = subprocess.run(command, capture_output=True, text=True)
            sections.append(f"$ {' '.join(command)}\n{done.stdout}{done.stderr}")
        sections.append(f"--- stack log (tail) ---\n{self.stack.log()[-30000:]}")
        return "\n".join(sections)


def check_prerequisites() -> None:
    harness.check_prerequisites()
    if shutil.which("redis-server") is None:
        raise harness.PrerequisiteError("missing redis-server (run `make setup`)")
    require_free(BRIDGES)


@pytest.fixture(scope="module")
def fabric(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fabric]:
    check_prerequisites()
    workdir: Path = tmp_path_factory.mktemp("fabric")
    policy = workdir / "fabric.yaml"
    policy.write_text(POLICY)
    ofp_port = harness.free_port()
    leftover: list[str] = []
    try:
        with (
            harness.stack(policy, workdir / "stack.log", ofp_port) as stack,
            harness.network(PlannedTopo(plan=PLAN), ofp_port) as net,
        ):
            yield Fabric(net, stack, time.monotonic())
    finally:
        leftover = sorted(set(BRIDGES) & set(bridges()))
        for bridge in leftover:
            subprocess.run(["ovs-vsctl", "--if-exists", "del-br", bridge], check=False)
    problems = harness.log_problems(stack.log())
    assert not problems, "the stack logged errors:\n" + "\n".join(problems)
    assert not leftover, f"Mininet left bridges behind (deleted now): {leftover}"


@contextmanager
def checked(fabric: Fabric) -> Iterator[None]:
    """Dump the switches and the log when the body fails; fail when the controller logged an
    error meanwhile."""
    start = len(fabric.stack.log())
    try:
        yield
    except BaseException:
        print(fabric.diagnostics())
        raise
    problems = harness.log_problems(fabric.stack.log()[start:])
    if problems:
        print(fabric.diagnostics())
    assert not problems, "the controller logged errors:\n" + "\n".join(problems)


@contextmanager
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes started in hosts, each stopped by its PID however the body ends."""
    started: list[subprocess.Popen[str]] = []
    try:
        yield started
    finally:
        for process in started:
            harness.stop_process(process, timeout_s=3)


@contextmanager
def link_down(fabric: Fabric, a: str, b: str) -> Iterator[None]:
    """``a``-``b`` down for the body; up again however it ends."""
    fabric.net.configLinkStatus(a, b, "down")
    try:
        yield
    finally:
        fabric.net.configLinkStatus(a, b, "up")


# --------------------------------------------------------------------------------------------
# probe streams
# --------------------------------------------------------------------------------------------


@dataclass
class ProbeResult:
    run: probe_loss.ProbeRun
    sender: dict[str, Any]


@contextmanager
def probe_stream(
    fabric: Fabric, src: str, dst: str, seconds: float, started: list[subprocess.Popen[str]]
) -> Iterator[list[ProbeResult]]:
    """A numbered UDP stream at ``PROBE_RATE`` from ``src`` to ``dst`` during the body; the
    result is in the yielded list once the body is done and the stream has ended.

    The receiver ends once the stream has been quiet for ``PROBE_QUIET_S``: a gap that long
    inside the stream is more loss than any test here allows, so nothing waits out a spare
    few seconds after the stream."""
    receiver = probe.start_receiver(
        fabric.host(dst), PROBE_PORT, seconds + 3, quiet_s=PROBE_QUIET_S
    )
    started.append(receiver)
    sender = probe.start_sender(
        fabric.host(src), fabric.ip(dst), PROBE_PORT, PROBE_RATE, 64, seconds=seconds
    )
    started.append(sender)
    result: list[ProbeResult] = []
    yield result
    sent = probe.report(f"probe sender {src}", sender, seconds + 10)
    received = probe.report(f"probe receiver {dst}", receiver, 10)
    result.append(ProbeResult(probe_loss.probe_run(sent, received), sent))


def wait_until(moment: float) -> None:
    """Hold a scheduled link event until its time (the probe stream runs on a clock)."""
    delay = moment - time.time()
    if delay > 0:
        time.sleep(delay)


def ms(lost: int) -> float:
    return lost / PROBE_RATE * 1000


# --------------------------------------------------------------------------------------------
# 1. loops, no spanning tree
# --------------------------------------------------------------------------------------------


def count_frames(
    fabric: Fabric, seconds: float, started: list[subprocess.Popen[str]]
) -> dict[str, subprocess.Popen[str]]:
    counters = {}
    for name in HOSTS:
        host = fabric.host(name)
        process = harness.host_popen(
            host,
            [
                harness.PYTHON,
                str(COUNTER),
                "count",
                "--interface",
                host.defaultIntf().name,
                "--seconds",
                str(seconds),
            ],
        )
        started.append(process)
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "counting" in line, f"frame counter in {name} did not start: {line!r}"
        counters[name] = process
    return counters


def test_fabric_with_loops_converges_and_never_storms(fabric: Fabric) -> None:
    with checked(fabric), processes() as started:
        # Hosts are learned from their own packets: the first pings teach the fabric.
        fabric.pingall(CONVERGE_S - (time.monotonic() - fabric.started))
        converged = time.monotonic() - fabric.started
        print(f"pingall clean {converged:.1f} s after the network started")
        assert converged <= CONVERGE_S
        for leaf in LEAVES:
            harness.wait_for(
                f"{leaf} to spread remote hosts over both spines",
                partial(spread_over_both_spines, leaf),
                5,
                0.25,
            )

        for leaf in LEAVES:
            both = tuple(sorted(uplinks(leaf).values()))
            selects = [g for g in groups(leaf).values() if g.kind == "select"]
            assert any(
                tuple(sorted(g.watch_ports)) == both and tuple(sorted(g.outputs)) == both
                for g in selects
            ), f"{leaf}: no select group over both uplinks {both}: {selects}"

        # Quiet fabric, no ARP cache anywhere: every ping needs ARP, and the controller
        # answers it; an ARP for an address nobody has is handed to the edge ports once per
        # request, and an IPv4 broadcast follows the flood tree. A loop would multiply them.
        for name in HOSTS:
            fabric.host(name).cmd("ip neigh flush all")
        window_s = 5.0
        tx_before = fabric_tx_packets()
        counters = count_frames(fabric, window_s, started)
        pairs = [("h1", "h3"), ("h2", "h5"), ("h3", "h6"), ("h4", "h1"), ("h5", "h2"), ("h6", "h4")]
        pings = [
            harness.host_popen(fabric.host(a), ["ping", "-c", "2", "-W", "1", fabric.ip(b)])
            for a, b in pairs
        ]
        started.extend(pings)
        unknown = harness.host_popen(
            fabric.host("h2"), ["ping", "-c", "1", "-W", "1", "10.0.0.250"]
        )
        broadcasts = 3
        flood = harness.host_popen(
            fabric.host("h1"),
            ["ping", "-b", "-c", str(broadcasts), "-i", "0.3", "-W", "1", "10.0.0.255"],
        )
        started.extend([unknown, flood])
        for (a, b), process in zip(pairs, pings, strict=True):
            out, _ = process.communicate(timeout=10)
            assert process.returncode == 0, f"{a} -> {b} after flushing ARP:\n{out}"
        counts = {}
        for name, process in counters.items():
            out, err = process.communicate(timeout=window_s + 10)
            assert process.returncode == 0, f"frame counter in {name}: {err}"
            counts[name] = json.loads(out.splitlines()[-1])
        tx_packets = fabric_tx_packets() - tx_before
        print(json.dumps(counts, indent=1), f"fabric tx packets: {tx_packets}")

        requests = {name: c["sent_arp_requests"] for name, c in counts.items()}
        assert requests["h2"] >= 1  # the ARP for 10.0.0.250 went out (at least once)
        assert counts["h1"]["sent_ipv4_broadcasts"] == broadcasts
        for name, c in counts.items():
            others = sum(n for other, n in requests.items() if other != name)
            assert c["received_arp_requests"] <= others, f"{name} got ARP requests twice"
            if name != "h2":
                # The controller answers ARP for hosts it knows: only the request nobody can
                # answer reaches the other edge ports, once each.
                assert 1 <= c["received_arp_requests"] <= requests["h2"], f"{name}: {c}"
            if name != "h1":
                assert c["received_ipv4_broadcasts"] == broadcasts, f"{name}: {c}"
            assert c["received_ipv4_broadcasts"] <= broadcasts
            assert c["received_other_broadcasts"] <= 2, f"{name}: {c}"
            # IPv6 neighbour discovery after the flush: about ten per host; a loop, thousands
            assert c["received_multicast"] <= 100, f"{name}: {c}"
        # LLDP on 18 ports each second, 24 ping exchanges over 3-4 hops, a few floods: a few
        # hundred packets. A storm is tens of thousands.
        assert tx_packets < 2000


# --------------------------------------------------------------------------------------------
# 2. placement
# --------------------------------------------------------------------------------------------


def pinned_uplinks(leaf: str) -> set[int]:
    """Uplinks the placed TCP flows to the iperf3 servers leave ``leaf`` by."""
    ports: set[int] = set()
    for flow in forward_flows(leaf):
        if flow.priority == tables.PLACEMENT_PRIORITY and f"tp_dst={IPERF_PORT}" in flow.match:
            ports |= {int(p) for p in re.findall(r"output:(\d+)", flow.actions)}
    return ports


def listening(host: Any, port: int) -> bool:
    return f":{port} " in host.cmd("ss -ltn")


def iperf3_flows(
    fabric: Fabric,
    flows: list[tuple[str, str]],
    seconds: int,
    started: list[subprocess.Popen[str]],
    *extra: str,
) -> list[subprocess.Popen[str]]:
    """One-shot iperf3 servers on each (client, server) pair's server, then, once they all
    listen, a client on each client for ``seconds`` (with ``extra`` options): the clients,
    everything also in ``started`` to be stopped."""
    for _, server in flows:
        started.append(
            harness.host_popen(fabric.host(server), ["iperf3", "-s", "-1", "-p", str(IPERF_PORT)])
        )
    for _, server in flows:
        harness.wait_for(
            f"iperf3 to listen on {server}",
            partial(listening, fabric.host(server), IPERF_PORT),
            10,
        )
    clients: list[subprocess.Popen[str]] = []
    for client, server in flows:
        args = ["iperf3", "-c", fabric.ip(server), "-p", str(IPERF_PORT), "-t", str(seconds)]
        clients.append(harness.host_popen(fabric.host(client), [*args, *extra]))
        started.append(clients[-1])
    return clients


def test_placement_spreads_colliding_flows_over_both_spines(fabric: Fabric) -> None:
    seconds = 9
    with checked(fabric), processes() as started:
        fabric.ready()
        flows = [("h1", "h3"), ("h2", "h4")]
        clients = iperf3_flows(fabric, flows, seconds, started, "-J")
        both = set(uplinks(LEAF1).values())
        harness.wait_for(
            f"the two flows pinned on {LEAF1}'s two uplinks",
            lambda: pinned_uplinks(LEAF1) == both,
            seconds - 2,
            0.25,
        )
        pinned = [f for f in forward_flows(LEAF1) if f.priority == tables.PLACEMENT_PRIORITY]
        print("\n".join(f"{f.match} -> {f.actions}" for f in pinned))
        last = 4
        goodput = 0.0
        for process in clients:
            out, err = process.communicate(timeout=seconds + 20)
            assert process.returncode == 0, f"iperf3 failed: {err}{out[-2000:]}"
            intervals = [i["sum"]["bits_per_second"] for i in json.loads(out)["intervals"]]
            print(f"iperf3 Mbit/s: {[round(v / 1e6, 1) for v in intervals]}")
            goodput += sum(intervals[-last:]) / last
        print(f"aggregate over the last {last} s: {goodput / 1e6:.1f} Mbit/s")
        assert goodput >= 0.8 * 2 * LINK_GOODPUT_BPS


def test_a_jobs_flows_are_placed_and_shown_with_their_paths(fabric: Fabric) -> None:
    """A registered job's two elephants leave leaf 1 on both spines (its slowest flow gets a
    link to itself), and ``GET /v1/jobs/{name}`` shows each one's path and measured rate."""
    api, auth = fabric.stack.api, fabric.stack.headers
    seconds = 9
    flows = [("h1", "h3"), ("h2", "h4")]
    job = {
        "name": "ring",
        "class": "training",
        "endpoints": [{"ipv4": fabric.ip(host)} for host in ("h1", "h2", "h3", "h4")],
    }
    with checked(fabric), processes() as started:
        fabric.ready()
        reply = httpx.post(f"{api}/v1/jobs", json=job, timeout=5, headers=auth)
        assert reply.status_code == 201, reply.text
        try:
            iperf3_flows(fabric, flows, seconds, started)
            seen: dict[str, Any] = {}

            def placed() -> bool:
                answer = httpx.get(f"{api}/v1/jobs/ring", timeout=5, headers=auth)
                seen["last"] = answer.text
                pinned = answer.json().get("pinned", []) if answer.status_code == 200 else []
                data = [p for p in pinned if p["dst_port"] == IPERF_PORT and p["rate_bps"] > 0]
                seen["pinned"] = data
                return len(data) == 2

            try:
                harness.wait_for("the job's two flows placed and shown", placed, seconds - 2, 0.5)
            except TimeoutError as exc:
                raise AssertionError(f"{exc}; last answer: {seen.get('last')}") from None
            pinned = seen["pinned"]
            print(json.dumps(pinned, indent=1))
            assert {p["job"] for p in pinned} == {"ring"}
            first_hops = {p["path"][0]["name"] for p in pinned}
            assert first_hops == {PLAN.port_to(LEAF1, spine) for spine in SPINES}
        finally:
            httpx.delete(f"{api}/v1/jobs/ring", timeout=5, headers=auth)


# --------------------------------------------------------------------------------------------
# 3. and 4. link failures
# --------------------------------------------------------------------------------------------

SRC, DST = "h1", "h3"  # leaf1 -> leaf2


def test_local_uplink_failure_costs_a_few_packets_and_heals(fabric: Fabric) -> None:
    with checked(fabric), processes() as started:
        fabric.ready()
        with probe_stream(fabric, SRC, DST, 6.0, started) as result:
            time.sleep(0.5)  # the stream's first datagrams have crossed
            spine = busiest_uplink(LEAF1)
            others = {s: p for s, p in uplinks(LEAF1).items() if s != spine}
            down_at = time.time()
            with link_down(fabric, LEAF1, spine):
                harness.wait_for(
                    f"{LEAF1} to reach {DST} through {set(others)} only",
                    lambda: next_hops(LEAF1, HOSTS[DST].mac) == frozenset(others.values()),
                    5,
                    0.05,
                )
                wait_until(down_at + 2.0)
                up_at = time.time()
            harness.wait_for(
                f"{LEAF1} to use both spines again",
                lambda: spread_over_both_spines(LEAF1),
                10,
                0.1,
            )
        down, up = probe_loss.windows(result[0].run, [down_at, up_at])
        print(f"{spine} uplink down: {down}; back up: {up}")
        assert down.sent > 0.8 * 2.0 * PROBE_RATE
        assert ms(down.lost) <= 150, f"uplink failure lost {ms(down.lost):.0f} ms of traffic"
        assert ms(up.lost) <= 150, f"uplink recovery lost {ms(up.lost):.0f} ms of traffic"
        assert up.received > 0
        fabric.pingall(10)


def test_remote_downlink_failure_moves_the_source_leaf_off_that_spine(fabric: Fabric) -> None:
    with checked(fabric), processes() as started:
        fabric.ready()
        with probe_stream(fabric, SRC, DST, 6.0, started) as result:
            time.sleep(0.5)
            spine = busiest_uplink(LEAF1)
            remaining = frozenset(p for s, p in uplinks(LEAF1).items() if s != spine)
            leaf2_macs = [HOSTS[h].mac for h in ("h3", "h4")]
            down_at = time.time()
            with link_down(fabric, spine, LEAF2):
                harness.wait_for(
                    f"{LEAF1} to stop sending to {LEAF2}'s hosts through {spine}",
                    lambda: all(next_hops(LEAF1, mac) == remaining for mac in leaf2_macs),
                    5,
                    0.05,
                )
                # leaf3's hosts are still reached through both spines
                assert next_hops(LEAF1, HOSTS["h5"].mac) == frozenset(uplinks(LEAF1).values())
                wait_until(down_at + 2.0)
                up_at = time.time()
            harness.wait_for(
                f"{LEAF1} to use both spines again",
                lambda: spread_over_both_spines(LEAF1),
                10,
                0.1,
            )
        down, up = probe_loss.windows(result[0].run, [down_at, up_at])
        print(f"{spine}<->{LEAF2} down: {down}; back up: {up}")
        assert down.sent > 0.8 * 2.0 * PROBE_RATE
        assert ms(down.lost) <= 300, f"downlink failure lost {ms(down.lost):.0f} ms of traffic"
        assert ms(up.lost) <= 300, f"downlink recovery lost {ms(up.lost):.0f} ms of traffic"
        assert up.received > 0
        fabric.pingall(10)


# --------------------------------------------------------------------------------------------
# 5. the API's view
# --------------------------------------------------------------------------------------------


def expected_links() -> set[tuple[str, str]]:
    links = set()
    for leaf in LEAVES:
        for spine in SPINES:
            a, b = PLAN.port_to(leaf, spine), PLAN.port_to(spine, leaf)
            links |= {(a, b), (b, a)}
    return links


def expected_hosts() -> dict[str, tuple[str, str]]:
    """MAC -> (IPv4, the port it attaches at)."""
    at = {peer: port for port, peer in PLAN.switch_ports().items() if peer in HOSTS}
    return {host.mac: (host.ip, at[host.name]) for host in PLAN.hosts}


def test_api_describes_the_fabric_and_its_ecmp_paths(fabric: Fabric) -> None:
    api, auth = fabric.stack.api, fabric.stack.headers
    dpids = sorted(int(harness.datapath_id(bridge), 16) for bridge in BRIDGES)
    with checked(fabric):
        fabric.ready()
        seen: dict[str, Any] = {}

        def complete() -> bool:
            reply = httpx.get(f"{api}/v1/topology", timeout=5, headers=auth)
            if reply.status_code != 200:
                seen["last"] = reply.text
                return False
            snapshot = reply.json()
            seen["last"] = snapshot
            links = {(link["src"]["name"], link["dst"]["name"]) for link in snapshot["links"]}
            hosts = {h["mac"]: (h["ipv4"], h["at"]["name"]) for h in snapshot["hosts"]}
            return bool(
                snapshot["switches"] == dpids
                and links == expected_links()
                and all(link["usable"] for link in snapshot["links"])
                and hosts == expected_hosts()
            )

        try:
            harness.wait_for("the API to show the whole fabric", complete, 15, 0.5)
        except TimeoutError as exc:
            raise AssertionError(
                f"{exc}; last answer:\n{json.dumps(seen.get('last'), indent=1)}"
            ) from None
        snapshot = seen["last"]
        assert {link["capacity_bps"] for link in snapshot["links"]} == {LINK_BPS}

        reply = httpx.get(
            f"{api}/v1/paths",
            params={"src": fabric.ip(SRC), "dst": fabric.ip(DST)},
            timeout=5,
            headers=auth,
        )
        assert reply.status_code == 200, reply.text
        paths = reply.json()
        assert paths["src"]["at"]["name"] == PLAN.port_to(LEAF1, SRC)
        assert paths["dst"]["at"]["name"] == PLAN.port_to(LEAF2, DST)
        ecmp = sorted(tuple(hop["name"] for hop in path) for path in paths["ecmp"])
        assert ecmp == sorted(
            (PLAN.port_to(LEAF1, spine), PLAN.port_to(spine, LEAF2), PLAN.port_to(LEAF2, DST))
            for spine in SPINES
        )
        unknown = httpx.get(
            f"{api}/v1/paths",
            params={"src": fabric.ip(SRC), "dst": "10.0.0.250"},
            timeout=5,
            headers=auth,
        )
        assert unknown.status_code == 404, unknown.text
