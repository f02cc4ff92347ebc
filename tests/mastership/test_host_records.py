"""The life of a host record in Redis (``controller.mastership.hosts``).

- A host its master forgets (its port went down) leaves the switch's record: the master's
  offer changes and the exchange rewrites the record whole, fenced by its generation.
- A switch handed over keeps its record (its next master starts from it), as does a
  switch whose owner's lease ran out (a failover): it still has an owner record.
- A switch that left the fabric (no owner record, listed by no live lease) loses its
  record at the next read, whoever reads.
"""

from __future__ import annotations

from dataclasses import replace

import redis

from controller.mastership.hosts import HostStore
from controller.mastership.keeper import LeaseKeeper
from controller.mastership.leases import Leases
from controller.mastership.pins import PinStore
from controller.openflow.fabric_events import FabricOffer, FabricShared, SharedHost
from controller.shell.mastership import FabricExchange
from tests.openflow.fabric_harness import (
    HOST_PORTS,
    IP_A,
    IP_UNKNOWN,
    LEAF_A,
    MAC_A,
    arp_frame,
    leaf_ports,
    new_fabric,
)

H1 = SharedHost(0x0A0000000001, 5, 0x0A000001)
H2 = SharedHost(0x0A0000000002, 6, None)


def test_a_host_whose_port_went_down_leaves_its_switch_record(redis_client: redis.Redis) -> None:
    leases = Leases(redis_client, "a", prefix="life")
    told: list[FabricShared] = []
    keeper = LeaseKeeper(leases, connected=lambda: {LEAF_A}, publish=lambda roles: None)
    offers: list[FabricOffer] = []
    fabric = new_fabric(share=offers.append)
    exchange = FabricExchange(PinStore(leases), HostStore(leases), told.append)
    keeper.watch(exchange)

    def renew() -> None:
        if offers:
            exchange.offer(offers[-1])
        keeper.round()
        fabric.tell(replace(told[-1], now=fabric.clock.now))

    fabric.ports(LEAF_A, leaf_ports(LEAF_A))
    renew()  # LEAF_A is this instance's
    fabric.clock.now += 2.0  # its host ports settle into edge ports
    fabric.discover()
    fabric.packet_in(LEAF_A, HOST_PORTS[0], arp_frame(1, MAC_A, IP_A, IP_UNKNOWN))
    renew()
    assert [h.mac for h in HostStore(leases).read()[LEAF_A]] == [MAC_A]
    fabric.ports(LEAF_A, leaf_ports(LEAF_A, p5=False))  # the host's port went down
    assert fabric.owner._topology.host(MAC_A) is None
    renew()
    assert HostStore(leases).read() == {LEAF_A: ()}  # the master says: no host here


def test_a_record_goes_with_its_switch_and_stays_while_anyone_has_it(
    redis_client: redis.Redis,
) -> None:
    a = Leases(redis_client, "a", prefix="sweep")
    b = Leases(redis_client, "b", prefix="sweep")
    a.renew({11, 12})
    b.renew({11, 12})
    eleven, twelve = a.take(11).generation, a.take(12).generation
    assert eleven is not None and twelve is not None
    hosts = HostStore(a)
    assert hosts.write({11: (eleven, (H1,)), 12: (twelve, (H2,))}) == 2
    # 12 handed over (a released it, b has not taken it yet): b is connected to it.
    assert a.release(12)
    a.renew({11})
    assert HostStore(b).read() == {11: (H1,), 12: (H2,)}
    # Nobody is connected to 12 any more, nobody owns it: it left the fabric.
    b.renew({11})
    assert HostStore(b).read() == {11: (H1,)}
    assert not redis_client.hexists("sweep:mastership:hosts", "000000000000000c")
    # Every lease ran out (a failover): 11 still has its owner record, its record stays.
    redis_client.delete("sweep:mastership:lease:a", "sweep:mastership:lease:b")
    assert HostStore(b).read() == {11: (H1,)}
