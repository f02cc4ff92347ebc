"""The API process killed in the middle of a ``PUT``: the version is stored whole or not at all.

A large policy (slow to parse and validate) is sent again and again while
the ``flowlane api`` process is killed with SIGKILL at a different moment
each time, before, during and after the write.  Whatever the moment, the
store holds only complete, valid versions, numbered without a gap, and the
active one is among them.
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


def big_document(seed: int) -> dict[str, Any]:
    rules = [
        {"name": f"r{seed}-{n}", "match": {"tcp_dst": 10_000 + n}, "class": "training"}
        for n in range(800)
    ]
    return {
        "classes": {
            "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
            "training": {"priority": 1, "dscp": 26, "min_rate": "70%"},
        },
        "default_class": "inference",
        "rules": rules,
    }


def test_a_put_is_stored_whole_or_not_at_all(
    redis_client: redis.Redis, redis_url: str, unused_port: int
) -> None:
    url = f"http://127.0.0.1:{unused_port}/v1/policy"
    _, secret = TokenStore(redis_client).create("writer", Role.admin)
    auth = {"Authorization": f"Bearer {secret}"}
    answered: list[int] = []
    process = start_api(redis_url, unused_port)
    try:
        # Kill delays from "before the body is read" to "after the answer".
        for attempt, delay in enumerate([0.0, 0.05, 0.1, 0.2, 0.3, 0.45, 0.6, 0.9, 1.5]):

            def send(document: dict[str, Any]) -> None:
                try:
                    response = httpx.put(url, json=document, timeout=30, headers=auth)
                    answered.append(response.status_code)
                except httpx.HTTPError:
                    pass  # killed before it answered

            writer = threading.Thread(target=send, args=(big_document(attempt),))
            writer.start()
            time.sleep(delay)
            kill_group(process)
            writer.join(30)
            process = start_api(redis_url, unused_port)
    finally:
        kill_group(process)

    store = PolicyStore(redis_client)
    versions = store.history(limit=100)
    numbers = sorted(v.version for v in versions)
    stored = answered.count(201)
    assert len(numbers) >= stored, (numbers, answered)
    assert 0 < stored < 9, f"no kill fell inside a write: {answered}"
    assert numbers == list(range(1, len(numbers) + 1)), "a version number without its document"
    for version in versions:
        parse_policy(version.document)  # complete and valid, every one
        assert len(version.document["rules"]) == 800
    active = store.active_version()
    if numbers:
        assert active == numbers[-1]
        assert store.get(active) is not None
    else:
        assert active is None
