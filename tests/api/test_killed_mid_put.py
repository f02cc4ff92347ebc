"""The API process killed in the middle of a ``PUT``: the version is stored whole or not at all.

A large policy (slow to parse and validate) is sent again and again while
the ``flowlane api`` process is killed with SIGKILL at a different moment
each time, before, during and after the write.  Whatever the moment, the
store holds only complete, valid versions, numbered without a gap, and the
active one is among them: checked after every kill.

The moments are fractions of how long one such ``PUT`` takes on this machine now
(measured first, on a fresh process like the ones killed): a fixed list of delays
measures the machine, not the API.  The request took 40-70 ms on this 2-core machine, so
the fixed delays of 0.1 to 1.5 s this test once used all killed an API that had already
answered (seven of its nine kills, each followed by a restart), and only two kills fell
inside a request.  Now five fall inside it, spread over it, between one before it is sent
and one after it has answered.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import redis

from controller.auth.model import Role
from controller.policy.load import parse_policy
from controller.store.policies import PolicyStore
from controller.store.tokens import TokenStore
from tests.support.api_process import kill_group, start_api

RULES = 800
INSIDE = (0.2, 0.4, 0.6, 0.8, 1.0)
"""Kill moments inside a request, as fractions of the measured ``PUT``."""


def big_document(seed: int) -> dict[str, Any]:
    rules = [
        {"name": f"r{seed}-{n}", "match": {"tcp_dst": 10_000 + n}, "class": "training"}
        for n in range(RULES)
    ]
    return {
        "classes": {
            "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
            "training": {"priority": 1, "dscp": 26, "min_rate": "70%"},
        },
        "default_class": "inference",
        "rules": rules,
    }


def whole_versions(store: PolicyStore) -> list[int]:
    """The stored version numbers, each asserted complete and valid, numbered without a gap,
    the active one the newest."""
    versions = store.history(limit=100)
    numbers = sorted(v.version for v in versions)
    assert numbers == list(range(1, len(numbers) + 1)), "a version number without its document"
    for version in versions:
        parse_policy(version.document)  # complete and valid, every one
        assert len(version.document["rules"]) == RULES
    active = store.active_version()
    if numbers:
        assert active == numbers[-1]
        assert store.get(active) is not None
    else:
        assert active is None
    return numbers


def test_a_put_is_stored_whole_or_not_at_all(
    redis_client: redis.Redis, redis_url: str, unused_port: int
) -> None:
    url = f"http://127.0.0.1:{unused_port}/v1/policy"
    _, secret = TokenStore(redis_client).create("writer", Role.admin)
    auth = {"Authorization": f"Bearer {secret}"}
    store = PolicyStore(redis_client)
    answered: list[int] = []

    def send(document: dict[str, Any]) -> None:
        try:
            response = httpx.put(url, json=document, timeout=30, headers=auth)
            answered.append(response.status_code)
        except httpx.HTTPError:
            pass  # killed before it answered

    # How long one PUT takes here and now, on a process as fresh as the ones killed.
    process = start_api(redis_url, unused_port)
    try:
        started = time.monotonic()
        calibration = httpx.put(url, json=big_document(-1), timeout=30, headers=auth)
        took = time.monotonic() - started
        assert calibration.status_code == 201, calibration.text
    finally:
        kill_group(process)
    # Before the request is sent, spread over it, and once it has answered.
    moments: list[float | None] = [0.0, *(f * took for f in INSIDE), None]
    for attempt, delay in enumerate(moments):
        process = start_api(redis_url, unused_port)
        try:
            writer = threading.Thread(target=send, args=(big_document(attempt),))
            writer.start()
            if delay is None:
                writer.join(30)
            else:
                time.sleep(delay)
        finally:
            kill_group(process)
        writer.join(30)
        whole_versions(store)

    numbers = whole_versions(store)
    stored = answered.count(201)
    assert len(numbers) - 1 >= stored, (numbers, answered)  # the calibration's is one of them
    assert 0 < stored < len(moments), f"no kill fell inside a write: {answered} ({took:.3f} s)"
