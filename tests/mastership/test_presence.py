"""A killed instance's switches are taken within a watch; a paused or slow one keeps them
until its lease's TTL (``controller.mastership.presence``), against a real Redis.

"Killed" is an instance whose lease connections close (what its process's exit does:
``Leases.close``); "paused" one whose keeper stops renewing while its connections stay
open (what ``SIGSTOP`` or a long stall does).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

import pytest
import redis

from controller.mastership.decide import Role
from controller.mastership.keeper import LeaseKeeper
from controller.mastership.leases import Leases
from controller.mastership.presence import presence_name, present_tokens
from controller.store.client import connect

SWITCHES = frozenset({1, 2, 3, 4})


def wait_until(what: str, condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


class Instance:
    def __init__(self, client: redis.Redis, name: str, ttl_s: float = 3.0) -> None:
        self.leases = Leases(client, name, prefix="presence", ttl_s=ttl_s, time_floor=True)
        self.wakes = threading.Event()
        self.keeper = LeaseKeeper(
            self.leases, lambda: SWITCHES, lambda _roles: None, wake=self.wakes.set
        )

    def masters(self) -> set[int]:
        roles: Mapping[int, Role] = self.keeper.roles
        return {dpid for dpid, role in roles.items() if role.name == "master"}


def split(a: Instance, b: Instance) -> None:
    a.keeper.round()
    b.keeper.round()
    a.keeper.round()  # a hands b its share
    b.keeper.round()
    assert len(a.masters()) == len(b.masters()) == 2


def test_connection_names_carry_the_lease_token() -> None:
    clients = [{"name": presence_name("ab12")}, {"name": ""}, {"name": "other"}]
    assert present_tokens(clients) == {"ab12"}


def test_a_killed_instance_s_switches_are_taken_at_the_next_watch(
    redis_client: redis.Redis,
) -> None:
    a, b = Instance(redis_client, "a"), Instance(redis_client, "b")
    split(a, b)
    theirs = a.masters()
    b.keeper.watch_once()
    b.wakes.clear()
    assert not b.keeper.watch_once() and not b.wakes.is_set()  # nothing changed: no round

    killed = time.monotonic()
    a.leases.close()
    wait_until("Redis to drop a's connection", lambda: b.keeper.watch_once())
    assert b.wakes.is_set()  # the heartbeat runs a round now
    assert not redis_client.exists("presence:mastership:lease:a")  # ended, 3 s TTL or not
    b.keeper.round()
    assert b.masters() == SWITCHES
    assert time.monotonic() - killed < 0.5
    generations = {dpid: b.keeper.roles[dpid].generation for dpid in theirs}
    assert all(g > 10**12 for g in generations.values())  # the time floor


def test_the_watch_thread_wakes_the_round_within_a_watch(redis_client: redis.Redis) -> None:
    a, b = Instance(redis_client, "a"), Instance(redis_client, "b")
    split(a, b)
    b.keeper.start_watch(interval_s=0.05)
    try:
        time.sleep(0.15)
        b.wakes.clear()
        a.leases.close()
        assert b.wakes.wait(1.0)
    finally:
        b.keeper.resign()
    assert b.keeper._watcher is None


def test_a_paused_instance_keeps_its_lease_until_its_ttl(redis_client: redis.Redis) -> None:
    a, b = Instance(redis_client, "a", ttl_s=1.0), Instance(redis_client, "b")
    split(a, b)
    a.leases.client.ping()  # its connection stays open while it is "paused"
    paused = time.monotonic()
    while time.monotonic() - paused < 0.6:  # stalls far beyond a GC or a busy CPU
        assert not b.keeper.watch_once()
        time.sleep(0.05)
    b.keeper.round()
    assert len(b.masters()) == 2
    wait_until("a's lease expires", lambda: b.keeper.watch_once())
    b.keeper.round()
    assert b.masters() == SWITCHES
    # a wakes: registered again, the switches are b's; its own take is fenced.
    roles = a.keeper.round()
    assert roles is not None and all(role.name == "slave" for role in roles.values())


def test_a_lease_renewed_on_another_redis_run_is_not_judged_by_its_connection(
    redis_client: redis.Redis,
) -> None:
    """After a Redis restart or a Sentinel failover no instance has reconnected yet: none is
    taken for dead until it renewed on the new server (then its connection is there)."""
    a, b = Instance(redis_client, "a"), Instance(redis_client, "b")
    split(a, b)
    redis_client.hset("presence:mastership:lease:a", "run", "an-earlier-server")
    a.leases.close()
    time.sleep(0.05)
    assert not b.keeper.watch_once()
    assert redis_client.exists("presence:mastership:lease:a")
    b.keeper.round()
    assert len(b.masters()) == 2  # a's switches wait for its TTL


def test_generation_ids_stay_above_what_a_switch_saw_after_redis_lost_them(
    redis_client: redis.Redis,
) -> None:
    a = Instance(redis_client, "a")
    a.keeper.round()
    before = a.keeper.roles[1].generation
    redis_client.flushdb()  # Redis came back empty
    time.sleep(0.002)  # a later millisecond (within one, the id is equal: OVS accepts that)
    a.keeper.round()  # registered again: its switches are taken again
    after = a.keeper.roles[1].generation
    assert a.keeper.roles[1].name == "master" and after > before
    counting = Leases(redis_client, "c", prefix="counting")  # without the floor: 1, 2, 3
    counting.renew({9})
    assert counting.take(9).generation == 1


def test_a_take_waits_for_replicas_when_the_url_asks_and_is_used_without_them(
    redis_url: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    client = connect(f"{redis_url}?min_replicas=1&wait_ms=20")
    try:
        leases = Leases(client, "w", prefix="wait", time_floor=True)
        leases.renew({5})
        with caplog.at_level(logging.WARNING, logger="flowlane.controller"):
            taken = leases.take(5)
        assert taken.generation is not None and taken.generation > 10**12
        assert "0 of 1 replica(s)" in caplog.text
        leases.close()
    finally:
        client.close()


def test_a_sentinel_client_s_named_twin_follows_the_same_sentinels_with_its_durability() -> None:
    """No I/O: the twin's pool asks the same Sentinels for the same primary, names every
    connection it makes (again after a failover's reconnect), and WAITs as the URL says."""
    from redis.sentinel import SentinelConnectionPool

    from controller.mastership.presence import named_client
    from controller.store.client import StoreClient

    client = connect("redis+sentinel://127.0.0.1:1,127.0.0.1:2/flowlane?min_replicas=1")
    try:
        twin = named_client(client, presence_name("t0"))
        pool = twin.connection_pool
        assert isinstance(twin, StoreClient) and isinstance(pool, SentinelConnectionPool)
        original = client.connection_pool
        assert isinstance(original, SentinelConnectionPool)
        assert (
            pool.service_name == "flowlane" and pool.sentinel_manager is original.sentinel_manager
        )
        assert pool.connection_class is original.connection_class
        assert pool.connection_kwargs["client_name"] == "flowlane-lease-t0"
        assert original.connection_kwargs.get("client_name") is None
        assert twin.durability.min_replicas == 1
    finally:
        client.close()


def test_without_client_list_the_leases_end_by_their_ttl_alone(
    redis_url: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """A Redis user whose ACL refuses CLIENT LIST: said once, then no more watching."""
    redis_client.execute_command(
        "ACL", "SETUSER", "nolist", "on", ">pw", "~*", "&*", "+@all", "-client|list"
    )
    client = connect(redis_url.replace("redis://", "redis://nolist:pw@"))
    try:
        limited = Instance(client, "limited")
        limited.keeper.round()
        with caplog.at_level(logging.ERROR, logger="flowlane.controller"):
            assert not limited.keeper.watch_once()
        assert "cannot watch" in caplog.text
        assert limited.keeper.round() is not None  # the lease itself works as before
        limited.leases.close()
    finally:
        client.close()
        redis_client.execute_command("ACL", "DELUSER", "nolist")
