"""Three controllers, one fabric (issue 22): a master dies or sleeps, Redis loses its primary.

One network serves every test: a leaf-spine of two leaves and two spines (two
hosts per leaf) under ``forwarding: fabric``, every bridge listing three
``flowlane controller`` processes (instances ``a``, ``b``, ``c``) that share a
Redis primary, its replica and three Sentinels, with the API on the same
``redis+sentinel://`` URL.  Four switches over three instances split 2/1/1, so
the instance mastering two masters half the fabric.

Each test starts from a settled fabric (every instance running, every bridge
with exactly one master among its three connections, every host reaching every
other), runs probe streams (one per traffic class) across the spines while it
breaks something, and puts back what it broke: a killed or paused instance is
restarted, a failed link is brought up.  What the switches hold is read from
Open vSwitch itself (``ovs-vsctl`` roles, ``ovs-ofctl`` tables, OVSDB queues).

- SIGKILL of the instance mastering half the switches, a remote link failed right
  after: at most one probe datagram a class lost (the re-route), its switches mastered
  again, only the failure's entries written, the failure routed around;
- the killed instance restarted: it takes its share writing nothing, no probe lost;
- SIGSTOP of a master, its switches taken and a new version applied, SIGCONT: none of
  its writes lands (tables and queues hold the new version throughout), the errors it
  got are counted, it steps down (mastership events) and takes again only afresh; at
  most three probe datagrams a class lost (the new version's queue change);
- a version written while a master is frozen, then killed: on every switch;
- SIGKILL of the Redis primary during a stream of policy writes: every acknowledged
  version kept, the API answering within the failover, every switch mastered and on
  the last version (last in the module: it leaves the old replica as the primary),
  and no probe datagram lost: no switch changes master for a failover of the store.

A takeover's duration is not asserted here (``bench_takeover`` measures it); every
wait is bounded.
"""

from __future__ import annotations

import copy
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from flowlane_bench import controllers as multi
from flowlane_bench import faults, harness
from flowlane_bench.suite.topology import leaf_spine
from flowlane_bench.topologies import PlannedTopo

from controller.pipeline.flows import Owner, cookie_owner
from controller.policy.load import parse_policy
from controller.policy.model import Policy
from controller.store.client import connect
from controller.store.policies import PolicyStore
from tests.conftest import free_port
from tests.support.fabric_switches import next_hops, own_names, require_free
from tests.support.policy_writer import Writer
from tests.support.sentinel import DOWN_AFTER_MS, SentinelSet

pytestmark = pytest.mark.mininet


PLAN = own_names(leaf_spine(2, 2, 2), "m", 0xC000)
LEAVES = ("mleaf1", "mleaf2")
SPINES = ("mspine1", "mspine2")
BRIDGES = (*LEAVES, *SPINES)
HOSTS = {host.name: host for host in PLAN.hosts}
LEAF_HOSTS = {"mleaf1": ("h1", "h2"), "mleaf2": ("h3", "h4")}
DPIDS = {switch.name: f"{switch.dpid:016x}" for switch in PLAN.switches}

SETTLE_S = 20.0
"""A fresh or restarted instance is registered, the switches are split and confirmed."""
TAKEOVER_S = 10.0
"""A dead or silent master's switches are mastered again (lease 3 s, a renewal, the role
request); the benchmark measures the takeover itself."""
LEASE_TTL_S = 3.0
REACHABLE_S = 40.0
"""How long a test's setup waits for every host to reach every other."""
RETRY_S = 8.0
"""How long a client retries a Redis command across a Sentinel failover (the URL's retry_s)."""
ANSWER_AGAIN_S = 8.0
"""The API answers again within this of the primary's death: the Sentinels' down-after
(1 s), their election and promotion, and the client's backoff."""

BASE = """\
classes:
  inference:   {priority: 0, dscp: 46, min_rate: 20%}
  training:    {priority: 1, dscp: 26, min_rate: 60%}
  best-effort: {priority: 2, dscp: 0,  min_rate: 10%}
default_class: inference
rules:
  - {name: probe-inference,   match: {ip_proto: udp, udp_dst: 7001}, class: inference}
  - {name: probe-training,    match: {ip_proto: udp, udp_dst: 7002}, class: training}
  - {name: probe-best-effort, match: {ip_proto: udp, udp_dst: 7003}, class: best-effort}
detection:
  interval: 1s
  elephant: {rate: 20Mbit, for: 2s, class: training}
  release_after: 30s
forwarding:
  mode: fabric
  discovery: {lldp_interval: 1s, link_timeout: 3500ms}
ports:
  rate: 100Mbit
"""


def document(marker: int = 0, training: str = "60%") -> dict[str, Any]:
    """The base policy with a marker rule (``tcp_dst: marker``: entries only this version has)
    and the training class's guaranteed share (a queue on every port)."""
    doc: dict[str, Any] = yaml.safe_load(BASE)
    doc["classes"]["training"]["min_rate"] = training
    if marker:
        rule = {"name": "marker", "match": {"ip_proto": "tcp", "tcp_dst": marker}}
        doc["rules"].append({**rule, "class": "best-effort"})
    return doc


def policy_of(doc: dict[str, Any]) -> Policy:
    return parse_policy(copy.deepcopy(doc))


# --------------------------------------------------------------------------------------------
# the stack
# --------------------------------------------------------------------------------------------


@dataclass
class Stack:
    net: Any
    sentinels: SentinelSet
    api: faults.Api
    controllers: multi.ControllerSet
    workdir: Path
    url: str
    """The store's ``redis+sentinel://`` URL (the API's and every controller's)."""
    policy: Policy
    """The policy the switches should hold now (the last one a test applied)."""

    def host(self, name: str) -> Any:
        return self.net.get(name)

    def get(self, path: str, **params: Any) -> httpx.Response:
        return httpx.get(
            f"{self.api.url}{path}", params=params, timeout=10, headers=self.api.headers
        )

    def put_policy(self, doc: dict[str, Any], timeout_s: float = 10) -> httpx.Response:
        return httpx.put(
            f"{self.api.url}/v1/policy", json=doc, timeout=timeout_s, headers=self.api.headers
        )

    def masters(self) -> dict[str, list[str]]:
        """bridge -> the instances it holds as master (Open vSwitch's word)."""
        return {
            bridge: [self.controllers.by_target(t).name for t in targets]
            for bridge, targets in multi.masters(BRIDGES).items()
        }

    def unreachable(self) -> list[tuple[str, str]]:
        """Host pairs whose one ping (1 s) found no answer; every pair pinged at once."""
        pings = {
            (a, b): harness.host_popen(self.host(a), ["ping", "-c", "1", "-W", "1", HOSTS[b].ip])
            for a in HOSTS
            for b in HOSTS
            if a != b
        }
        failed = []
        for pair, process in pings.items():
            try:
                process.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                harness.stop_process(process)
            if process.returncode != 0:
                failed.append(pair)
        return failed

    def pingall(self, timeout_s: float) -> None:
        """Until every host answers every other (each round pings all pairs at once)."""
        seen: list[list[tuple[str, str]]] = [[]]

        def clean() -> bool:
            seen[0] = self.unreachable()
            return not seen[0]

        try:
            harness.wait_for("every host to reach every other", clean, timeout_s, 0.2)
        except TimeoutError as exc:
            raise AssertionError(f"{exc}; unreachable: {seen[0]}") from None

    def diagnostics(self) -> str:
        sections = []
        for command in (
            ["ovs-vsctl", "show"],
            ["ovs-vsctl", "--columns=target,role,is_connected", "list", "controller"],
            *(
                ["ovs-ofctl", "-O", "OpenFlow13", what, bridge]
                for bridge in BRIDGES
                for what in ("dump-flows", "dump-groups")
            ),
        ):
            done = subprocess.run(command, capture_output=True, text=True)
            sections.append(f"$ {' '.join(command)}\n{done.stdout}{done.stderr}")
        with_api = self.get("/v1/controllers")
        sections.append(f"GET /v1/controllers: {with_api.status_code} {with_api.text}")
        for instance in self.controllers:
            sections.append(f"--- controller {instance.name} (run {instance.runs}) ---")
            sections.append(instance.log()[-8000:])
        return "\n".join(sections)


def settled(stack: Stack) -> str | None:
    """Why the fabric is not yet what every test starts from, or None."""
    masters = stack.masters()
    for bridge, names in masters.items():
        if len(names) != 1:
            return f"{bridge} has masters {names}"
    for bridge, links in multi.roles(BRIDGES).items():
        if not all(link.connected for link in links.values()) or len(links) != 3:
            return f"{bridge} is not connected to all three: {links}"
    counts = sorted(sum(1 for n in masters.values() if n == [i.name]) for i in stack.controllers)
    if counts != [1, 1, 2]:
        return f"not split 2/1/1: {masters}"
    answer = stack.get("/v1/controllers")
    if answer.status_code != 200:
        return f"GET /v1/controllers: {answer.status_code}"
    view = answer.json()
    alive = sorted(c["id"] for c in view["controllers"] if c["alive"])
    if alive != ["a", "b", "c"] or view["unmastered"]:
        return f"GET /v1/controllers: alive {alive}, unmastered {view['unmastered']}"
    return None


def wait_settled(stack: Stack, timeout_s: float = SETTLE_S) -> None:
    seen: list[str | None] = [None]

    def check() -> bool:
        seen[0] = settled(stack)
        return seen[0] is None

    try:
        harness.wait_for("the three instances to settle", check, timeout_s, 0.2)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}: {seen[0]}\n{stack.diagnostics()}") from None


def check_prerequisites() -> None:
    harness.check_prerequisites()
    require_free(BRIDGES)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    check_prerequisites()
    workdir: Path = tmp_path_factory.mktemp("controllers")
    ports: list[int] = []
    while len(ports) < 5:
        if (port := free_port()) not in ports:
            ports.append(port)
    sentinels = SentinelSet(workdir, ports)
    policy_file = workdir / "policy.yaml"
    policy_file.write_text(BASE)
    url = sentinels.url(f"min_replicas=1&wait_ms=500&retry_s={RETRY_S:g}")
    args = ["--policy", str(policy_file), "--lease-ttl", f"{LEASE_TTL_S:g}"]
    try:
        sentinels.start()
        with (
            faults.api(url, workdir / "api.log") as api,
            multi.controller_set(workdir, url, args) as controllers,
            harness.network(PlannedTopo(plan=PLAN), controllers["a"].ofp_port) as net,
        ):
            multi.set_controllers(BRIDGES, controllers.targets)
            yield Stack(
                net, sentinels, api, controllers, workdir, url, policy_of(yaml.safe_load(BASE))
            )
    finally:
        sentinels.stop()
        listed = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True)
        for bridge in sorted(set(BRIDGES) & set(listed.stdout.split())):
            subprocess.run(["ovs-vsctl", "--if-exists", "del-br", bridge], check=False)


@contextmanager
def checked(stack: Stack, *, stale: str | None = None) -> Iterator[None]:
    """Dump the switches, roles and logs when the body fails; fail when an instance logged an
    error meanwhile (``stale``: the fenced instance, whose refused writes are errors it logs)."""
    start = {i.name: (i.runs, len(i.log())) for i in stack.controllers}
    try:
        yield
    except BaseException:
        print(stack.diagnostics())
        raise
    problems = {}
    for instance in stack.controllers:
        if instance.name == stale:
            continue
        runs, offset = start[instance.name]
        found = harness.log_problems(instance.log()[offset if runs == instance.runs else 0 :])
        if found:
            problems[instance.name] = found
    if problems:
        print(stack.diagnostics())
    assert not problems, f"controllers logged errors: {problems}"


@pytest.fixture
def fabric(stack: Stack) -> Stack:
    """The module's stack as every test starts from it: all three instances running (a killed
    or paused one restarted), the switches split 2/1/1, every host reaching every other."""
    for instance in stack.controllers:
        if instance.paused:
            instance.resume()
    dead = [i.name for i in stack.controllers if not i.running]
    if dead:
        stack.controllers.start(*dead)
    wait_settled(stack)
    # Lenient on purpose: a restarted instance may still be learning the hosts of the switch
    # it was handed (test_a_restarted_instance_takes_its_share_without_losing_a_packet holds
    # that to its own, strict, bound); the other tests need a fabric that forwards.
    stack.pingall(REACHABLE_S)
    return stack


# --------------------------------------------------------------------------------------------
# reading the switches
# --------------------------------------------------------------------------------------------


def uplink(leaf: str, spine: str) -> int:
    return harness.ofctl_ports(leaf)[PLAN.port_to(leaf, spine)]


def probe_spine(leaf: str, seconds: float = 0.4) -> str:
    """The spine the running probe streams from ``leaf`` cross: its uplink's counter grows by
    their packets (UDP between two hosts hashes onto one bucket)."""
    ports = {spine: uplink(leaf, spine) for spine in SPINES}
    before = harness.ofctl_tx_packets(leaf)
    time.sleep(seconds)
    after = harness.ofctl_tx_packets(leaf)
    grew = {spine: after[port] - before[port] for spine, port in ports.items()}
    busiest = max(SPINES, key=lambda spine: grew[spine])
    assert grew[busiest] >= faults.PROBE_RATE * seconds, f"no uplink carries the probes: {grew}"
    return busiest


def routed_around(source: str, dest: str, spine: str) -> bool:
    """Each leaf reaches the other's hosts through ``spine`` only."""
    return all(
        next_hops(leaf, HOSTS[host].mac) == frozenset({uplink(leaf, spine)})
        for leaf, other in ((source, dest), (dest, source))
        for host in LEAF_HOSTS[other]
    )


def spread_over_both_spines(source: str, dest: str) -> bool:
    """Each leaf reaches the other's hosts through every spine again (a failed link is back)."""
    return all(
        next_hops(leaf, HOSTS[host].mac) == frozenset(uplink(leaf, spine) for spine in SPINES)
        for leaf, other in ((source, dest), (dest, source))
        for host in LEAF_HOSTS[other]
    )


def entries(bridge: str) -> set[int]:
    """Cookies of the entries a controller wrote (not the counting entries OVS learns, nor
    the detector's, which follow the traffic)."""
    return {
        c
        for c in harness.ofctl_cookies(bridge)
        if cookie_owner(c) not in (Owner.LEARNED, Owner.DETECTOR)
    }


def policy_entries(bridge: str) -> list[int]:
    """Cookies of the entries that follow the policy alone (what ``harness.sync_gap`` plans)."""
    dynamic = {Owner.LEARNED, Owner.DETECTOR, *harness.FABRIC_OWNERS}
    return sorted(c for c in harness.ofctl_cookies(bridge) if cookie_owner(c) not in dynamic)


def switch_ports(bridge: str) -> list[str]:
    return PLAN.ports_of(bridge)


def wait_all_in_sync(stack: Stack, policy: Policy, timeout_s: float) -> None:
    """Every bridge holds ``policy``'s pipeline, queues and tc filters."""
    deadline = time.monotonic() + timeout_s
    for bridge in BRIDGES:
        left = max(0.5, deadline - time.monotonic())
        harness.wait_in_sync(bridge, policy, switch_ports(bridge), left)


def flow_mods(instance: multi.Instance, bridge: str, **command: str) -> float:
    """Flow mods ``instance`` sent to ``bridge`` in its current run (``command="add"``: the
    adds only)."""
    return instance.metric("flowlane_flow_mods_total", dpid=DPIDS[bridge], **command)


def mastership_events(stack: Stack, since_unix: float) -> list[dict[str, Any]]:
    answer = stack.get(
        "/v1/events", kind="mastership", since=f"{int(since_unix * 1000)}-0", limit=1000
    )
    assert answer.status_code == 200, answer.text
    events: list[dict[str, Any]] = answer.json()["events"]
    return events


def split(stack: Stack) -> tuple[str, list[str], list[str]]:
    """The instance mastering two switches, its switches, and the two other instances."""
    masters = stack.masters()
    for instance in stack.controllers:
        mine = sorted(bridge for bridge, names in masters.items() if names == [instance.name])
        if len(mine) == 2:
            others = [i.name for i in stack.controllers if i.name != instance.name]
            return instance.name, mine, others
    raise AssertionError(f"no instance masters two switches: {masters}")


def streams_between(stack: Stack, victim_bridges: list[str]) -> tuple[str, str]:
    """The probes' source and destination leaves: from a leaf ``victim_bridges`` holds (its
    new master must re-plan it), else from the first leaf."""
    source = next((leaf for leaf in LEAVES if leaf in victim_bridges), LEAVES[0])
    return source, next(leaf for leaf in LEAVES if leaf != source)


def probe_losses(
    running: faults.Streams, since_unix: float, timeout_s: float = 30
) -> tuple[dict[str, int], dict[str, list[float]]]:
    """Datagrams each probe class lost, and when each was due, in seconds after
    ``since_unix`` (the fault), so a loss can be told to the kill, the takeover or a reroute."""
    lost: dict[str, int] = {}
    due: dict[str, list[float]] = {}
    for name, sender in running.senders.items():
        if name not in faults.PROBE_PORTS:
            continue
        sent = faults.probe.report(f"{name} probe sender", sender, timeout_s)
        got = faults.probe.report(f"{name} probe receiver", running.receivers[name], timeout_s)
        arrived = {seq for seq, _ in got["arrivals"]}
        start, rate = float(sent["start_unix"]), float(sent["rate"])
        missing = [seq for seq in range(int(sent["sent"])) if seq not in arrived]
        lost[name] = len(missing)
        due[name] = [round(start + seq / rate - since_unix, 3) for seq in missing]
    return lost, due


def assert_at_most_lost(lost: dict[str, int], limit: int) -> None:
    """At most ``limit`` datagrams of each class lost: a few milliseconds at the probes'
    rate, where a takeover that stopped forwarding would cost hundreds."""
    assert set(lost) == set(faults.PROBE_PORTS), lost
    assert all(count <= limit for count in lost.values()), f"probe datagrams lost: {lost}"


def assert_nothing_lost(lost: dict[str, int]) -> None:
    assert set(lost) == set(faults.PROBE_PORTS), lost
    assert lost == dict.fromkeys(faults.PROBE_PORTS, 0), f"probe datagrams lost: {lost}"


@contextmanager
def link_down(stack: Stack, a: str, b: str) -> Iterator[None]:
    stack.net.configLinkStatus(a, b, "down")
    try:
        yield
    finally:
        stack.net.configLinkStatus(a, b, "up")


# --------------------------------------------------------------------------------------------
# 1. a master killed
# --------------------------------------------------------------------------------------------


def test_a_killed_masters_switches_are_taken_over_and_a_remote_failure_routed_around(
    fabric: Stack,
) -> None:
    """SIGKILL of the instance mastering half the switches, and right after it a link on the
    far side of the fabric fails: at most one probe datagram a class is lost (they cross the
    other spine), the survivors master its switches, writing no flow mod beyond what the
    failure changed, and route the source leaf around the failed link."""
    stack = fabric
    victim, taken, survivors = split(stack)
    source, dest = streams_between(stack, taken)
    sender, server = stack.host(LEAF_HOSTS[source][0]), stack.host(LEAF_HOSTS[dest][0])
    # The failed link comes back only after the probes have ended (the ExitStack outlives
    # them): its return re-routes the source leaf again, which is not what this measures.
    with checked(stack), ExitStack() as failure:
        before = {bridge: entries(bridge) for bridge in taken}
        adds_before = {
            (name, bridge): flow_mods(stack.controllers[name], bridge, command="add")
            for name in survivors
            for bridge in taken
        }
        offsets = {name: len(stack.controllers[name].log()) for name in survivors}
        with faults.streams(sender, server, 6.0, bulk=False) as running:
            time.sleep(0.5)  # the streams' first datagrams have crossed
            spine = probe_spine(source)
            failed = next(s for s in SPINES if s != spine)
            killed, killed_unix = time.monotonic(), time.time()
            stack.controllers[victim].kill()
            failure.enter_context(link_down(stack, failed, dest))
            harness.wait_for(
                f"{victim}'s switches {taken} mastered by {survivors}",
                lambda: mastered_by(stack, taken, survivors),
                TAKEOVER_S,
            )
            taken_over = time.monotonic() - killed
            harness.wait_for(
                f"{source} and {dest} to stop sending to each other through {failed}",
                lambda: routed_around(source, dest, spine),
                TAKEOVER_S,
                0.1,
            )
            routed = time.monotonic() - killed
            new_masters = {b: stack.masters()[b][0] for b in taken}
            wait_all_in_sync(stack, stack.policy, 10)
            adds = {
                b: flow_mods(stack.controllers[new_masters[b]], b, command="add")
                - adds_before[(new_masters[b], b)]
                for b in taken
            }
            after = {bridge: entries(bridge) for bridge in taken}
            stack.pingall(10)
            lost, lost_at = probe_losses(running, killed_unix)  # waits the streams out
    # The next test starts from the whole fabric: the link's return is routed before it does.
    harness.wait_for(
        f"{source} and {dest} to use both spines again",
        lambda: spread_over_both_spines(source, dest),
        TAKEOVER_S,
        0.1,
    )
    added = {b: len(after[b] - before[b]) for b in taken}
    syncs = [
        line.split(" INFO ", 1)[1]
        for b, name in new_masters.items()
        for line in stack.controllers[name].log()[offsets[name] :].splitlines()
        if f"switch {DPIDS[b]} in sync" in line
    ]
    print(
        f"\nSIGKILL of {victim} (master of {taken}), {failed}-{dest} down right after:"
        f" mastered again by {new_masters} {taken_over:.2f} s after the kill, {source} routed"
        f" around {routed:.2f} s after it; entries added by the new masters {adds}, new"
        f" entries in the tables {added}; their syncs {syncs}; probe datagrams lost {lost}"
        f" (due at {lost_at} s)"
    )
    # The takeover alone loses nothing (the four tests below assert 0); the failure re-routes
    # the source leaf's group while the probes cross it, which has cost one datagram of a
    # class in about one run in five (a single-controller remote failure may cost 300 ms:
    # test_fabric.py). One datagram per class is the margin; more is a takeover's doing.
    assert_at_most_lost(lost, 1)
    # The new masters read each switch and wrote only what the failure changed: every entry
    # they added is new in the table (none rewritten as it was).
    assert adds == {b: float(added[b]) for b in taken}, (adds, added, syncs)


def test_a_restarted_instance_takes_its_share_without_losing_a_packet(stack: Stack) -> None:
    """A dead instance comes back (the first test leaves one dead; alone, this test kills
    one): it is handed its share by a live owner, and takes it without a storm and without
    forgetting what the fabric knows: its hand-over syncs write nothing, every host still
    reaches every other, and probe streams crossing the fabric lose nothing."""
    dead = [i.name for i in stack.controllers if not i.running]
    if not dead:
        wait_settled(stack)
        victim, taken, survivors = split(stack)
        stack.controllers[victim].kill()
        harness.wait_for(
            f"{victim}'s switches mastered by {survivors}",
            lambda: mastered_by(stack, taken, survivors),
            TAKEOVER_S,
        )
        dead = [victim]
    (name,) = dead
    stack.pingall(REACHABLE_S)
    returning = stack.controllers[name]
    sender, server = stack.host(LEAF_HOSTS[LEAVES[0]][0]), stack.host(LEAF_HOSTS[LEAVES[1]][0])
    with checked(stack), faults.streams(sender, server, 5.0, bulk=False) as running:
        time.sleep(0.5)
        restarted, restarted_unix = time.monotonic(), time.time()
        stack.controllers.start(name)
        wait_settled(stack)
        settled_s = time.monotonic() - restarted
        mine = [bridge for bridge, names in stack.masters().items() if names == [name]]
        unreachable = stack.unreachable()
        lost, lost_at = probe_losses(running, restarted_unix)
        writes = {
            bridge: flow_mods(returning, bridge, command="add")
            + flow_mods(returning, bridge, command="delete")
            for bridge in mine
        }
        syncs = [
            line.split(" INFO ", 1)[1]
            for line in returning.log().splitlines()
            if " in sync (" in line
        ]
    print(
        f"\n{name} restarted: switches split 2/1/1 again {settled_s:.2f} s after, it masters"
        f" {mine}; its flow mods there {writes}; its syncs {syncs}; unreachable pairs right"
        f" after {unreachable}; probe datagrams lost {lost} (due at {lost_at} s)"
    )
    assert writes == dict.fromkeys(mine, 0.0), syncs
    assert unreachable == []
    assert_nothing_lost(lost)


# --------------------------------------------------------------------------------------------
# 2. a master paused
# --------------------------------------------------------------------------------------------


def test_a_paused_master_is_fenced_and_steps_down(fabric: Stack) -> None:
    """SIGSTOP of a master; the others take its switches (writing nothing) and apply a new
    policy, and a port of one of its switches flaps; SIGCONT: the woken instance, which still
    believes itself master of the old policy and has a port change to act on, gets none of
    its writes accepted (the tables and queues hold the new policy throughout; the errors it
    got are counted), finds its lease gone and steps down; what it masters again after that,
    it takes with a newer generation."""
    stack = fabric
    victim, taken, survivors = split(stack)
    source, dest = streams_between(stack, taken)
    sender, server = stack.host(LEAF_HOSTS[source][0]), stack.host(LEAF_HOSTS[dest][0])
    sleeper = stack.controllers[victim]
    old_rates = queue_rates()
    new_doc = document(marker=4444, training="50%")
    new_policy = policy_of(new_doc)
    ports = [port for bridge in BRIDGES for port in switch_ports(bridge)]
    with checked(stack, stale=victim):
        before = {bridge: entries(bridge) for bridge in taken}
        mods_before = {
            (name, bridge): flow_mods(stack.controllers[name], bridge)
            for name in survivors
            for bridge in taken
        }
        offset = len(sleeper.log())
        offsets = {name: len(stack.controllers[name].log()) for name in survivors}
        with faults.streams(sender, server, 9.0, bulk=False) as running:
            time.sleep(0.5)
            flapped = off_path_link(taken, probe_spine(source), dest)
            paused = time.monotonic()
            paused_unix = time.time()
            sleeper.pause()
            harness.wait_for(
                f"{victim}'s switches {taken} mastered by {survivors}",
                lambda: mastered_by(stack, taken, survivors),
                TAKEOVER_S,
            )
            taken_over = time.monotonic() - paused
            new_masters = {b: stack.masters()[b][0] for b in taken}
            generations = {
                m["dpid"]: m["generation"]
                for c in stack.get("/v1/controllers").json()["controllers"]
                if c["id"] in survivors
                for m in c["masters"]
            }
            answer = stack.put_policy(new_doc)
            assert answer.status_code in (200, 201), answer.text
            wait_all_in_sync(stack, new_policy, 10)
            new_rates = queue_rates()
            stale_rates = set().union(*old_rates.values()) - set().union(*new_rates.values())
            assert stale_rates, "the new version must change the queues, to tell them apart"
            held = {bridge: policy_entries(bridge) for bridge in BRIDGES}
            mods = {
                b: flow_mods(stack.controllers[new_masters[b]], b)
                - mods_before[(new_masters[b], b)]
                for b in taken
            }
            after = {bridge: entries(bridge) for bridge in taken}
            # Something for the sleeper to act on the moment it wakes: a port of a switch it
            # believes it masters goes down and up (off the probes' path); the port status
            # waits in its socket, and it re-plans that switch before it has renewed.
            stack.net.configLinkStatus(*flapped, "down")
            time.sleep(0.2)
            stack.net.configLinkStatus(*flapped, "up")
            resumed = time.monotonic()
            sleeper.resume()
            # Until the woken instance has stepped down and the switches are split again, no
            # entry of the old version comes back, none of the new one goes, and no queue
            # takes the old version's rates.
            drift: list[str] = []

            def watch() -> None:
                for bridge in BRIDGES:
                    if policy_entries(bridge) != held[bridge]:
                        drift.append(f"{bridge} entries")
                for port, rates in multi.queue_min_rates(ports).items():
                    if rates & stale_rates:
                        drift.append(f"{port} queues {sorted(rates)}")

            def stepped_down() -> bool:
                watch()
                downs = {
                    e["switch"]
                    for e in mastership_events(stack, paused_unix)
                    if e["op"] == "stepped-down" and e["instance"] == victim
                }
                return downs >= {DPIDS[b] for b in taken}

            harness.wait_for(f"{victim} to step down from {taken}", stepped_down, 10, 0.1)
            stepped = time.monotonic() - resumed
            wait_settled(stack)
            watch()
            lost, lost_at = probe_losses(running, paused_unix)
        wait_all_in_sync(stack, new_policy, 10)
        stack.policy = new_policy
        view = stack.get("/v1/controllers").json()
    log = sleeper.log()[offset:]
    refused_writes = sum(int(n) for n in re.findall(r"(\d+) message\(s\) rejected", log))
    refused_writes += len(re.findall(r": switch error type=1 code=10 ", log))
    stale_roles = log.count("has seen a newer generation id")
    events = [e for e in mastership_events(stack, paused_unix) if e["instance"] == victim]
    changed = {b: len(after[b] - before[b]) + len(before[b] - after[b]) for b in taken}
    takeover_syncs = [
        line.split(" INFO ", 1)[1]
        for b, name in new_masters.items()
        for line in stack.controllers[name].log()[offsets[name] :].splitlines()
        if f"switch {DPIDS[b]} in sync (" in line and "mastership" in line
    ]
    print(
        f"\nSIGSTOP of {victim} (master of {taken}): mastered by {new_masters}"
        f" {taken_over:.2f} s after the pause ({takeover_syncs}); their flow mods through the"
        f" takeover and the new version {mods}, entries the version changed {changed};"
        f" {flapped[0]}-{flapped[1]} flapped while asleep; SIGCONT: stepped down"
        f" {stepped:.2f} s after; errors it got:"
        f" writes refused (OFPBRC_IS_SLAVE) {refused_writes}, role requests refused as stale"
        f" {stale_roles}; its mastership events"
        f" {[(e['op'], e['switch'][-4:], e.get('reason', '')) for e in events]};"
        f" probe datagrams lost {lost} (due at {lost_at} s)"
    )
    assert drift == [], f"changed while {victim} woke up: {drift}"
    # The new masters read each switch and sent only the new version's difference.
    assert mods == {b: float(changed[b]) for b in taken}, (mods, changed)
    # The issue asks this test for fencing and a step-down, not for zero loss. The new
    # policy changes the queues' rates, and while OVS reconfigures the ports' HTB classes the
    # best-effort probe has lost two consecutive datagrams (4 ms at 500/s) in about one
    # module run in three; a stale master's write or a gap in mastership would cost far more.
    assert_at_most_lost(lost, 3)
    mine = next(c for c in view["controllers"] if c["id"] == victim)
    assert mine["alive"]
    for mastered in mine["masters"]:  # taken again after stepping down: a newer generation
        assert mastered["generation"] > generations.get(mastered["dpid"], 0), (
            mastered,
            generations,
        )


def off_path_link(taken: list[str], probe_via: str, dest: str) -> tuple[str, str]:
    """A link of one of ``taken`` that the probes (first host to first host, through
    ``probe_via``) do not cross: a leaf's second host, or the other spine's downlink."""
    for leaf in LEAVES:
        if leaf in taken:
            return leaf, LEAF_HOSTS[leaf][1]
    spine = next(s for s in taken if s != probe_via)
    return spine, dest


def mastered_by(stack: Stack, bridges: list[str], names: list[str]) -> bool:
    """Each of ``bridges`` has one master, one of ``names`` (Open vSwitch's word)."""
    masters = stack.masters()
    return all(len(masters[b]) == 1 and masters[b][0] in names for b in bridges)


def queue_rates() -> dict[str, set[int]]:
    return multi.queue_min_rates([port for bridge in BRIDGES for port in switch_ports(bridge)])


# --------------------------------------------------------------------------------------------
# 3. a policy change during a takeover
# --------------------------------------------------------------------------------------------


def test_a_policy_change_during_a_takeover_reaches_every_switch(fabric: Stack) -> None:
    """A version written while half the switches have a master that will never apply it (the
    instance is frozen, then killed) reaches every switch: the survivors' own at once, the
    dead instance's through their new masters, which learnt of it as slaves."""
    stack = fabric
    victim, taken, survivors = split(stack)
    source, dest = streams_between(stack, taken)
    sender, server = stack.host(LEAF_HOSTS[source][0]), stack.host(LEAF_HOSTS[dest][0])
    new_doc = document(marker=5555, training="70%")
    new_policy = policy_of(new_doc)
    with checked(stack), faults.streams(sender, server, 5.0, bulk=False) as running:
        time.sleep(0.5)
        # Frozen first, so the version is written while its switches are still its own (its
        # lease runs) and it cannot apply it; then killed, so the survivors take over at once.
        stack.controllers[victim].pause()
        answer = stack.put_policy(new_doc)
        assert answer.status_code in (200, 201), answer.text
        owners = {
            m["dpid"]: c["id"]
            for c in stack.get("/v1/controllers").json()["controllers"]
            for m in c["masters"]
        }
        killed, killed_unix = time.monotonic(), time.time()
        stack.controllers[victim].kill()
        assert {owners.get(DPIDS[b]) for b in taken} == {victim}, owners
        wait_all_in_sync(stack, new_policy, TAKEOVER_S + 5)
        applied = time.monotonic() - killed
        # Open vSwitch writes a connection's role to OVSDB a little after the fact.
        harness.wait_for(
            f"{victim}'s switches {taken} mastered by {survivors}",
            lambda: mastered_by(stack, taken, survivors),
            TAKEOVER_S,
        )
        masters = stack.masters()
        lost, lost_at = probe_losses(running, killed_unix)
    stack.policy = new_policy
    print(
        f"\nversion {answer.json()['version']} written while {victim} (master of {taken}) was"
        f" frozen, then SIGKILL: on every switch (flows, queues, tc filters) {applied:.2f} s"
        f" after the kill; masters {masters}; probe datagrams lost {lost}"
        f" (due at {lost_at} s)"
    )
    assert_nothing_lost(lost)


# --------------------------------------------------------------------------------------------
# 4. the Redis primary killed (last: it leaves the old replica as the primary)
# --------------------------------------------------------------------------------------------


MARKER_BASE = 20000
"""Write ``n`` of the stream carries the marker ``MARKER_BASE + n``: its version is
recognised in the store afterwards."""


def marked_puts(stack: Stack) -> Callable[[int], tuple[int, dict[str, Any]]]:
    """The writer's ``put``: the base policy with write ``number``'s marker."""

    def put(number: int) -> tuple[int, dict[str, Any]]:
        try:
            response = stack.put_policy(document(marker=MARKER_BASE + number), RETRY_S + 5)
            return response.status_code, response.json()
        except httpx.HTTPError as exc:
            return 0, {"detail": str(exc)}

    return put


def test_the_redis_primary_killed_during_policy_writes(fabric: Stack) -> None:
    """Policy versions stream through the API; the Redis primary gets SIGKILL: every version
    the API acknowledged is in the store afterwards, the API answers again within the
    Sentinels' failover, and the controllers master every switch again and apply the last
    version."""
    stack = fabric
    sender, server = stack.host(LEAF_HOSTS[LEAVES[0]][0]), stack.host(LEAF_HOSTS[LEAVES[1]][0])
    writer = Writer(marked_puts(stack), gap_s=0.2)
    thread = threading.Thread(target=writer.run, name="policy-writer", daemon=True)
    with checked(stack), faults.streams(sender, server, 8.0, bulk=False) as running:
        thread.start()
        try:
            writer.wait("3 writes acknowledged", lambda a: sum(x.acked for x in a) >= 3, 10)
            killed, killed_unix = time.monotonic(), time.time()
            stack.sentinels.nodes["primary"].kill()
            writer.wait(
                "an answer from the new primary",
                lambda a: any(x.sent >= killed and (x.acked or x.not_replicated) for x in a),
                RETRY_S + 10,
            )
            answered = next(
                x.done for x in writer.answers if x.sent >= killed and (x.acked or x.not_replicated)
            )
            # The old primary back as the new one's replica: writes are acknowledged again.
            restarted = time.monotonic()
            stack.sentinels.start_primary(replica_of=stack.sentinels.ports[1])
            writer.wait(
                "2 writes acknowledged after the old primary came back",
                lambda a: sum(x.acked and x.sent >= restarted for x in a) >= 2,
                20,
            )
        finally:
            writer.stop.set()
            thread.join(timeout=RETRY_S + 10)
        lost, lost_at = probe_losses(running, killed_unix)
        active = stack.get("/v1/policy")
        assert active.status_code == 200, active.text
        final = active.json()
        final_policy = policy_of(final["policy"])
        wait_all_in_sync(stack, final_policy, 15)
        wait_settled(stack)
        stack.policy = final_policy
        store = PolicyStore(connect(stack.url))
        versions = {
            a.body["version"]: (MARKER_BASE + a.number, store.get(a.body["version"]))
            for a in writer.answers
            if a.acked
        }
    acked = [a for a in writer.answers if a.acked]
    missing = [
        (version, marker)
        for version, (marker, stored) in versions.items()
        if stored is None or stored.document["rules"][-1]["match"]["tcp_dst"] != marker
    ]
    refused = sum(a.not_replicated for a in writer.answers)
    print(
        f"\nRedis primary SIGKILL (down-after {DOWN_AFTER_MS} ms): the API answered from the new"
        f" primary {answered - killed:.2f} s after; writes acknowledged {len(acked)}, lost"
        f" {len(missing)}, refused as not replicated {refused}, other"
        f" {len(writer.answers) - len(acked) - refused}; active version {final['version']}"
        f" on every switch; probe datagrams lost {lost} (due at {lost_at} s)"
    )
    assert acked and final["version"] >= max(a.body["version"] for a in acked)
    assert missing == [], f"acknowledged versions lost or changed: {missing}"
    assert answered - killed <= ANSWER_AGAIN_S
    assert all(a.acked or a.status == 503 for a in writer.answers), {
        a.status for a in writer.answers
    }
    # Every lease runs out during the failover (longer than the TTL); the instances renew on
    # the new primary one by one and presume the others alive for a TTL, so no switch
    # changes master (it did: ~330 datagrams a class lost in one run in ten, while the
    # first to renew held every switch; tests/mastership/test_store_failover.py).
    assert_nothing_lost(lost)
