"""Topology plans: every port named before Mininet exists, in the order Mininet numbers them."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

import pytest
from flowlane_bench.suite import topology
from flowlane_bench.suite.topology import MAX_HOSTS, TopologyPlan


def peers(plan: TopologyPlan, switch: str) -> list[str]:
    ports = plan.switch_ports()
    return [ports[port] for port in plan.ports_of(switch)]


# --------------------------------------------------------------------------------------------
# single
# --------------------------------------------------------------------------------------------


def test_single_puts_host_i_on_port_i_plus_one() -> None:
    plan = topology.single(["train1", "train2", "infer1", "server"])
    assert [s.name for s in plan.switches] == ["s1"]
    assert plan.ports_of("s1") == ["s1-eth1", "s1-eth2", "s1-eth3", "s1-eth4"]
    assert plan.switch_ports() == {
        "s1-eth1": "train1",
        "s1-eth2": "train2",
        "s1-eth3": "infer1",
        "s1-eth4": "server",
    }
    assert plan.port_to("s1", "server") == "s1-eth4"
    assert plan.inter_switch_ports() == []
    assert plan.loops is False
    assert plan.host_names == ("train1", "train2", "infer1", "server")


def test_port_to_an_unlinked_node_is_a_key_error() -> None:
    plan = topology.single(["a", "b"])
    with pytest.raises(KeyError, match="s1 has no link to c"):
        plan.port_to("s1", "c")


# --------------------------------------------------------------------------------------------
# dumbbell
# --------------------------------------------------------------------------------------------


def test_dumbbell_joins_the_switches_on_the_port_after_their_hosts() -> None:
    plan = topology.dumbbell(["w1", "w2", "client"], ["w3", "w4", "server"])
    assert [(s.name, s.dpid) for s in plan.switches] == [("s1", 1), ("s2", 2)]
    assert peers(plan, "s1") == ["w1", "w2", "client", "s2"]
    assert peers(plan, "s2") == ["w3", "w4", "server", "s1"]
    assert plan.port_to("s1", "s2") == "s1-eth4"
    assert plan.port_to("s2", "s1") == "s2-eth4"
    assert plan.port_to("s2", "server") == "s2-eth3"
    assert sorted(plan.inter_switch_ports()) == ["s1-eth4", "s2-eth4"]
    assert plan.loops is False


def test_dumbbell_sides_of_different_sizes() -> None:
    plan = topology.dumbbell(["a"], ["b", "c", "d", "e"])
    assert plan.port_to("s1", "s2") == "s1-eth2"
    assert plan.port_to("s2", "s1") == "s2-eth5"
    assert plan.switch_ports()["s2-eth1"] == "b"
    assert plan.host_names == ("a", "b", "c", "d", "e")


# --------------------------------------------------------------------------------------------
# leaf-spine
# --------------------------------------------------------------------------------------------


def test_leaf_spine_2x2x3_port_layout() -> None:
    plan = topology.leaf_spine(2, 2, 3)
    assert [s.name for s in plan.switches] == ["leaf1", "leaf2", "spine1", "spine2"]
    assert plan.host_names == ("h1", "h2", "h3", "h4", "h5", "h6")
    assert peers(plan, "leaf1") == ["h1", "h2", "h3", "spine1", "spine2"]
    assert peers(plan, "leaf2") == ["h4", "h5", "h6", "spine1", "spine2"]
    assert plan.switch_ports()["leaf1-eth5"] == "spine2"
    assert plan.switch_ports()["leaf1-eth4"] == "spine1"
    assert plan.switch_ports()["spine2-eth1"] == "leaf1"
    assert plan.switch_ports()["spine1-eth2"] == "leaf2"
    assert peers(plan, "spine1") == ["leaf1", "leaf2"]
    assert peers(plan, "spine2") == ["leaf1", "leaf2"]
    assert plan.port_to("leaf2", "spine2") == "leaf2-eth5"
    assert sorted(plan.inter_switch_ports()) == sorted(
        [
            "leaf1-eth4",
            "leaf1-eth5",
            "leaf2-eth4",
            "leaf2-eth5",
            "spine1-eth1",
            "spine1-eth2",
            "spine2-eth1",
            "spine2-eth2",
        ]
    )
    assert plan.loops is True


@pytest.mark.parametrize(
    ("leaves", "spines", "hosts_per_leaf"), [(3, 4, 2), (16, 8, 12), (4, 1, 5), (1, 3, 2)]
)
def test_leaf_spine_documented_numbering(leaves: int, spines: int, hosts_per_leaf: int) -> None:
    """Leaf l: hosts on 1..H, spine s on H+s; spine s reaches leaf l on port l."""
    plan = topology.leaf_spine(leaves, spines, hosts_per_leaf)
    ports = plan.switch_ports()
    assert len(plan.hosts) == leaves * hosts_per_leaf
    for leaf in range(1, leaves + 1):
        for slot in range(1, hosts_per_leaf + 1):
            host = f"h{(leaf - 1) * hosts_per_leaf + slot}"
            assert ports[f"leaf{leaf}-eth{slot}"] == host
        for spine in range(1, spines + 1):
            assert ports[f"leaf{leaf}-eth{hosts_per_leaf + spine}"] == f"spine{spine}"
            assert ports[f"spine{spine}-eth{leaf}"] == f"leaf{leaf}"
    assert len(plan.inter_switch_ports()) == 2 * leaves * spines
    assert len(ports) == leaves * (hosts_per_leaf + spines) + spines * leaves


@pytest.mark.parametrize(
    ("leaves", "spines", "loops"), [(2, 2, True), (4, 3, True), (2, 1, False), (1, 4, False)]
)
def test_leaf_spine_loops_only_with_several_leaves_and_spines(
    leaves: int, spines: int, loops: bool
) -> None:
    assert topology.leaf_spine(leaves, spines, 2).loops is loops


def test_leaf_spine_dpids_are_unique_and_distinguish_leaves_from_spines() -> None:
    plan = topology.leaf_spine(16, 8, 1)
    dpids = [switch.dpid for switch in plan.switches]
    assert len(dpids) == len(set(dpids)) == 24
    by_name = {switch.name: switch.dpid for switch in plan.switches}
    assert by_name["leaf1"] != by_name["spine1"]
    assert by_name["leaf1"] == 0x101
    assert by_name["spine8"] == 0x208


@pytest.mark.parametrize(
    ("leaves", "spines", "hosts_per_leaf"),
    [(0, 2, 3), (17, 2, 3), (2, 0, 3), (2, 9, 3), (2, 2, 0), (2, 2, 13)],
)
def test_leaf_spine_rejects_sizes_out_of_range(
    leaves: int, spines: int, hosts_per_leaf: int
) -> None:
    with pytest.raises(ValueError, match="1-16 leaves, 1-8 spines and 1-12 hosts per leaf"):
        topology.leaf_spine(leaves, spines, hosts_per_leaf)


# --------------------------------------------------------------------------------------------
# hosts
# --------------------------------------------------------------------------------------------


def test_hosts_get_consecutive_ips_and_matching_macs() -> None:
    plan = topology.single(["a", "b", "c"])
    assert [(h.name, h.ip, h.mac) for h in plan.hosts] == [
        ("a", "10.0.0.1", "00:00:00:00:00:01"),
        ("b", "10.0.0.2", "00:00:00:00:00:02"),
        ("c", "10.0.0.3", "00:00:00:00:00:03"),
    ]


def test_the_largest_fabric_has_unique_addresses_in_one_slash_24() -> None:
    names = [f"h{i}" for i in range(1, MAX_HOSTS + 1)]
    plan = topology.single(names)
    ips = [host.ip for host in plan.hosts]
    macs = [host.mac for host in plan.hosts]
    assert len(set(ips)) == len(set(macs)) == MAX_HOSTS
    network = ipaddress.ip_network("10.0.0.0/24")
    assert all(ipaddress.ip_address(ip) in network for ip in ips)
    assert plan.hosts[-1].ip == f"10.0.0.{MAX_HOSTS}"
    assert plan.hosts[-1].mac == f"00:00:00:00:00:{MAX_HOSTS:02x}"
    # MAC and IP encode the same index.
    for host in plan.hosts:
        index = int(host.ip.rsplit(".", 1)[1])
        assert int(host.mac.replace(":", ""), 16) == index


def test_dumbbell_numbers_right_hosts_after_left_ones() -> None:
    plan = topology.dumbbell(["a", "b"], ["c"])
    assert {h.name: h.ip for h in plan.hosts} == {
        "a": "10.0.0.1",
        "b": "10.0.0.2",
        "c": "10.0.0.3",
    }


def test_too_many_hosts_is_rejected() -> None:
    with pytest.raises(ValueError, match=f"at most {MAX_HOSTS} hosts"):
        topology.single([f"h{i}" for i in range(MAX_HOSTS + 1)])


@pytest.mark.parametrize(
    "build",
    [
        lambda: topology.single(["a", "b", "a"]),
        lambda: topology.dumbbell(["a", "b"], ["c", "a"]),
    ],
    ids=["single", "dumbbell-across-sides"],
)
def test_duplicate_host_names_are_rejected(build: Callable[[], TopologyPlan]) -> None:
    with pytest.raises(ValueError, match="host names must be unique"):
        build()


@pytest.mark.parametrize(
    "build",
    [
        lambda: topology.single(["s1", "h2"]),
        lambda: topology.dumbbell(["a", "s2"], ["b"]),
    ],
    ids=["single-host-s1", "dumbbell-host-s2"],
)
def test_a_host_named_like_a_switch_is_rejected(build: Callable[[], TopologyPlan]) -> None:
    """BUG: a host called ``s1``/``s2`` is accepted and merged with the switch of that name.

    ``single(["s1", "h2"])`` plans a self-loop ``s1-eth1 -> s1`` and puts h2 on
    ``s1-eth3`` instead of ``s1-eth2``; the scenario's ``HostName`` pattern
    allows such names, so a scenario file can reach this.
    """
    with pytest.raises(ValueError):
        build()
