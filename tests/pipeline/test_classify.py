"""Packets through a planned pipeline: which class, DSCP, queue and output each one gets."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

import pytest

from controller.pipeline import tables
from controller.pipeline.flows import OFPP_NORMAL, FlowEntry
from controller.pipeline.planner import SwitchPlan, plan_switch
from controller.pipeline.simulate import Verdict, run_packet
from controller.policy.match import ETH_TYPE_ARP, ETH_TYPE_IPV4, ETH_TYPE_IPV6
from controller.policy.model import Policy

ClassOf = Callable[[Policy, int], str]

CLIENT = "10.0.0.1"
SERVER = "10.0.0.2"


def ip4(address: str) -> int:
    return int(ipaddress.IPv4Address(address))


def tcp4(
    dst: int = 40000, src: int = 40001, *, saddr: str = CLIENT, daddr: str = SERVER, **extra: int
) -> dict[str, int]:
    return {
        "in_port": 1,
        "eth_type": ETH_TYPE_IPV4,
        "ip_proto": 6,
        "ip_dscp": 0,
        "ipv4_src": ip4(saddr),
        "ipv4_dst": ip4(daddr),
        "tcp_src": src,
        "tcp_dst": dst,
        **extra,
    }


def udp4(dst: int = 40000, src: int = 40001, **extra: int) -> dict[str, int]:
    packet = {**tcp4(), "ip_proto": 17, "udp_src": src, "udp_dst": dst, **extra}
    del packet["tcp_src"], packet["tcp_dst"]
    return packet


def tcp6(dst: int = 40000, src: int = 40001, **extra: int) -> dict[str, int]:
    return {
        "in_port": 1,
        "eth_type": ETH_TYPE_IPV6,
        "ip_proto": 6,
        "ip_dscp": 0,
        "tcp_src": src,
        "tcp_dst": dst,
        **extra,
    }


def udp6(dst: int = 40000, src: int = 40001, **extra: int) -> dict[str, int]:
    return {
        "in_port": 1,
        "eth_type": ETH_TYPE_IPV6,
        "ip_proto": 17,
        "ip_dscp": 0,
        "udp_src": src,
        "udp_dst": dst,
        **extra,
    }


def arp(**extra: int) -> dict[str, int]:
    return {"in_port": 1, "eth_type": ETH_TYPE_ARP, **extra}


def plan(policy: Policy, port_numbers: dict[str, int] | None = None) -> SwitchPlan:
    return plan_switch(policy, port_numbers or {})


def classify(
    class_of: ClassOf, policy: Policy, flows: tuple[FlowEntry, ...], packet: dict[str, int]
) -> str:
    return class_of(policy, run_packet(flows, packet).metadata)


# --------------------------------------------------------------------------------------------
# Rule order, default class, marking and forwarding
# --------------------------------------------------------------------------------------------


def test_first_matching_rule_wins(make_policy: Any, class_of: ClassOf) -> None:
    wide = {"name": "wide", "match": {"tcp_dst": "8000-8010"}, "class": "inference"}
    narrow = {"name": "narrow", "match": {"tcp_dst": 8005}, "class": "training"}

    policy = make_policy([wide, narrow])
    flows = plan(policy).flows
    assert classify(class_of, policy, flows, tcp4(8005)) == "inference"
    assert classify(class_of, policy, flows, tcp4(8000)) == "inference"

    policy = make_policy([narrow, wide])
    flows = plan(policy).flows
    assert classify(class_of, policy, flows, tcp4(8005)) == "training"
    assert classify(class_of, policy, flows, tcp4(8000)) == "inference"


def test_earlier_rule_beats_a_later_overlapping_rule_on_other_fields(
    make_policy: Any, class_of: ClassOf
) -> None:
    policy = make_policy(
        [
            {"name": "marked", "match": {"ip_dscp": 26}, "class": "training"},
            {"name": "triton", "match": {"tcp_dst": 8000}, "class": "inference"},
            {"name": "subnet", "match": {"ipv4_dst": "10.0.0.0/24"}, "class": "best-effort"},
        ],
        default_class="inference",
    )
    flows = plan(policy).flows
    assert classify(class_of, policy, flows, tcp4(8000, ip_dscp=26)) == "training"
    assert classify(class_of, policy, flows, tcp4(8000)) == "inference"
    assert classify(class_of, policy, flows, tcp4(8001)) == "best-effort"
    outside = tcp4(8001, saddr="172.16.0.1", daddr="10.0.1.1")
    assert classify(class_of, policy, flows, outside) == "inference"
    # bidirectional: a packet from the subnet is the reverse of one to it
    assert classify(class_of, policy, flows, tcp4(8001, daddr="10.0.1.1")) == "best-effort"


def test_rule_priorities_descend_in_document_order(make_policy: Any) -> None:
    policy = make_policy(
        [{"name": f"r{i}", "match": {"tcp_dst": 1000 + i}, "class": "training"} for i in range(5)]
    )
    by_rule: list[set[int]] = [set() for _ in range(5)]
    for flow in plan(policy).flows:
        if flow.table_id == tables.CLASSIFY and flow.priority > tables.DEFAULT_CLASS_PRIORITY:
            ports = {f.value for f in flow.match if f.name in ("tcp_dst", "tcp_src")}
            (port,) = ports
            by_rule[port - 1000].add(flow.priority)
    priorities = [min(p) for p in by_rule]
    assert all(len(p) == 1 for p in by_rule)
    assert priorities == sorted(priorities, reverse=True)
    assert min(priorities) > tables.DEFAULT_CLASS_PRIORITY


@pytest.mark.parametrize("default_class", ["inference", "training", "best-effort"])
@pytest.mark.parametrize(
    "packet",
    [tcp4(4444), udp4(5353), tcp6(4444), udp6(5353), arp()],
    ids=["tcp4", "udp4", "tcp6", "udp6", "arp"],
)
def test_unmatched_packets_get_the_default_class(
    make_policy: Any, class_of: ClassOf, default_class: str, packet: dict[str, int]
) -> None:
    policy = make_policy(
        [
            {"name": "triton", "match": {"tcp_dst": 8000}, "class": "inference"},
            {"name": "roce", "match": {"udp_dst": 4791}, "class": "training"},
            {"name": "arp-none", "match": {"eth_type": "arp", "in_port": 99}, "class": "training"},
        ],
        default_class=default_class,
    )
    verdict = run_packet(plan(policy).flows, packet)
    assert class_of(policy, verdict.metadata) == default_class
    assert verdict.queue_id == policy.queue_id(default_class)
    assert verdict.outputs == (OFPP_NORMAL,)
    if packet["eth_type"] == ETH_TYPE_ARP:
        assert "ip_dscp" not in verdict.packet  # ARP keeps its bytes, only gets the queue
    else:
        assert verdict.packet["ip_dscp"] == policy.classes[default_class].dscp


@pytest.mark.parametrize(
    ("port", "class_name", "queue", "dscp"),
    [(8000, "inference", 0, 46), (4791, "training", 1, 26), (22, "best-effort", 2, 0)],
)
def test_class_sets_dscp_queue_and_normal_output(
    make_policy: Any, port: int, class_name: str, queue: int, dscp: int
) -> None:
    policy = make_policy(
        [
            {"name": "triton", "match": {"tcp_dst": 8000}, "class": "inference"},
            {"name": "roce", "match": {"tcp_dst": 4791}, "class": "training"},
            {"name": "ssh", "match": {"tcp_dst": 22}, "class": "best-effort"},
        ],
        default_class="training",
    )
    for packet in (tcp4(port, ip_dscp=63), tcp6(port, ip_dscp=63)):
        verdict = run_packet(plan(policy).flows, packet)
        assert verdict.metadata == queue + 1
        assert verdict.queue_id == queue
        assert verdict.packet["ip_dscp"] == dscp
        assert verdict.outputs == (OFPP_NORMAL,)
        assert [key.table_id for key in verdict.trace] == [
            tables.CLASSIFY,
            tables.MARK,
            tables.FORWARD,
        ]
        # only the DSCP changes; addresses and ports stay as they were
        assert {k: v for k, v in verdict.packet.items() if k != "ip_dscp"} == {
            k: v for k, v in packet.items() if k != "ip_dscp"
        }


def test_arp_rule_sets_the_queue_without_touching_bytes(
    make_policy: Any, class_of: ClassOf
) -> None:
    policy = make_policy(
        [{"name": "arp", "match": {"eth_type": "arp"}, "class": "best-effort"}],
        default_class="inference",
    )
    verdict = run_packet(plan(policy).flows, arp())
    assert class_of(policy, verdict.metadata) == "best-effort"
    assert verdict.queue_id == 2
    assert verdict.packet == arp()
    assert verdict.outputs == (OFPP_NORMAL,)


# --------------------------------------------------------------------------------------------
# Directions, port sets, addresses
# --------------------------------------------------------------------------------------------


def test_bidirectional_rule_classifies_replies(make_policy: Any, class_of: ClassOf) -> None:
    policy = make_policy(
        [{"name": "triton", "match": {"ip_proto": "tcp", "tcp_dst": 8000}, "class": "inference"}]
    )
    flows = plan(policy).flows
    request = tcp4(8000, 51000)
    reply = tcp4(51000, 8000, saddr=SERVER, daddr=CLIENT)
    assert classify(class_of, policy, flows, request) == "inference"
    assert classify(class_of, policy, flows, reply) == "inference"
    assert classify(class_of, policy, flows, tcp6(51000, 8000)) == "inference"


def test_one_way_rule_does_not_classify_replies(make_policy: Any, class_of: ClassOf) -> None:
    policy = make_policy(
        [
            {
                "name": "triton",
                "match": {"tcp_dst": 8000},
                "class": "inference",
                "bidirectional": False,
            }
        ]
    )
    flows = plan(policy).flows
    assert classify(class_of, policy, flows, tcp4(8000, 51000)) == "inference"
    assert classify(class_of, policy, flows, tcp4(51000, 8000)) == "best-effort"
    assert classify(class_of, policy, flows, tcp6(51000, 8000)) == "best-effort"


def test_bidirectional_rule_mirrors_addresses_and_ports_together(
    make_policy: Any, class_of: ClassOf
) -> None:
    policy = make_policy(
        [
            {
                "name": "api",
                "match": {"ipv4_dst": "10.9.0.0/16", "tcp_dst": 443},
                "class": "inference",
            }
        ]
    )
    flows = plan(policy).flows
    assert classify(class_of, policy, flows, tcp4(443, daddr="10.9.1.1")) == "inference"
    reply = tcp4(50000, 443, saddr="10.9.1.1", daddr=CLIENT)
    assert classify(class_of, policy, flows, reply) == "inference"
    # a reply from the right port but the wrong network is not the mirror of the rule
    stray = tcp4(50000, 443, saddr="10.8.1.1", daddr="10.9.1.1")
    assert classify(class_of, policy, flows, stray) == "best-effort"


@pytest.mark.parametrize(
    ("family", "field"),
    [("tcp", "tcp_dst"), ("udp", "udp_dst")],
)
def test_port_ranges_and_lists_cover_every_port_and_no_neighbour(
    make_policy: Any, class_of: ClassOf, family: str, field: str
) -> None:
    policy = make_policy(
        [
            {
                "name": "ports",
                "match": {field: ["29500-29510", 8000, "8002", "1-3", "65530-65535"]},
                "class": "training",
                "bidirectional": False,
            }
        ]
    )
    flows = plan(policy).flows
    build = tcp4 if family == "tcp" else udp4
    inside = [*range(29500, 29511), 8000, 8002, 1, 2, 3, *range(65530, 65536)]
    outside = [29499, 29511, 7999, 8001, 8003, 0, 4, 65529, 80]
    for port in inside:
        assert classify(class_of, policy, flows, build(port)) == "training", port
    for port in outside:
        assert classify(class_of, policy, flows, build(port)) == "best-effort", port
    # the same port numbers in the other L4 protocol are not matched
    other = udp4 if family == "tcp" else tcp4
    assert classify(class_of, policy, flows, other(29505)) == "best-effort"


def test_port_range_with_source_and_destination(make_policy: Any, class_of: ClassOf) -> None:
    policy = make_policy(
        [
            {
                "name": "both",
                "match": {"tcp_src": "1000-1003", "tcp_dst": [80, 443]},
                "class": "inference",
                "bidirectional": False,
            }
        ]
    )
    flows = plan(policy).flows
    for src in range(1000, 1004):
        for dst in (80, 443):
            assert classify(class_of, policy, flows, tcp4(dst, src)) == "inference"
    assert classify(class_of, policy, flows, tcp4(80, 1004)) == "best-effort"
    assert classify(class_of, policy, flows, tcp4(81, 1000)) == "best-effort"


def test_ipv4_cidr_matches_the_whole_network_only(make_policy: Any, class_of: ClassOf) -> None:
    policy = make_policy(
        [
            {"name": "gpu-net", "match": {"ipv4_src": "10.20.0.0/16"}, "class": "training"},
            {"name": "host", "match": {"ipv4_dst": "192.168.1.7/32"}, "class": "inference"},
        ]
    )
    flows = plan(policy).flows
    for source in ("10.20.0.0", "10.20.0.1", "10.20.128.9", "10.20.255.255"):
        assert classify(class_of, policy, flows, tcp4(saddr=source)) == "training", source
    for source in ("10.19.255.255", "10.21.0.0", "11.20.0.1"):
        assert classify(class_of, policy, flows, tcp4(saddr=source)) == "best-effort", source
    assert classify(class_of, policy, flows, tcp4(daddr="192.168.1.7")) == "inference"
    assert classify(class_of, policy, flows, tcp4(daddr="192.168.1.8")) == "best-effort"
    # bidirectional: traffic back into the network belongs to it too
    assert classify(class_of, policy, flows, tcp4(daddr="10.20.3.3")) == "training"
    # an IPv4 rule says nothing about IPv6
    assert classify(class_of, policy, flows, tcp6()) == "best-effort"


def test_ipv6_packets_are_classified_by_port_rules(make_policy: Any, class_of: ClassOf) -> None:
    policy = make_policy(
        [
            {"name": "roce", "match": {"ip_proto": "udp", "udp_dst": 4791}, "class": "training"},
            {"name": "triton", "match": {"tcp_dst": [8000, 8001]}, "class": "inference"},
            {"name": "v6-ssh", "match": {"eth_type": "ipv6", "tcp_dst": 22}, "class": "inference"},
        ]
    )
    flows = plan(policy).flows
    assert classify(class_of, policy, flows, udp6(4791)) == "training"
    assert classify(class_of, policy, flows, tcp6(8001)) == "inference"
    assert classify(class_of, policy, flows, tcp6(22)) == "inference"
    assert classify(class_of, policy, flows, tcp4(22)) == "best-effort"
    verdict = run_packet(flows, udp6(4791, ip_dscp=0))
    assert verdict.packet["ip_dscp"] == 26
    assert verdict.queue_id == 1


def test_vlan_and_dscp_and_protocol_matches(make_policy: Any, class_of: ClassOf) -> None:
    policy = make_policy(
        [
            {"name": "vlan", "match": {"vlan_vid": 100}, "class": "training"},
            {"name": "icmp", "match": {"ip_proto": "icmp"}, "class": "inference"},
        ]
    )
    flows = plan(policy).flows
    ofpvid_present = 0x1000
    assert classify(class_of, policy, flows, tcp4(vlan_vid=ofpvid_present | 100)) == "training"
    assert classify(class_of, policy, flows, tcp4(vlan_vid=ofpvid_present | 101)) == "best-effort"
    assert classify(class_of, policy, flows, tcp4()) == "best-effort"
    icmp = {**tcp4(), "ip_proto": 1}
    assert classify(class_of, policy, flows, icmp) == "inference"


# --------------------------------------------------------------------------------------------
# in_port by OVS port name
# --------------------------------------------------------------------------------------------


def test_in_port_names_resolve_and_missing_names_are_reported(
    make_policy: Any, class_of: ClassOf
) -> None:
    policy = make_policy(
        [
            {"name": "from-gpu", "match": {"in_port": "s1-eth2"}, "class": "training"},
            {"name": "from-uplink", "match": {"in_port": "s1-eth9"}, "class": "inference"},
            {"name": "port-3", "match": {"in_port": 3}, "class": "inference"},
            {"name": "ssh", "match": {"tcp_dst": 22}, "class": "training"},
            {"name": "triton", "match": {"tcp_dst": 8000}, "class": "inference"},
        ]
    )
    switch_plan = plan(policy, {"s1-eth1": 1, "s1-eth2": 2, "s1-eth3": 3})
    assert switch_plan.unresolved_rules == ("from-uplink",)
    flows = switch_plan.flows
    assert classify(class_of, policy, flows, tcp4(in_port=2)) == "training"
    assert classify(class_of, policy, flows, tcp4(8000, in_port=2)) == "training"
    assert classify(class_of, policy, flows, tcp4(in_port=3)) == "inference"
    assert classify(class_of, policy, flows, tcp4(22, in_port=9)) == "training"
    assert classify(class_of, policy, flows, tcp4(8000, in_port=1)) == "inference"
    assert classify(class_of, policy, flows, tcp4(in_port=1)) == "best-effort"
    in_ports = {f.value for flow in flows for f in flow.match if f.name == "in_port"}
    assert in_ports == {2, 3}


def test_same_policy_on_a_switch_that_has_the_port(make_policy: Any, class_of: ClassOf) -> None:
    policy = make_policy(
        [{"name": "from-uplink", "match": {"in_port": "s1-eth9"}, "class": "inference"}]
    )
    assert plan(policy, {}).unresolved_rules == ("from-uplink",)
    switch_plan = plan(policy, {"s1-eth9": 9})
    assert switch_plan.unresolved_rules == ()
    assert classify(class_of, policy, switch_plan.flows, tcp4(in_port=9)) == "inference"


def test_in_port_rule_is_one_way(make_policy: Any, class_of: ClassOf) -> None:
    policy = make_policy(
        [{"name": "gpu", "match": {"in_port": "s1-eth2", "tcp_dst": 5000}, "class": "training"}]
    )
    flows = plan(policy, {"s1-eth1": 1, "s1-eth2": 2}).flows
    assert classify(class_of, policy, flows, tcp4(5000, 40000, in_port=2)) == "training"
    reply = tcp4(40000, 5000, in_port=1)
    assert classify(class_of, policy, flows, reply) == "best-effort"


def test_verdict_records_the_path(make_policy: Any) -> None:
    policy = make_policy([{"name": "triton", "match": {"tcp_dst": 8000}, "class": "inference"}])
    verdict: Verdict = run_packet(plan(policy).flows, tcp4(8000))
    assert verdict.trace[0].priority > tables.RULE_PRIORITY_BASE
    assert verdict.trace[1].priority == tables.MARK_IP_PRIORITY
    assert verdict.trace[2].priority == tables.FORWARD_PRIORITY
    assert run_packet(plan(policy).flows, arp()).trace[1].priority == tables.MARK_OTHER_PRIORITY
