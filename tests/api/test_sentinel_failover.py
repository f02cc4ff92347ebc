"""The store survives its primary: Sentinel fails over, and no write the API acknowledged is lost.

A primary, one replica and three Sentinels (real ``redis-server`` processes on free ports);
the API on ``redis+sentinel://...?min_replicas=1``; one thread writes policy versions
without pause.  The replica is paused first, so the writes made then reach the primary only:
the API must refuse to acknowledge them (503), since the primary is then killed (SIGKILL)
and the replica, resumed, is promoted without them.  Every version the API did acknowledge
must be on the new primary, the API must answer again within the failover, and once the old
primary is back (as the new one's replica) writes are acknowledged again.
"""

from __future__ import annotations

import copy
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry
from redis.sentinel import SentinelConnectionPool

from controller.api.app import create_app
from controller.api.settings import ApiSettings
from controller.auth.model import Role
from controller.store.client import connect
from controller.store.policies import PolicyStore
from controller.store.tokens import TokenStore
from tests.api.conftest import DOCUMENT
from tests.conftest import free_port
from tests.support.policy_writer import Writer
from tests.support.sentinel import DOWN_AFTER_MS, SentinelSet

RETRY_S = 8.0
"""How long the API's client retries a command across the failover (the URL's retry_s)."""
ANSWER_AGAIN_S = 8.0
"""The API must answer (from the new primary) within this of the kill: the Sentinels'
down-after (1 s), their election and promotion, and the client's backoff."""


def rate_of(number: int) -> str:
    """What write ``number`` sends as ``ports.rate``, to recognise its version afterwards."""
    return f"{1000 + number}Mbit"


def policy_put(client: TestClient) -> Callable[[int], tuple[int, dict[str, Any]]]:
    """The writer's ``put``: the test document with write ``number``'s rate."""

    def put(number: int) -> tuple[int, dict[str, Any]]:
        document = copy.deepcopy(DOCUMENT)
        document["ports"]["rate"] = rate_of(number)
        response = client.put("/v1/policy", json=document)
        return response.status_code, response.json()

    return put


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[SentinelSet]:
    ports: list[int] = []
    while len(ports) < 5:  # five distinct free ports
        port = free_port()
        if port not in ports:
            ports.append(port)
    nodes = SentinelSet(tmp_path, ports)
    try:
        nodes.start()
        yield nodes
    finally:
        nodes.stop()


def test_no_acknowledged_write_is_lost_when_the_primary_dies(sentinels: SentinelSet) -> None:
    url = sentinels.url(f"min_replicas=1&wait_ms=200&retry_s={RETRY_S}")
    store = connect(url)
    _, secret = TokenStore(store).create("failover", Role.admin)
    app = create_app(ApiSettings(redis_url=url, registry=CollectorRegistry()))
    with TestClient(app, headers={"Authorization": f"Bearer {secret}"}) as client:
        writer = Writer(policy_put(client))
        thread = threading.Thread(target=writer.run, name="policy-writer", daemon=True)
        thread.start()
        try:
            writer.wait("10 writes acknowledged", lambda a: sum(x.acked for x in a) >= 10, 15)

            # The replica stops taking the stream: the writes now reach the primary only.
            replica = sentinels.nodes["replica"]
            replica.signal(signal.SIGSTOP)
            paused = time.monotonic()
            writer.wait(
                "a write refused as not replicated",
                lambda a: any(x.not_replicated and x.sent >= paused for x in a),
                10,
            )
            killed = time.monotonic()
            sentinels.nodes["primary"].kill()
            replica.signal(signal.SIGCONT)

            # Answered again once the replica is the primary: writes reach it (503 still:
            # it has no replica of its own), reads too.
            writer.wait(
                "an answer from the new primary",
                lambda a: any(x.sent >= killed and (x.acked or x.not_replicated) for x in a),
                RETRY_S + 10,
            )
            switched = sentinels.nodes["sentinel-1"].wait_for(r"\+switch-master ", timeout_s=20)
            answered = next(
                x.done for x in writer.answers if x.sent >= killed and (x.acked or x.not_replicated)
            )

            # The old primary back as the new primary's replica (see ``start_primary``).
            restarted = time.monotonic()
            sentinels.start_primary(replica_of=sentinels.ports[1])
            writer.wait(
                "5 writes acknowledged after the old primary came back",
                lambda a: sum(x.acked and x.sent >= restarted for x in a) >= 5,
                20,
            )
        finally:
            writer.stop.set()
            thread.join(timeout=RETRY_S + 10)
        after = client.get("/v1/policy")
    assert after.status_code == 200
    # A client made before the failover (as a controller's link is) follows the new primary.
    assert [token.name for token in TokenStore(store).all()] == ["failover"]
    pool = store.connection_pool
    assert isinstance(pool, SentinelConnectionPool)
    assert pool.get_master_address() == ("127.0.0.1", sentinels.ports[1])

    answers = writer.answers
    acked = [a for a in answers if a.acked]
    versions = [a.body["version"] for a in acked]
    assert versions == sorted(versions) and len(set(versions)) == len(versions), versions
    # Every acknowledged version is on the new primary, holding what was written.
    check = PolicyStore(connect(url))
    lost = [
        (v, rate_of(a.number))
        for v, a in zip(versions, acked, strict=True)
        if (stored := check.get(v)) is None or stored.document["ports"]["rate"] != rate_of(a.number)
    ]
    assert lost == [], f"acknowledged writes lost across the failover: {lost}"
    # Nothing was acknowledged while the replica was paused: those writes were on the
    # primary only, which died with them.
    assert not any(a.acked and paused <= a.sent and a.done <= killed for a in answers)
    assert answered - killed <= ANSWER_AGAIN_S
    refused = sum(a.not_replicated for a in answers)
    unavailable = sum(a.status == 503 and not a.not_replicated for a in answers)
    other = len(answers) - len(acked) - refused - unavailable
    print(
        f"\nfailover: down-after {DOWN_AFTER_MS} ms; +switch-master {switched - killed:.2f} s"
        f" after the kill; the API answered from the new primary {answered - killed:.2f} s"
        f" after it; writes acknowledged {len(acked)} (lost 0), refused as not replicated"
        f" {refused}, unavailable {unavailable}, other {other}"
    )
    assert all(a.acked or a.status == 503 for a in answers), {a.status for a in answers}
