"""Several controllers: what one fabric owner knows of the fabric does not hang on its own
connections (``FabricShared``, ``MasterConfirmed``; the findings of the three-controller
Mininet test).

- A restarted instance plans with the hosts the masters published, and is ready to
  take a switch only once it has followed it for one link timeout: a hand-over plans
  the switch exactly as its live owner did (its sync deletes nothing).
- A switch whose connection to *this* instance dropped stays in the fabric, with its
  links and hosts, while another instance is connected to it.
- A switch whose master stopped sending LLDP (paused, killed) keeps its links until its
  new master, which probes at once when confirmed, is heard; a link that falls silent
  while the rest of its switch is heard is still down after the timeout.
"""

from __future__ import annotations

from collections.abc import Iterable

from controller.fabric.model import Link, PortRef
from controller.openflow.fabric_events import (
    FabricOffer,
    FabricShared,
    MasterConfirmed,
    SharedHost,
)
from tests.openflow.fabric_harness import (
    HOST_PORTS,
    LEAF_A,
    LEAF_B,
    LINK_TIMEOUT,
    LLDP_INTERVAL,
    MAC_A,
    MAC_B,
    SPINE,
    SPINE_2,
    Fabric,
    lldp,
    lldp_frame,
    new_fabric,
    port,
    two_spines,
)

SWITCHES = frozenset({SPINE, SPINE_2, LEAF_A, LEAF_B})


def member(offers: list[FabricOffer], now: float = 1000.0) -> Fabric:
    """One instance's owner among several (it shares through ``offers``), no switch yet."""
    return new_fabric(now=now, share=offers.append)


def cables() -> list[tuple[PortRef, PortRef]]:
    """Both directions of every leaf-spine link (leaf port ``s`` faces spine ``s``)."""
    found = []
    for spine in (SPINE, SPINE_2):
        for leaf in (LEAF_A, LEAF_B):
            a, b = PortRef(leaf, spine), PortRef(spine, leaf - 10)
            found += [(a, b), (b, a)]
    return found


def rounds(fabric: Fabric, seconds: float, heard: Iterable[tuple[PortRef, PortRef]]) -> None:
    """Discovery rounds every LLDP interval for ``seconds``; before each, the probes of
    ``heard`` arrive (those the switches' masters sent and this instance can hear)."""
    heard = list(heard)
    end = fabric.clock.now + seconds
    while fabric.clock.now + LLDP_INTERVAL <= end + 1e-9:
        fabric.clock.now += LLDP_INTERVAL
        for src, dst in heard:
            lldp(fabric, src, dst)
        fabric.discover()


def shared(
    fabric: Fabric,
    mastered: Iterable[int],
    hosts: FabricOffer | None = None,
    attached: Iterable[int] = SWITCHES,
) -> None:
    fabric.tell(
        FabricShared(
            frozenset(mastered),
            {},
            fabric.clock.now,
            hosts=hosts.hosts if hosts is not None else {},
            attached=frozenset(attached),
        )
    )


def links_down(fabric: Fabric) -> list[str]:
    return [e.data["a"] for e in fabric.sent.events if e.kind == "link" and e.data["op"] == "down"]


def test_a_restarted_instance_plans_a_handed_over_switch_exactly_as_its_live_owner() -> None:
    from_a: list[FabricOffer] = []
    a = two_spines(member(from_a))  # knows the fabric and both hosts
    shared(a, SWITCHES)
    assert {h.mac for hosts in from_a[-1].hosts.values() for h in hosts} == {MAC_A, MAC_B}

    # b restarts: it reads every switch's ports and hears every probe (slave packet-ins),
    # but the hosts are silent (their routes are installed): it learns none itself.
    from_b: list[FabricOffer] = []
    b = member(from_b, a.clock.now)
    for dpid in (SPINE, SPINE_2):
        b.ports(dpid, [port(dpid, LEAF_A - 10), port(dpid, LEAF_B - 10)])
    for leaf in (LEAF_A, LEAF_B):
        b.ports(leaf, [port(leaf, n) for n in (SPINE, SPINE_2, *HOST_PORTS)])
    for src, dst in cables():
        lldp(b, src, dst)
    shared(b, (), from_a[-1])  # its first renewal: it masters nothing, reads the hosts
    assert {h.mac for h in b.owner._topology.hosts} == {MAC_A, MAC_B}
    assert from_b[-1].ready == frozenset()  # followed for less than a link timeout
    rounds(b, LINK_TIMEOUT + LLDP_INTERVAL, cables())
    rounds(a, LINK_TIMEOUT + LLDP_INTERVAL, cables())
    assert from_b[-1].ready == SWITCHES  # now a rebalance may hand it a switch

    # Handed LEAF_B: what b plans it from is what a planned it from (0 mods at the take).
    shared(b, {LEAF_B}, from_a[-1])
    for dpid in SWITCHES:
        assert b.sent.latest[dpid] == a.sent.latest[dpid]
    assert [(h.mac, h.port) for h in from_b[-1].hosts[LEAF_B]] == [(MAC_B, 5)]


def test_a_shared_host_at_a_port_seen_down_here_is_not_adopted() -> None:
    from_a: list[FabricOffer] = []
    a = two_spines(member(from_a))
    shared(a, SWITCHES)
    b = two_spines(member([]))
    shared(b, ())
    # B's port went down: b saw the port status before a's next renewal rewrote its record.
    b.ports(LEAF_B, [port(LEAF_B, n, up=n != 5) for n in (SPINE, SPINE_2, *HOST_PORTS)])
    assert b.owner._topology.host(MAC_B) is None
    shared(b, (), from_a[-1])
    assert b.owner._topology.host(MAC_B) is None


def test_a_switch_disconnected_from_this_instance_only_keeps_its_links_and_hosts() -> None:
    c = two_spines(member([]))
    shared(c, {SPINE, SPINE_2})
    before = c.sent.latest[SPINE]
    c.sent.clear()
    c.gone(LEAF_B)  # only c's connection: LEAF_B is mastered and served by another
    assert c.owner._topology.host(MAC_B) is not None
    # c no longer hears probes arriving at LEAF_B (packet-ins come over its connection).
    heard = [(src, dst) for src, dst in cables() if dst.dpid != LEAF_B]
    rounds(c, 3 * LINK_TIMEOUT, heard)
    assert links_down(c) == [] and c.sent.latest[SPINE] == before
    assert all(dpid != LEAF_B for dpids in c.sent.publishes for dpid in dpids)
    # Listed by no live lease: one reading is no evidence (right after a Redis failover the
    # instances renew one by one); listed by none for one link timeout, it is gone.
    shared(c, {SPINE, SPINE_2}, attached=SWITCHES - {LEAF_B})
    assert c.owner._topology.host(MAC_B) is not None
    c.clock.now += LINK_TIMEOUT
    shared(c, {SPINE, SPINE_2}, attached=SWITCHES - {LEAF_B})
    assert c.owner._topology.host(MAC_B) is None
    assert LEAF_B not in c.owner._topology.switches


def test_a_switch_whose_master_stopped_keeps_its_links_until_its_new_master_probes() -> None:
    a = two_spines(member([]))
    shared(a, {LEAF_A, LEAF_B})
    rounds(a, LLDP_INTERVAL, cables())
    a.sent.clear()
    # SPINE's master is paused: no probe out of SPINE arrives any more; the rest does.
    heard = [(src, dst) for src, dst in cables() if src.dpid != SPINE]
    rounds(a, 2 * LINK_TIMEOUT - LLDP_INTERVAL, heard)
    assert links_down(a) == [] and a.sent.publishes == []
    # Its new master is confirmed by the switch: it probes every up port of it at once.
    a.sent.packets.clear()
    a.tell(MasterConfirmed(SPINE, a.clock.now))
    assert sorted(ports for dpid, ports, _ in a.sent.packets) == [[1], [2]]
    assert {data for _, _, data in a.sent.packets} == {
        lldp_frame(PortRef(SPINE, 1)),
        lldp_frame(PortRef(SPINE, 2)),
    }
    rounds(a, 3 * LINK_TIMEOUT, cables())
    assert links_down(a) == []


def test_a_link_silent_while_its_switch_is_heard_is_down_and_a_silent_switch_in_the_end() -> None:
    a = two_spines(member([]))
    shared(a, {LEAF_A, LEAF_B})
    a.sent.clear()
    cut = Link(PortRef(SPINE, 1), PortRef(LEAF_A, SPINE))
    heard = [(src, dst) for src, dst in cables() if Link(src, dst) != cut]
    rounds(a, LINK_TIMEOUT + LLDP_INTERVAL, heard)
    assert cut not in a.owner._topology.links and len(links_down(a)) == 1
    # SPINE_2 falls silent as a whole and no new master is heard: down after two timeouts.
    quiet = [(src, dst) for src, dst in heard if src.dpid != SPINE_2]
    rounds(a, LINK_TIMEOUT + LLDP_INTERVAL, quiet)
    assert any(link.src.dpid == SPINE_2 for link in a.owner._topology.links)
    rounds(a, LINK_TIMEOUT + LLDP_INTERVAL, quiet)
    assert all(link.src.dpid != SPINE_2 for link in a.owner._topology.links)


def test_a_switch_not_connected_here_has_the_hosts_its_master_published_and_no_more() -> None:
    c = two_spines(member([]))
    shared(c, {SPINE, SPINE_2})
    c.gone(LEAF_B)
    # LEAF_B's master says B left (its port went down: c no longer hears LEAF_B's status);
    # a record of a switch nobody is connected to any more (it outlives it) counts for
    # nothing.
    gone_switch = 99
    c.tell(
        FabricShared(
            frozenset({SPINE, SPINE_2}),
            {},
            c.clock.now,
            hosts={LEAF_B: (), gone_switch: (SharedHost(0x0A00000000FF, 5, 0x0A0000FF),)},
            attached=SWITCHES,
        )
    )
    assert c.owner._topology.host(MAC_B) is None
    assert c.owner._topology.host(0x0A00000000FF) is None
    assert c.owner._topology.host(MAC_A) is not None  # LEAF_A is followed here: kept


def test_an_instance_that_was_paused_judges_nothing_and_takes_nothing_until_it_heard_again() -> (
    None
):
    offers: list[FabricOffer] = []
    c = two_spines(member(offers))
    shared(c, {SPINE, SPINE_2})
    rounds(c, LINK_TIMEOUT + LLDP_INTERVAL, cables())
    assert offers[-1].ready == SWITCHES
    c.sent.clear()
    c.clock.now += 3 * LINK_TIMEOUT  # SIGSTOP, then SIGCONT: nothing was heard meanwhile
    c.discover()
    assert links_down(c) == [] and c.sent.publishes == []
    assert offers[-1].ready == frozenset()  # its view is old: no switch is handed to it
    rounds(c, LINK_TIMEOUT + LLDP_INTERVAL, cables())
    assert offers[-1].ready == SWITCHES and links_down(c) == []
