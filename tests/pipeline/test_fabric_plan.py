"""Fabric forwarding, proven by walking packets switch by switch through simulated pipelines.

Every switch of a leaf-spine gets the policy's classification and marking
(its ``NORMAL`` entry removed) plus its ``fabric_plan``; a packet's outputs
are followed over the links to the next switch until it reaches host ports
or the controller.
"""

from __future__ import annotations

import ipaddress
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from controller.fabric.model import Host, Link, Path, PortRef, Topology
from controller.flowid import FlowId
from controller.pipeline import tables
from controller.pipeline.fabric import (
    PUNT_METER_ID,
    FabricPlan,
    ecmp_group,
    fabric_plan,
)
from controller.pipeline.flows import (
    OFPP_CONTROLLER,
    OFPP_NORMAL,
    ApplyActions,
    FlowEntry,
    Group,
    MatchField,
    Output,
    Owner,
    make_match,
)
from controller.pipeline.groups import Bucket, GroupEntry, GroupType, MeterEntry
from controller.pipeline.planner import plan_switch
from controller.pipeline.simulate import flow_hash, run_packet, select_bucket
from controller.policy.model import Policy

SPINES = (1, 2)
LEAVES = (101, 102, 103)
HOST_PORTS = (10, 11)
"""Leaf ``100 + i`` port ``j`` faces spine ``j``; spine port ``i`` faces leaf ``100 + i``."""

BROADCAST = 0xFFFFFFFFFFFF
LLDP_MAC = 0x0180C200000E


def cable(leaf_dpid: int, spine_dpid: int) -> tuple[Link, Link]:
    up = Link(PortRef(leaf_dpid, spine_dpid), PortRef(spine_dpid, leaf_dpid - 100))
    return up, up.reversed()


def host(leaf_dpid: int, port: int) -> Host:
    number = (leaf_dpid - 100) * 16 + port
    return Host(0x020000000000 + number, PortRef(leaf_dpid, port), int(ip("10.0.0.0")) + number)


def ip(text: str) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(text)


def fabric_topology(spines: tuple[int, ...] = SPINES, leaves: tuple[int, ...] = LEAVES) -> Topology:
    topology = Topology()
    for dpid in (*spines, *leaves):
        topology = topology.with_switch(dpid)
    for leaf_dpid in leaves:
        for spine_dpid in spines:
            for link in cable(leaf_dpid, spine_dpid):
                topology = topology.with_link(link)
        for port in HOST_PORTS:
            topology = topology.with_host(host(leaf_dpid, port))
    return topology


HOSTS = tuple(host(leaf_dpid, port) for leaf_dpid in LEAVES for port in HOST_PORTS)


def tcp(src: Host, dst: Host, sport: int = 40000, dport: int = 5201) -> dict[str, int]:
    assert src.ipv4 is not None and dst.ipv4 is not None
    return {
        "eth_src": src.mac,
        "eth_dst": dst.mac,
        "eth_type": 0x0800,
        "ip_proto": 6,
        "ip_dscp": 0,
        "ipv4_src": src.ipv4,
        "ipv4_dst": dst.ipv4,
        "tcp_src": sport,
        "tcp_dst": dport,
    }


def flow_of(packet: Mapping[str, int]) -> FlowId:
    return FlowId(
        packet["eth_type"],
        packet["ip_proto"],
        packet["ipv4_src"],
        packet["ipv4_dst"],
        packet["tcp_src"],
        packet["tcp_dst"],
    )


@dataclass
class Walk:
    """Where a packet went: host ports it left by, switches that punted it, ports it crossed."""

    delivered: list[PortRef] = field(default_factory=list)
    punted: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)
    """(dpid, meters passed) per packet-in."""
    crossed: list[PortRef] = field(default_factory=list)
    """Every fabric port the packet (or a copy) left by, in order."""


@dataclass
class Fabric:
    """Every switch's flows and groups, and the links between them."""

    topology: Topology
    flows: dict[int, tuple[FlowEntry, ...]]
    groups: dict[int, dict[int, GroupEntry]]
    plans: dict[int, FabricPlan]
    dead: frozenset[PortRef] = frozenset()

    def live_ports(self, dpid: int) -> frozenset[int] | None:
        if not self.dead:
            return None
        ports = {ref.port for link in self.topology.links for ref in (link.src, link.dst)}
        ports |= {h.at.port for h in self.topology.hosts}
        return frozenset(p for p in ports if PortRef(dpid, p) not in self.dead)

    def send(self, packet: Mapping[str, int], at: PortRef) -> Walk:
        """Inject ``packet`` arriving at port ``at`` and follow every copy to its end."""
        links = {link.src: link.dst for link in self.topology.usable_links}
        walk = Walk()
        pending = [(at, dict(packet))]
        while pending:
            assert len(walk.crossed) < 200, "the packet loops"
            arrival, fields = pending.pop(0)
            verdict = run_packet(
                self.flows[arrival.dpid],
                {**fields, "in_port": arrival.port},
                self.groups[arrival.dpid],
                self.live_ports(arrival.dpid),
            )
            onward = {k: v for k, v in verdict.packet.items() if k != "in_port"}
            for port in verdict.outputs:
                out = PortRef(arrival.dpid, port)
                if port == OFPP_CONTROLLER:
                    walk.punted.append((arrival.dpid, verdict.meters))
                elif out in links:
                    assert out not in self.dead, f"sent into dead port {out}"
                    walk.crossed.append(out)
                    pending.append((links[out], onward))
                else:
                    walk.delivered.append(out)
        return walk


def without_normal(flows: tuple[FlowEntry, ...]) -> tuple[FlowEntry, ...]:
    kept = tuple(
        flow for flow in flows if flow.instructions != (ApplyActions((Output(OFPP_NORMAL),)),)
    )
    assert len(kept) == len(flows) - 1
    return kept


def build(
    policy: Policy,
    topology: Topology,
    pinned: Mapping[FlowId, Path] | None = None,
    dead: frozenset[PortRef] = frozenset(),
) -> Fabric:
    base = without_normal(plan_switch(policy, {}).flows)
    flows: dict[int, tuple[FlowEntry, ...]] = {}
    groups: dict[int, dict[int, GroupEntry]] = {}
    plans: dict[int, FabricPlan] = {}
    for dpid in sorted(topology.switches):
        edge = frozenset(h.at.port for h in topology.hosts_at(dpid))
        plan = fabric_plan(topology, dpid, edge, pinned or {})
        plans[dpid] = plan
        flows[dpid] = (*base, *plan.flows)
        groups[dpid] = {group.group_id: group for group in plan.groups}
    return Fabric(topology, flows, groups, plans, dead)


@pytest.fixture
def fabric(default_policy: Policy) -> Fabric:
    return build(default_policy, fabric_topology())


# --------------------------------------------------------------------------------------------
# unicast
# --------------------------------------------------------------------------------------------


def test_every_host_reaches_every_other_host_exactly_once(fabric: Fabric) -> None:
    for src in HOSTS:
        for dst in HOSTS:
            if src == dst:
                continue
            walk = fabric.send(tcp(src, dst), src.at)
            assert walk.delivered == [dst.at], (src, dst)
            assert walk.punted == []
            hops = 0 if src.at.dpid == dst.at.dpid else 2
            assert len(walk.crossed) == hops


def test_marking_still_applies_on_the_way(fabric: Fabric) -> None:
    rdma = {**tcp(HOSTS[0], HOSTS[-1]), "ip_proto": 17, "udp_src": 1000, "udp_dst": 4791}
    del rdma["tcp_src"], rdma["tcp_dst"]
    verdict = run_packet(
        fabric.flows[LEAVES[0]], {**rdma, "in_port": HOSTS[0].at.port}, fabric.groups[LEAVES[0]]
    )
    assert verdict.packet["ip_dscp"] == 26  # training class (default policy, RoCEv2)
    assert verdict.outputs[0] in (1, 2)
    assert fabric.send(rdma, HOSTS[0].at).delivered == [HOSTS[-1].at]


def test_different_flows_use_both_spines(fabric: Fabric) -> None:
    src, dst = HOSTS[0], HOSTS[-1]
    uplinks = Counter(
        fabric.send(tcp(src, dst, sport), src.at).crossed[0] for sport in range(40000, 40064)
    )
    assert set(uplinks) == {PortRef(src.at.dpid, 1), PortRef(src.at.dpid, 2)}
    assert min(uplinks.values()) >= 16  # a hash, not a coin that always lands one way
    # one flow, one path: every packet of a flow takes the same uplink
    again = {fabric.send(tcp(src, dst, 40007), src.at).crossed[0] for _ in range(5)}
    assert len(again) == 1


def test_a_dead_uplink_is_skipped_by_the_select_group(default_policy: Policy) -> None:
    src, dst = HOSTS[0], HOSTS[-1]
    dead = frozenset({PortRef(src.at.dpid, 1)})
    fabric = build(default_policy, fabric_topology(), dead=dead)
    for sport in range(40000, 40032):
        walk = fabric.send(tcp(src, dst, sport), src.at)
        assert walk.delivered == [dst.at]
        assert walk.crossed[0] == PortRef(src.at.dpid, 2)


def test_no_live_bucket_drops() -> None:
    group = ecmp_group((1, 2))
    assert select_bucket(group, {"eth_type": 0x800}, frozenset({7})) == ()
    entry = FlowEntry(0, 1, (), (ApplyActions((Group(group.group_id),)),), Owner.FORWARDING)
    verdict = run_packet([entry], {"eth_type": 0x800}, {group.group_id: group}, frozenset())
    assert verdict.outputs == ()


def test_select_hash_is_the_five_tuple() -> None:
    packet = tcp(HOSTS[0], HOSTS[-1])
    assert flow_hash(packet) == flow_hash({**packet, "ip_dscp": 46, "eth_src": 1})
    assert flow_hash(packet) != flow_hash({**packet, "tcp_src": 40001})
    arp = {"eth_type": 0x0806, "eth_src": 1, "eth_dst": BROADCAST}
    assert flow_hash(arp) != flow_hash({**arp, "eth_src": 2})


def test_unreachable_destination_has_no_entry_and_is_punted(default_policy: Policy) -> None:
    topology = fabric_topology()
    for spine_dpid in SPINES:
        topology = topology.without_links(cable(LEAVES[-1], spine_dpid))
    fabric = build(default_policy, topology)
    src, dst = HOSTS[0], HOSTS[-1]
    assert not any(
        flow.match == make_match(MatchField("eth_dst", dst.mac))
        for flow in fabric.plans[src.at.dpid].flows
    )
    walk = fabric.send(tcp(src, dst), src.at)
    assert walk.delivered == [] and walk.punted == [(src.at.dpid, (PUNT_METER_ID,))]


def test_unknown_unicast_goes_to_the_controller_through_the_meter(fabric: Fabric) -> None:
    stranger = {**tcp(HOSTS[0], HOSTS[1]), "eth_dst": 0x02FFFFFFFFFF}
    walk = fabric.send(stranger, HOSTS[0].at)
    assert walk.delivered == []
    assert walk.punted == [(HOSTS[0].at.dpid, (PUNT_METER_ID,))]


# --------------------------------------------------------------------------------------------
# broadcast, discovery, ARP
# --------------------------------------------------------------------------------------------


def dhcp_broadcast(src: Host) -> dict[str, int]:
    return {
        "eth_src": src.mac,
        "eth_dst": BROADCAST,
        "eth_type": 0x0800,
        "ip_proto": 17,
        "ip_dscp": 0,
        "ipv4_src": 0,
        "ipv4_dst": int(ip("255.255.255.255")),
        "udp_src": 68,
        "udp_dst": 67,
    }


def test_broadcast_reaches_every_edge_port_exactly_once(fabric: Fabric) -> None:
    for src in HOSTS:
        walk = fabric.send(dhcp_broadcast(src), src.at)
        assert Counter(walk.delivered) == Counter(h.at for h in HOSTS if h != src)
        assert walk.punted == []
        # a tree over 5 switches has 4 cables; each is crossed once, in one direction
        assert len(walk.crossed) == len(set(walk.crossed)) == 4


def test_multicast_copies_arriving_off_the_tree_are_dropped(fabric: Fabric) -> None:
    # spine 2 joins the tree through leaf 101 only: its ports to 102 and 103 are off the tree
    off_tree = PortRef(SPINES[1], 2)
    walk = fabric.send(dhcp_broadcast(HOSTS[2]), off_tree)
    assert walk.delivered == [] and walk.punted == [] and walk.crossed == []
    on_tree = fabric.send(dhcp_broadcast(HOSTS[0]), PortRef(SPINES[1], 1))
    assert on_tree.crossed == []  # the tree's only port at spine 2 is the one it came in by


def test_arp_and_lldp_go_to_the_controller_through_the_meter(fabric: Fabric) -> None:
    src = HOSTS[0]
    arp = {"eth_src": src.mac, "eth_dst": BROADCAST, "eth_type": 0x0806, "arp_op": 1}
    walk = fabric.send(arp, src.at)
    assert walk.delivered == [] and walk.crossed == []
    assert walk.punted == [(src.at.dpid, (PUNT_METER_ID,))]
    lldp = {"eth_src": 0x020000000001, "eth_dst": LLDP_MAC, "eth_type": 0x88CC}
    for dpid in (SPINES[0], LEAVES[1]):
        walk = fabric.send(lldp, PortRef(dpid, 1))
        assert walk.punted == [(dpid, (PUNT_METER_ID,))] and walk.crossed == []


def test_punt_entries_sit_above_every_rule_and_job(fabric: Fabric) -> None:
    classify = [f for f in fabric.flows[LEAVES[0]] if f.table_id == tables.CLASSIFY]
    punts = [f for f in classify if f.owner is Owner.DISCOVERY]
    assert {f.match for f in punts} == {
        make_match(MatchField("eth_type", 0x88CC)),
        make_match(MatchField("eth_type", 0x0806)),
    }
    assert all(
        f.priority < tables.PUNT_PRIORITY for f in classify if f.owner is not Owner.DISCOVERY
    )
    assert tables.job_priority(0) < tables.PUNT_PRIORITY


def test_the_meter_limits_packet_ins() -> None:
    plan = fabric_plan(fabric_topology(), LEAVES[0], frozenset(HOST_PORTS), {}, punt_rate_pps=250)
    assert plan.meters == (MeterEntry(PUNT_METER_ID, 250, burst=25),)
    assert fabric_plan(Topology().with_switch(5), 5, frozenset(), {}, 5).meters[0].burst == 1
    with pytest.raises(ValueError, match="punt rate"):
        fabric_plan(Topology(), 5, frozenset(), {}, punt_rate_pps=0)


def test_a_lone_switch_floods_between_its_edge_ports_only() -> None:
    topology = Topology().with_switch(7).with_host(Host(0x0200000000AA, PortRef(7, 1)))
    plan = fabric_plan(topology, 7, frozenset({1, 2, 3}), {})
    flood = {f.match: f.instructions for f in plan.flows if f.priority == tables.FLOOD_PRIORITY}
    assert len(flood) == 3
    outputs = {
        ports
        for instructions in flood.values()
        for ports in [tuple(a.port for a in instructions[0].actions)]  # type: ignore[union-attr]
    }
    assert outputs == {(2, 3), (1, 3), (1, 2)}
    alone = fabric_plan(topology, 7, frozenset({1}), {})
    assert [f.instructions for f in alone.flows if f.priority == tables.FLOOD_PRIORITY] == [()]


def test_a_port_that_showed_a_link_never_floods_as_an_edge_port() -> None:
    topology = fabric_topology().without_links([cable(LEAVES[0], SPINES[0])[1]])  # half-known
    plan = fabric_plan(topology, LEAVES[0], frozenset({1, *HOST_PORTS}), {})
    in_ports = {
        field.value
        for flow in plan.flows
        if flow.priority == tables.FLOOD_PRIORITY
        for field in flow.match
        if field.name == "in_port"
    }
    assert 1 not in in_ports
    assert in_ports == {2, *HOST_PORTS}


# --------------------------------------------------------------------------------------------
# placement
# --------------------------------------------------------------------------------------------


def test_pinned_flows_take_their_path(default_policy: Policy) -> None:
    src, dst = HOSTS[0], HOSTS[-1]
    plain = build(default_policy, fabric_topology())
    flows = [tcp(src, dst, sport) for sport in range(40000, 40016)]
    natural = {flow_of(p): plain.send(p, src.at).crossed[0].port for p in flows}
    assert set(natural.values()) == {1, 2}
    # pin every flow on the spine its hash did not pick
    pinned: dict[FlowId, Path] = {
        flow: ((src.at.dpid, 3 - port), (3 - port, dst.at.dpid - 100))
        for flow, port in natural.items()
    }
    fabric = build(default_policy, fabric_topology(), pinned)
    for packet in flows:
        walk = fabric.send(packet, src.at)
        path = pinned[flow_of(packet)]
        assert walk.crossed == [PortRef(*hop) for hop in path]
        assert walk.delivered == [dst.at]
    # the reverse direction is not pinned and still arrives
    back = tcp(dst, src, 5201, 40000)
    assert flow_of(back) not in pinned
    assert fabric.send(back, dst.at).delivered == [src.at]


def test_placement_entries_are_exact_matches_at_the_path_switches_only(
    default_policy: Policy,
) -> None:
    src, dst = HOSTS[0], HOSTS[-1]
    flow = flow_of(tcp(src, dst))
    path: Path = ((src.at.dpid, 2), (SPINES[1], 3))
    fabric = build(default_policy, fabric_topology(), {flow: path})
    for dpid, plan in fabric.plans.items():
        placed = [f for f in plan.flows if f.owner is Owner.PLACEMENT]
        if dpid in (src.at.dpid, SPINES[1]):
            (entry,) = placed
            assert entry.priority == tables.PLACEMENT_PRIORITY
            assert {f.name: f.value for f in entry.match} == flow.oxm_fields()
        else:
            assert placed == []


def test_a_pinned_hop_over_a_vanished_link_falls_back_to_ecmp(default_policy: Policy) -> None:
    src, dst = HOSTS[0], HOSTS[-1]
    flow = flow_of(tcp(src, dst))
    path: Path = ((src.at.dpid, 2), (SPINES[1], 3))
    topology = fabric_topology().without_links(cable(src.at.dpid, SPINES[1]))
    fabric = build(default_policy, topology, {flow: path})
    assert not any(f.owner is Owner.PLACEMENT for f in fabric.plans[src.at.dpid].flows)
    walk = fabric.send(tcp(src, dst), src.at)
    assert walk.crossed[0] == PortRef(src.at.dpid, 1)
    assert walk.delivered == [dst.at]


# --------------------------------------------------------------------------------------------
# groups
# --------------------------------------------------------------------------------------------


def group_of(plan: FabricPlan, mac: int) -> int | None:
    for flow in plan.flows:
        if flow.priority == tables.HOST_PRIORITY and flow.match[0].value == mac:
            (action,) = flow.instructions[0].actions  # type: ignore[union-attr]
            return action.group_id if isinstance(action, Group) else None
    raise AssertionError(f"no entry for {mac:#x}")


def test_hosts_with_the_same_next_hops_share_one_group(fabric: Fabric) -> None:
    plan = fabric.plans[LEAVES[0]]
    assert len(plan.groups) == 1
    (group,) = plan.groups
    assert group.type is GroupType.SELECT
    assert group.buckets == (
        Bucket((Output(1),), watch_port=1),
        Bucket((Output(2),), watch_port=2),
    )
    remote = [h for h in HOSTS if h.at.dpid != LEAVES[0]]
    assert {group_of(plan, h.mac) for h in remote} == {group.group_id}
    local = [h for h in HOSTS if h.at.dpid == LEAVES[0]]
    assert {group_of(plan, h.mac) for h in local} == {None}
    # every leaf sees its uplinks on the same ports: the same group everywhere
    assert {fabric.plans[dpid].groups for dpid in LEAVES} == {(group,)}
    # spines have one way down to each leaf: no group at all
    assert all(fabric.plans[dpid].groups == () for dpid in SPINES)


def test_groups_and_flows_are_stable_across_re_plans(default_policy: Policy) -> None:
    topology = fabric_topology()
    first = fabric_plan(topology, LEAVES[0], frozenset(HOST_PORTS), {})
    assert fabric_plan(topology, LEAVES[0], frozenset(HOST_PORTS), {}) == first
    # a new host elsewhere adds one entry and changes nothing else
    newcomer = Host(0x02000000BEEF, PortRef(LEAVES[2], 12), int(ip("10.0.0.99")))
    grown = fabric_plan(topology.with_host(newcomer), LEAVES[0], frozenset(HOST_PORTS), {})
    assert grown.groups == first.groups
    assert {f.cookie for f in first.flows} < {f.cookie for f in grown.flows}
    assert len(grown.flows) == len(first.flows) + 1


def test_a_cut_cable_gives_the_spine_a_group_around_it() -> None:
    topology = fabric_topology().without_links(cable(LEAVES[2], SPINES[0]))
    plan = fabric_plan(topology, SPINES[0], frozenset(), {})
    (group,) = plan.groups
    assert [b.watch_port for b in group.buckets] == [1, 2]
    assert {group_of(plan, h.mac) for h in HOSTS if h.at.dpid == LEAVES[2]} == {group.group_id}
    leaf_plan = fabric_plan(topology, LEAVES[2], frozenset(HOST_PORTS), {})
    assert leaf_plan.groups == ()
    assert group_of(leaf_plan, HOSTS[0].mac) is None


def test_plan_contents_by_table_and_owner(fabric: Fabric) -> None:
    plan = fabric.plans[LEAVES[0]]
    by = Counter((f.table_id, f.owner, f.priority) for f in plan.flows)
    assert by == {
        (tables.CLASSIFY, Owner.DISCOVERY, tables.PUNT_PRIORITY): 2,
        (tables.FORWARD, Owner.FORWARDING, tables.HOST_PRIORITY): len(HOSTS),
        (tables.FORWARD, Owner.FORWARDING, tables.FLOOD_PRIORITY): 4,  # 2 edge, 2 tree ports
        (tables.FORWARD, Owner.FORWARDING, tables.FLOOD_PRIORITY - 1): 1,
        (tables.FORWARD, Owner.FORWARDING, tables.FORWARD_PRIORITY): 1,
    }
    assert len({f.key for f in plan.flows}) == len(plan.flows)
    assert [g.group_id for g in plan.groups] == sorted(g.group_id for g in plan.groups)


def test_a_weighted_or_failover_group_in_the_simulator() -> None:
    ff = GroupEntry(GroupType.FAST_FAILOVER, (Bucket((Output(1),), 1), Bucket((Output(2),), 2)))
    packet = {"eth_type": 0x800}
    assert select_bucket(ff, packet) == ff.buckets[:1]
    assert select_bucket(ff, packet, frozenset({2})) == ff.buckets[1:]
    every = GroupEntry(GroupType.ALL, (Bucket((Output(1),)), Bucket((Output(2),), 2)))
    assert select_bucket(every, packet, frozenset({1})) == every.buckets[:1]
    heavy = GroupEntry(GroupType.SELECT, (Bucket((Output(1),), weight=3), Bucket((Output(2),))))
    picks = Counter(select_bucket(heavy, {"tcp_src": n})[0].actions for n in range(400))
    assert 250 < picks[(Output(1),)] < 350  # about three in four


def test_a_16_leaf_8_spine_fabric_with_64_hosts_plans_every_switch_quickly() -> None:
    spines = tuple(range(1, 9))
    leaves = tuple(range(101, 117))
    topology = Topology()
    for dpid in (*spines, *leaves):
        topology = topology.with_switch(dpid)
    for leaf_dpid in leaves:
        for spine_dpid in spines:
            for link in cable(leaf_dpid, spine_dpid):
                topology = topology.with_link(link)
        for port in range(10, 14):
            topology = topology.with_host(host(leaf_dpid, port))
    started = time.perf_counter()
    plans = {
        dpid: fabric_plan(topology, dpid, frozenset(range(10, 14) if dpid in leaves else ()), {})
        for dpid in topology.switches
    }
    elapsed = time.perf_counter() - started
    assert elapsed < 1.0, f"{elapsed * 1000:.0f} ms for 24 switches"
    assert all(len(plans[dpid].groups) == 1 for dpid in leaves)
    (group,) = plans[leaves[0]].groups
    assert [b.watch_port for b in group.buckets] == list(spines)
