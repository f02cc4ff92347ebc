"""tc over netlink: HTB classes with exact counters, the root class's burst, the DSCP filters.

The pure part decodes messages the kernel sent (captured bytes). The rest runs
on a veth pair between two network namespaces made for each test (deleted
after): an HTB qdisc and classes laid out as OVS's linux-htb makes them, the
filters and the burst set by ``controller.qos.tc``, pings sent with a DSCP, and
the counters read back compared with what was sent.
"""

from __future__ import annotations

import itertools
import os
import re
import struct
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from pyroute2 import IPRoute
from pyroute2.netlink.rtnl.tcmsg import tcmsg

from controller.policy.load import parse_policy
from controller.qos import tc
from controller.qos.plan import PortQos, TcFilter, htb_classid, plan_port_qos, tc_filters
from controller.qos.telemetry import ClassCounters

# ---- decoding what the kernel sends ----------------------------------------------------------

PSCHED = tc.Psched.parse("000003e8 00000040 000f4240 3b9aca00")  # this kernel's clock

# RTM_NEWTCLASS for an HTB class 1:2 (64 bit/s, 100 B burst) that sent two 98 B pings and
# holds four more: tc -s prints "Sent 196 bytes 2 pkt (dropped 0, overlimits 1) backlog 392b 4p".
CLASS_MESSAGE = bytes.fromhex(
    "ec000000280002000e01000031250000000000000200000002000100feff01000000000008000100687462"
    "003400020030000100000100000000000008000000000100000000000008000000743ba40b743ba40be803"
    "000000000000010000004800070014000100c40000000000000002000000000000001800030004000000"
    "8801000000000000000000000100000018000400020000000000000000000000c316d7f4c316d7f42c00"
    "0300c400000000000000020000000000000001000000000000000000000004000000880100000000000018"
    "000400020000000000000000000000c316d7f4c316d7f4"
)
# RTM_NEWTFILTER dump of parent 1: after two filters (DSCP 46 → 1:1, DSCP 10 → 1:2): the u32
# hash table entries, then the two rules.
FILTER_MESSAGES = [
    bytes.fromhex(text)
    for text in (
        "340000002c0002000f010000312500000000000002000000000000000000010008000a000800010075"
        "33320008000b0000000000",
        "400000002c0002000f010000312500000000000002000000000000800000010008000a000800010075"
        "33320008000b00000000000c0002000800040001000000",
        "740000002c0002000f010000312500000000000002000000000800800000010008000a000800010075"
        "33320008000b0000000000400002002400050001000100000000000000000000000000fc000000b800"
        "000001000000000000000800020000000080080001000100010008000b0008000000",
        "740000002c0002000f010000312500000000000002000000010800800000010008000a000800010075"
        "33320008000b0000000000400002002400050001000100000000000000000000000000fc0000002800"
        "000001000000000000000800020000000080080001000200010008000b0008000000",
    )
]


def decoded(raw: bytes) -> tcmsg:
    message = tcmsg(raw)
    message.decode()
    return message


def test_a_class_message_gives_exact_counters_rates_and_burst() -> None:
    found = tc.htb_class(decoded(CLASS_MESSAGE), PSCHED)
    assert found == tc.HtbClass(
        classid="1:2",
        parent="1:fffe",
        rate_bytes_s=8,
        ceil_bytes_s=8,
        burst_bytes=100,
        cburst_bytes=100,
        prio=1,
        counters=ClassCounters(
            bytes=196, packets=2, drops=0, overlimits=1, backlog_bytes=392, backlog_packets=4
        ),
    )


def test_the_same_class_read_from_bytes_and_through_pyroute2_is_the_same() -> None:
    assert tc.decode_htb_class(CLASS_MESSAGE, PSCHED) == tc.htb_class(
        decoded(CLASS_MESSAGE), PSCHED
    )
    assert tc.message_bytes(decoded(CLASS_MESSAGE)) == CLASS_MESSAGE


def test_a_packet_count_past_32_bits_comes_from_its_own_attribute() -> None:
    stats = {
        1: struct.pack("=QI4x", 6_000_000_000_000, 2**32 - 1),  # TCA_STATS_BASIC, saturated
        3: struct.pack("=5I", 3, 4500, 7, 0, 11),  # TCA_STATS_QUEUE
        8: struct.pack("=Q", 2**32 + 5),  # TCA_STATS_PKT64
    }
    assert tc.counters_from_stats2(stats) == ClassCounters(
        bytes=6_000_000_000_000,
        packets=2**32 + 5,
        drops=7,
        overlimits=11,
        backlog_bytes=4500,
        backlog_packets=3,
    )
    assert tc.counters_from_stats2({}) == ClassCounters(0, 0, 0, 0, 0, 0)


def test_attributes_are_read_at_their_alignment_with_their_flags_stripped() -> None:
    raw = (
        struct.pack("=HH", 8, 1) + b"htb\0"  # TCA_KIND
        + struct.pack("=HH", 5, 9) + b"x\0\0\0"  # 1 byte of payload, padded to 4
        + struct.pack("=HH", 12, 0x8000 | 2) + struct.pack("=HH", 8, 6) + b"\1\0\0\0"
    )  # fmt: skip
    found = tc.netlink_attributes(raw)
    assert found == {1: b"htb\0", 9: b"x", 2: struct.pack("=HH", 8, 6) + b"\1\0\0\0"}
    assert tc.netlink_attributes(found[2]) == {6: b"\1\0\0\0"}


def test_filter_messages_give_the_planned_keys_and_skip_the_hash_tables() -> None:
    keys = tc.filter_keys(decoded(raw) for raw in FILTER_MESSAGES)
    assert keys == tc.wanted_keys([TcFilter("ip", 46, "1:1"), TcFilter("ip", 10, "1:2")])


def test_tc_and_pyroute2_spell_one_tos_match_two_ways_and_both_are_the_same_key() -> None:
    as_tc_writes = tc.u32_words([(0, 0x00B80000, 0x00FC0000)])  # match ip tos 0xb8 0xfc
    as_pyroute2_writes = tc.u32_words([(1, 0xB8000000, 0xFC000000)])  # "b8000000/fc000000 at 1"
    assert as_tc_writes == as_pyroute2_writes == (tc.U32Word(0, 0x00B80000, 0x00FC0000),)
    # IPv6 Traffic Class straddles two bytes of the first word
    [ipv6] = tc.wanted_keys([TcFilter("ipv6", 46, "1:1")])
    assert ipv6.words == (tc.U32Word(0, 0x0B800000, 0x0FC00000),)
    assert tc.u32_key_text(TcFilter("ip", 46, "1:1")) == "0x00b80000/0x00fc0000+0"
    assert tc.u32_key_text(TcFilter("ipv6", 46, "1:1")) == "0x0b800000/0x0fc00000+0"


def test_the_scheduler_clock_turns_ticks_into_bytes_at_a_rate() -> None:
    assert PSCHED.ticks_per_us == 15.625
    assert PSCHED.bytes_in(31_250, 125_000_000) == 250_000  # 2 ms at 1 Gbit/s
    assert PSCHED.bytes_in(171, 125_000_000) == 1_368  # OVS's one frame; tc prints 1250b


def test_class_ids_read_as_tc_writes_them() -> None:
    assert tc.classid(0x1FFFE) == "1:fffe"
    assert tc.classid(0x1000A) == "1:a"
    assert tc.classid(0xFFFFFFFF) == "root"


def test_each_thread_gets_its_own_socket_until_it_closes_it() -> None:
    seen: list[tc.Netlink] = []
    worker = threading.Thread(target=lambda: (seen.append(tc.netlink()), tc.close()))
    worker.start()
    worker.join()
    mine = tc.netlink()
    try:
        assert tc.netlink() is mine
        assert seen and seen[0] is not mine
    finally:
        tc.close()
    fresh = tc.netlink()
    try:
        assert fresh is not mine
    finally:
        tc.close()


# ---- against the kernel: a veth pair between two namespaces -----------------------------------

_ids = itertools.count(1)
POLICY = parse_policy(
    {
        "classes": {
            "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
            "training": {"priority": 1, "dscp": 26, "min_rate": "70%"},
            "best-effort": {"priority": 2, "dscp": 0, "min_rate": "10%"},
        },
        "default_class": "inference",
        "ports": {"rate": "1Gbit"},
    }
)
PING_FRAME = 98
"""Bytes HTB counts for one ``ping -s 56``: 64 B of ICMP, 20 of IPv4, 14 of Ethernet."""
BYTES = 64 * 1514
"""A leaf's byte limit: the 64-frame floor at MTU 1500 (``plan.htb_queue_bytes``)."""
JUMBO_FRAME = 9014
"""Bytes of one ``ping -s 8972`` at MTU 9000: 8 980 B of ICMP, 20 of IPv4, 14 of Ethernet."""


NETNS = pytest.mark.filterwarnings("ignore:Using fork:DeprecationWarning")
"""pyroute2 opens a socket in another namespace from a forked child; eventlet, imported by
os-ken elsewhere in the session, warns about any fork."""


@dataclass
class Link:
    """``device`` (with the HTB, in namespace ``ns``) ↔ its peer in ``peer_ns``."""

    ns: str
    peer_ns: str
    device: str
    peer: str
    address: str = "10.98.0.1"
    peer_address: str = "10.98.0.2"

    def sh(self, *args: str) -> str:
        done = subprocess.run(args, capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"{' '.join(args)}: {done.stderr}"
        return done.stdout

    def ping(self, tos: int, count: int, size: int = 56) -> int:
        """``count`` pings of ``size`` bytes of data with the given TOS out of ``device``,
        replies not awaited (a slow class holds some back); how many ping sent."""
        # -S: by default ping's socket buffers one packet, and one held in a queue blocks it
        buffer = str(max(65536, 64 * (size + 1024)))
        command = ["ping", "-q", "-n", "-c", str(count), "-i", "0.01", "-W", "1", "-S", buffer]
        command += ["-s", str(size)]
        done = subprocess.run(
            ["ip", "netns", "exec", self.ns, *command, "-Q", f"{tos:#x}", self.peer_address],
            capture_output=True,
            text=True,
            check=False,
        )
        sent = re.search(r"(\d+) packets transmitted", done.stdout)
        assert sent, done.stdout + done.stderr
        return int(sent[1])

    def tc_text(self, *args: str) -> str:
        return self.sh("ip", "netns", "exec", self.ns, "tc", *args, "dev", self.device)


@pytest.fixture
def link() -> Iterator[Link]:
    """Two namespaces joined by a veth pair, IPv4 only with static neighbours, so the only
    frames that leave ``device`` are the pings a test sends."""
    if os.geteuid() != 0:
        pytest.fail("needs root: network namespaces")
    tag = f"{os.getpid() % 100000}{next(_ids)}"
    made = Link(f"fltc{tag}a", f"fltc{tag}b", f"fq{tag}a", f"fq{tag}b")
    namespaces = (made.ns, made.peer_ns)
    try:
        for ns in namespaces:
            made.sh("ip", "netns", "add", ns)
            for scope in ("all", "default"):
                made.sh("ip", "netns", "exec", ns, "sysctl", "-qw",
                        f"net.ipv6.conf.{scope}.disable_ipv6=1")  # fmt: skip
        made.sh(
            "ip", "link", "add", made.device, "netns", made.ns, "type", "veth",
            "peer", "name", made.peer, "netns", made.peer_ns,
        )  # fmt: skip
        ends = ((made.ns, made.device, made.address), (made.peer_ns, made.peer, made.peer_address))
        for ns, device, address in ends:
            made.sh("ip", "-n", ns, "addr", "add", f"{address}/24", "dev", device)
            made.sh("ip", "-n", ns, "link", "set", device, "up")
        for (ns, device, _), (other_ns, other, other_address) in zip(ends, ends[::-1], strict=True):
            mac = made.sh("ip", "-n", other_ns, "-br", "link", "show", other).split()[2]
            made.sh("ip", "-n", ns, "neigh", "replace", other_address, "lladdr", mac,
                    "dev", device, "nud", "permanent")  # fmt: skip
        yield made
    finally:
        for ns in namespaces:  # deleting a namespace deletes the veth end in it
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


def netlink_in(link: Link) -> tc.Netlink:
    return tc.Netlink(IPRoute(netns=link.ns, flags=0, groups=0))


def make_htb_as_ovs_does(link: Link, plan: PortQos, root_burst: int = 1375) -> None:
    """The qdisc and classes OVS's linux-htb QoS gives a port: ``1:`` defaulting to queue 0,
    root class ``1:fffe`` at the port's rate with a one-frame burst, a class per queue."""
    with IPRoute(netns=link.ns, flags=0, groups=0) as ipr:
        [index] = ipr.link_lookup(ifname=link.device)
        ipr.tc("add", "htb", index=index, handle="1:", default=1)
        rate = plan.rate_bps // 8
        ipr.tc("add-class", "htb", index=index, handle=tc.ROOT_CLASSID, parent="1:",
               rate=rate, ceil=rate, burst=root_burst, cburst=root_burst)  # fmt: skip
        for queue in plan.queues:
            ipr.tc("add-class", "htb", index=index, handle=f"1:{queue.queue_id + 1:x}",
                   parent=tc.ROOT_CLASSID, rate=queue.min_bps // 8, ceil=queue.max_bps // 8,
                   prio=queue.priority)  # fmt: skip


def filter_entries(link: Link) -> int:
    """Every filter entry under 1: (rules and hash tables), as the kernel lists them."""
    with IPRoute(netns=link.ns, flags=0, groups=0) as ipr:
        [index] = ipr.link_lookup(ifname=link.device)
        return len(tuple(ipr.get_filters(index=index, parent=0x10000)))


@pytest.mark.ovs
@NETNS
def test_filters_steer_each_dscp_into_its_class_and_the_counters_are_exact(link: Link) -> None:
    plan = plan_port_qos(POLICY, link.device, None)
    make_htb_as_ovs_does(link, plan)
    planned = tc_filters(plan)
    with netlink_in(link) as nl:
        assert nl.filter_keys(link.device) == set()
        assert nl.ensure_filters(link.device, planned)
        assert nl.filter_keys(link.device) == tc.wanted_keys(planned)
        entries = filter_entries(link)
        assert not nl.ensure_filters(link.device, planned)  # applied again: nothing added
        assert filter_entries(link) == entries
        # tc itself reads them as the DSCP matches they are (pyroute2 keys the TOS byte at 1)
        assert "match b8000000/fc000000 at 1" in link.tc_text("filter", "show")

        assert link.ping(46 << 2, 7) == 7  # inference
        assert link.ping(26 << 2, 5) == 5  # training
        classes = nl.classes(link.device)

    sent = {classid: found.counters for classid, found in classes.items()}
    assert sent["1:1"] == ClassCounters(7 * PING_FRAME, 7, 0, 0, 0, 0)
    assert sent["1:2"] == ClassCounters(5 * PING_FRAME, 5, 0, 0, 0, 0)
    assert sent["1:3"] == ClassCounters(0, 0, 0, 0, 0, 0)  # best-effort: DSCP 0, none sent
    assert (sent[tc.ROOT_CLASSID].bytes, sent[tc.ROOT_CLASSID].packets) == (12 * PING_FRAME, 12)
    assert classes["1:2"].rate_bytes_s == plan.queues[1].min_bps // 8
    assert classes["1:2"].prio == 1


@pytest.mark.ovs
@NETNS
def test_a_filter_lost_or_foreign_is_rewritten_to_the_plan(link: Link) -> None:
    plan = plan_port_qos(POLICY, link.device, None)
    make_htb_as_ovs_does(link, plan)
    planned = tc_filters(plan)
    # what flowlane's tc-based version wrote (aligned keys), plus a rule of someone else's
    link.sh("ip", "netns", "exec", link.ns, "tc", "filter", "add", "dev", link.device,
            "parent", "1:", "protocol", "ip", "prio", "10", "u32",
            "match", "ip", "tos", "0xb8", "0xfc", "flowid", "1:1")  # fmt: skip
    old = tc.wanted_keys([TcFilter("ip", 46, "1:1")])
    with netlink_in(link) as nl:
        assert nl.filter_keys(link.device) == old  # tc's spelling reads as the planned key
        assert nl.ensure_filters(link.device, planned)
        assert nl.filter_keys(link.device) == tc.wanted_keys(planned)
        # the IPv6 rules go, as they do when OVS re-creates the qdisc
        link.sh("ip", "netns", "exec", link.ns, "tc", "filter", "del", "dev", link.device,
                "parent", "1:", "prio", "11")  # fmt: skip
        assert nl.ensure_filters(link.device, planned)
        assert nl.filter_keys(link.device) == tc.wanted_keys(planned)


def best_effort_slowed_to_a_trickle(link: Link, plan: PortQos) -> None:
    """The port's HTB as OVS makes it, its best-effort class (1:3) slowed to 64 bit/s: what
    is sent there stays queued, to be read back."""
    make_htb_as_ovs_does(link, plan)
    with IPRoute(netns=link.ns, flags=0, groups=0) as ipr:
        [index] = ipr.link_lookup(ifname=link.device)
        ipr.tc("change-class", "htb", index=index, handle="1:3", parent=tc.ROOT_CLASSID,
               rate=8, ceil=8, burst=100, cburst=100, prio=2)  # fmt: skip


@pytest.mark.ovs
@NETNS
def test_a_backlog_is_read_in_exact_bytes(link: Link) -> None:
    """A 64 bit/s class lets about one ping through and holds the rest: the backlog read is
    those frames, to the byte (tc's text rounds a size near a multiple of 1 KiB to Kb)."""
    plan = plan_port_qos(POLICY, link.device, None)
    best_effort_slowed_to_a_trickle(link, plan)
    with netlink_in(link) as nl:
        nl.ensure_filters(link.device, tc_filters(plan))
        sent = link.ping(0, 20)  # best-effort, DSCP 0
        held = nl.classes(link.device)["1:3"].counters
    assert held.backlog_packets >= 5
    assert held.backlog_bytes == held.backlog_packets * PING_FRAME
    assert held.packets + held.backlog_packets == sent
    assert held.bytes + held.backlog_bytes == sent * PING_FRAME
    assert held.drops == 0


@pytest.mark.ovs
@NETNS
def test_a_leaf_holds_its_limit_in_bytes_whatever_the_frame_size(link: Link) -> None:
    """At MTU 9000 the 64-frame floor's bytes hold 10 jumbo frames, not 64 (a pfifo's count):
    the same time at the port's rate as 64 standard frames."""
    for ns, device in ((link.ns, link.device), (link.peer_ns, link.peer)):
        link.sh("ip", "-n", ns, "link", "set", device, "mtu", "9000")
    plan = plan_port_qos(POLICY, link.device, None)
    best_effort_slowed_to_a_trickle(link, plan)
    planned = [htb_classid(queue.queue_id) for queue in plan.queues]
    with netlink_in(link) as nl:
        nl.ensure_filters(link.device, tc_filters(plan))
        assert nl.ensure_leaf_queues(link.device, BYTES, planned)
        link.ping(0, 30, size=JUMBO_FRAME - 42)  # best-effort, DSCP 0
        held = nl.classes(link.device)["1:3"].counters
    assert held.backlog_packets == BYTES // JUMBO_FRAME == 10, held
    assert held.backlog_bytes == 10 * JUMBO_FRAME <= BYTES, held
    assert held.drops > 0, held


@pytest.mark.ovs
@NETNS
def test_the_root_burst_is_put_back_and_then_left_alone(link: Link) -> None:
    plan = plan_port_qos(POLICY, link.device, None)
    make_htb_as_ovs_does(link, plan)  # one frame of burst, as OVS leaves it
    with netlink_in(link) as nl:
        assert tc.root_burst_short(nl.classes(link.device), plan.burst_bytes)
        assert nl.ensure_root_burst(link.device, plan.rate_bps, plan.burst_bytes)
        root = nl.classes(link.device)[tc.ROOT_CLASSID]
        assert (root.burst_bytes, root.cburst_bytes) == (plan.burst_bytes, plan.burst_bytes)
        assert root.rate_bytes_s == root.ceil_bytes_s == plan.rate_bps // 8
        assert not nl.ensure_root_burst(link.device, plan.rate_bps, plan.burst_bytes)
    # tc, reading the same class, agrees
    assert "root rate 1Gbit ceil 1Gbit burst 250000b cburst 250000b" in link.tc_text(
        "class", "show"
    )


@pytest.mark.ovs
@NETNS
def test_each_class_gets_its_queue_once_and_one_remade_by_ovs_again(link: Link) -> None:
    """The leaf under each class is a bfifo of the planned byte limit; checked again without
    a qdisc dump (which would answer for every device of the machine); a class whose leaf is
    replaced behind our back (OVS remaking it, or the previous version's pfifo at its old
    handle) is noticed from the class dump alone; a bfifo of ours left at another limit (a
    process that did not write it) is found by the dump and put back."""
    plan = plan_port_qos(POLICY, link.device, None)
    make_htb_as_ovs_does(link, plan)
    planned = [htb_classid(queue.queue_id) for queue in plan.queues]
    with netlink_in(link) as nl:
        assert tc.leaves_missing(nl.classes(link.device))
        assert nl.ensure_leaf_queues(link.device, BYTES, planned)
        assert nl.leaf_limits(link.device) == dict.fromkeys(planned, BYTES)
        assert not tc.leaves_missing(nl.classes(link.device))
        assert (
            f"bfifo {tc.leaf_handle(planned[0]) >> 16:x}: parent {planned[0]} limit {BYTES}b"
            in (link.tc_text("qdisc", "show"))
        )
        dumps = 0
        read = nl.leaf_limits

        def counted(device: str) -> dict[str, int]:
            nonlocal dumps
            dumps += 1
            return read(device)

        nl.leaf_limits = counted  # type: ignore[method-assign]
        assert not nl.ensure_leaf_queues(link.device, BYTES, planned)
        assert dumps == 0
        first, second = planned[0], planned[1]
        link.sh("ip", "netns", "exec", link.ns, "tc", "qdisc", "replace", "dev", link.device,
                "parent", first, "handle", "50:", "pfifo", "limit", "1000")  # fmt: skip
        # the previous version's leaf: a pfifo of 64 frames at 0x8000 + minor
        link.sh("ip", "netns", "exec", link.ns, "tc", "qdisc", "replace", "dev", link.device,
                "parent", second, "handle", "8002:", "pfifo", "limit", "64")  # fmt: skip
        assert tc.leaves_missing(nl.classes(link.device))
        assert nl.ensure_leaf_queues(link.device, BYTES, planned)
        assert read(link.device) == dict.fromkeys(planned, BYTES)
        assert "pfifo" not in link.tc_text("qdisc", "show")
        assert nl.ensure_leaf_queues(link.device, 2 * BYTES, planned)  # a new limit: all again
        assert read(link.device) == dict.fromkeys(planned, 2 * BYTES)
    with netlink_in(link) as fresh:  # a new process: its first check reads the dump
        assert not fresh.ensure_leaf_queues(link.device, 2 * BYTES, planned)
        assert fresh.ensure_leaf_queues(link.device, BYTES, planned)


@pytest.mark.ovs
@NETNS
def test_a_port_without_htb_has_no_classes_and_no_root_to_repair(link: Link) -> None:
    with netlink_in(link) as nl:
        assert nl.classes(link.device) == {}
        with pytest.raises(tc.TcError, match="no HTB class 1:fffe") as failure:
            nl.ensure_root_burst(link.device, 1_000_000_000, 250_000)
        assert not failure.value.missing_device


def recreate(link: Link) -> None:
    """The port deleted and made again under its name, as Mininet or an operator does."""
    link.sh("ip", "-n", link.ns, "link", "del", link.device)  # the peer goes with it
    link.sh("ip", "link", "add", link.device, "netns", link.ns, "type", "veth",
            "peer", "name", link.peer, "netns", link.peer_ns)  # fmt: skip


@pytest.mark.ovs
@NETNS
def test_a_port_made_again_under_its_name_is_found_under_its_new_ifindex(link: Link) -> None:
    plan = plan_port_qos(POLICY, link.device, None)
    make_htb_as_ovs_does(link, plan)
    with netlink_in(link) as nl:
        before = nl.ifindex(link.device)
        assert tc.ROOT_CLASSID in nl.classes(link.device)
        recreate(link)  # the cached ifindex now names nothing
        assert nl.classes(link.device) == {}  # the new port has no HTB yet
        assert nl.ifindex(link.device) != before
        make_htb_as_ovs_does(link, plan)
        assert tc.ROOT_CLASSID in nl.classes(link.device)
        recreate(link)
        make_htb_as_ovs_does(link, plan)
        assert nl.ensure_filters(link.device, tc_filters(plan))  # written on the new one
        assert nl.filter_keys(link.device) == tc.wanted_keys(tc_filters(plan))


@pytest.mark.ovs
@NETNS
def test_a_vanished_interface_is_a_typed_error(link: Link) -> None:
    plan = plan_port_qos(POLICY, link.device, None)
    make_htb_as_ovs_does(link, plan)
    with netlink_in(link) as nl:
        assert tc.ROOT_CLASSID in nl.classes(link.device)  # its ifindex is cached
        link.sh("ip", "-n", link.ns, "link", "del", link.device)
        for call in (
            lambda: nl.classes(link.device),
            lambda: nl.filter_keys(link.device),
            lambda: nl.ensure_filters(link.device, tc_filters(plan)),
            lambda: nl.ensure_root_burst(link.device, plan.rate_bps, plan.burst_bytes),
        ):
            with pytest.raises(tc.DeviceGoneError) as gone:
                call()
            assert gone.value.missing_device and gone.value.device == link.device
