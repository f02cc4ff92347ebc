"""Randomized sweep: the planned flows classify exactly as the policy's first-match rules say.

The oracle below reads the policy directly (ranges, networks, directions), independent of
how the planner expands rules into OpenFlow prefixes and mirrored matches.
"""

from __future__ import annotations

import ipaddress
import random
from pathlib import Path

import pytest

from controller.pipeline.flows import OFPP_NORMAL
from controller.pipeline.planner import plan_switch
from controller.pipeline.simulate import run_packet
from controller.policy.load import load_policy_file
from controller.policy.match import (
    ETH_TYPE_ARP,
    ETH_TYPE_IPV4,
    ETH_TYPE_IPV6,
    IP_PROTO_TCP,
    IP_PROTO_UDP,
    MatchSpec,
)
from controller.policy.model import Policy

POLICIES = Path(__file__).resolve().parents[2] / "policies"
POLICY_FILES = sorted([*POLICIES.rglob("*.yaml"), *POLICIES.rglob("*.yml")])
PORT_NUMBERS = {f"s1-eth{n}": n for n in range(1, 5)}
_SWAP = {
    "ipv4_src": "ipv4_dst",
    "ipv4_dst": "ipv4_src",
    "tcp_src": "tcp_dst",
    "tcp_dst": "tcp_src",
    "udp_src": "udp_dst",
    "udp_dst": "udp_src",
}


def _spec_matches(spec: MatchSpec, packet: dict[str, int], reverse: bool) -> bool:
    def field(name: str) -> int | None:
        return packet.get(_SWAP[name] if reverse else name)

    eth_type = packet.get("eth_type")
    if spec.in_port is not None:
        wanted = PORT_NUMBERS[spec.in_port] if isinstance(spec.in_port, str) else spec.in_port
        if packet.get("in_port") != wanted:
            return False
    if spec.eth_type is not None and eth_type != spec.eth_type:
        return False
    if (spec.ipv4_src or spec.ipv4_dst) and eth_type != ETH_TYPE_IPV4:
        return False
    ip_needed = spec.effective_ip_proto is not None or spec.ip_dscp is not None
    if ip_needed and eth_type not in (ETH_TYPE_IPV4, ETH_TYPE_IPV6):
        return False
    if spec.vlan_vid is not None and packet.get("vlan_vid") != 0x1000 | spec.vlan_vid:
        return False
    proto = spec.effective_ip_proto
    if proto is not None and packet.get("ip_proto") != proto:
        return False
    if spec.ip_dscp is not None and packet.get("ip_dscp") != spec.ip_dscp:
        return False
    for name in ("ipv4_src", "ipv4_dst"):
        network = getattr(spec, name)
        if network is not None:
            value = field(name)
            if value is None or ipaddress.IPv4Address(value) not in network:
                return False
    for name in ("tcp_src", "tcp_dst", "udp_src", "udp_dst"):
        ranges = getattr(spec, name)
        if ranges is not None:
            value = field(name)
            if value is None or not any(low <= value <= high for low, high in ranges):
                return False
    return True


def expected_class(policy: Policy, packet: dict[str, int]) -> str:
    for rule in policy.rules:
        if _spec_matches(rule.match, packet, reverse=False):
            return rule.traffic_class
        mirrored = rule.bidirectional and rule.match.in_port is None
        if mirrored and _spec_matches(rule.match, packet, reverse=True):
            return rule.traffic_class
    return policy.default_class


def _interesting_ports(policy: Policy) -> list[int]:
    ports = {0, 1, 22, 80, 443, 65535}
    for rule in policy.rules:
        for name in ("tcp_src", "tcp_dst", "udp_src", "udp_dst"):
            for low, high in getattr(rule.match, name) or ():
                ports.update(p for p in (low - 1, low, low + 1, high - 1, high, high + 1))
    return sorted(p for p in ports if 0 <= p <= 65535)


def _interesting_addresses(policy: Policy) -> list[int]:
    addresses = {int(ipaddress.IPv4Address("10.0.0.1")), int(ipaddress.IPv4Address("8.8.8.8"))}
    for rule in policy.rules:
        for network in (rule.match.ipv4_src, rule.match.ipv4_dst):
            if network is not None:
                first, last = int(network.network_address), int(network.broadcast_address)
                addresses.update(a for a in (first - 1, first, last, last + 1) if 0 <= a < 2**32)
    return sorted(addresses)


def random_packet(
    rng: random.Random, ports: list[int], addresses: list[int], dscps: list[int]
) -> dict[str, int]:
    eth_type = rng.choice([ETH_TYPE_IPV4, ETH_TYPE_IPV4, ETH_TYPE_IPV6, ETH_TYPE_ARP])
    packet = {"in_port": rng.randint(1, 5), "eth_type": eth_type}
    if rng.random() < 0.2:
        packet["vlan_vid"] = 0x1000 | rng.randrange(4096)
    if eth_type == ETH_TYPE_ARP:
        return packet
    proto = rng.choice([IP_PROTO_TCP, IP_PROTO_TCP, IP_PROTO_UDP, 1, 58])
    packet["ip_proto"] = proto
    packet["ip_dscp"] = rng.choice(dscps) if rng.random() < 0.5 else rng.randrange(64)
    if eth_type == ETH_TYPE_IPV4:
        for name in ("ipv4_src", "ipv4_dst"):
            packet[name] = rng.choice(addresses) if rng.random() < 0.6 else rng.getrandbits(32)
    if proto in (IP_PROTO_TCP, IP_PROTO_UDP):
        prefix = "tcp" if proto == IP_PROTO_TCP else "udp"
        for direction in ("src", "dst"):
            port = rng.choice(ports) if rng.random() < 0.7 else rng.randrange(65536)
            packet[f"{prefix}_{direction}"] = port
    return packet


@pytest.mark.parametrize("path", POLICY_FILES, ids=lambda p: str(p.relative_to(POLICIES)))
def test_random_packets_classify_as_the_policy_says(path: Path) -> None:
    policy = load_policy_file(path)
    flows = plan_switch(policy, PORT_NUMBERS).flows
    rng = random.Random(f"flowlane-sweep-{path.name}")
    ports = _interesting_ports(policy)
    addresses = _interesting_addresses(policy)
    dscps = sorted(
        {c.dscp for c in policy.classes.values()} | {r.match.ip_dscp or 0 for r in policy.rules}
    )
    seen: set[str] = set()
    count = 3000 if path.name == "default.yaml" else 1000
    for _ in range(count):
        packet = random_packet(rng, ports, addresses, dscps)
        verdict = run_packet(flows, packet)  # AmbiguousLookupError / TableMissError would fail
        wanted = expected_class(policy, packet)
        assert verdict.metadata & 0xFF == policy.queue_id(wanted) + 1, packet
        assert verdict.queue_id == policy.queue_id(wanted), packet
        assert verdict.outputs == (OFPP_NORMAL,)
        if packet["eth_type"] == ETH_TYPE_ARP:
            assert "ip_dscp" not in verdict.packet
        else:
            assert verdict.packet["ip_dscp"] == policy.classes[wanted].dscp
        seen.add(wanted)
    if path.name == "default.yaml":
        # the sweep really exercised every class, not just the default one
        assert seen == set(policy.class_names)
