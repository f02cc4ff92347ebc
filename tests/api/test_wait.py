"""?wait=applied: the write answers when every live switch confirms, or 504 naming the rest."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from controller.api.waiting import pending_switches
from controller.store.policies import PolicyStore
from controller.store.switches import SwitchReport, SwitchStore

DPID_A = "000000000000000a"
DPID_B = "000000000000000b"


class FakeController:
    """Confirms each new version on its switches after ``delay_s``, as a controller would.

    It learns of a version the way a controller does: from the store's channel.
    """

    def __init__(self, client: redis.Redis, reports: list[SwitchReport], delay_s: float) -> None:
        self._pubsub = client.pubsub(ignore_subscribe_messages=True)
        self._pubsub.subscribe(PolicyStore(client).channel)
        self._switches = SwitchStore(client)
        self._reports = reports
        self._delay_s = delay_s
        self._stop = threading.Event()
        self.confirmed: list[tuple[int, float]] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._pubsub.get_message(timeout=1)  # the subscription is active before any write
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._pubsub.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self._pubsub.get_message(timeout=0.05)
            if message is None:
                continue
            version = json.loads(message["data"])["version"]
            self._stop.wait(self._delay_s)  # the controller's sync and barrier take a while
            for report in self._reports:
                self._switches.heartbeat(report.controller)
                self._switches.report(replace(report, applied_version=version))
            self.confirmed.append((version, time.monotonic()))


@pytest.fixture
def controller(redis_client: redis.Redis, report_switch: Any) -> Iterator[FakeController]:
    """Two live switches, A and B, confirming every version 150 ms after it is written."""
    reports = [report_switch(0xA, applied=None), report_switch(0xB, applied=None)]
    fake = FakeController(redis_client, reports, delay_s=0.15)
    fake.start()
    yield fake
    fake.stop()


def test_wait_applied_returns_once_every_switch_confirms(
    client: TestClient, document: dict[str, Any], controller: FakeController
) -> None:
    started = time.monotonic()
    response = client.put("/v1/policy", params={"wait": "applied"}, json=document)
    answered = time.monotonic()
    assert response.status_code == 201, response.text
    assert response.headers["etag"] == '"1"'
    assert response.json()["applied"] == {DPID_A: 1, DPID_B: 1}
    [(version, confirmed_at)] = controller.confirmed
    assert version == 1
    assert started + 0.15 <= confirmed_at <= answered
    assert answered - confirmed_at < 0.5


def test_without_wait_the_write_answers_before_the_switches(
    client: TestClient, document: dict[str, Any], controller: FakeController
) -> None:
    response = client.put("/v1/policy", json=document)
    assert response.status_code == 201
    assert response.json()["applied"] == {}


def test_rollback_waits_too(
    client: TestClient, document: dict[str, Any], controller: FakeController
) -> None:
    client.put("/v1/policy", params={"wait": "applied"}, json=document)
    other = {**document, "default_class": "training"}
    client.put("/v1/policy", params={"wait": "applied"}, json=other)
    response = client.post(
        "/v1/policy/rollback", params={"wait": "applied", "timeout": 5}, json={"version": 1}
    )
    assert response.status_code == 201, response.text
    assert response.json()["applied"] == {DPID_A: 3, DPID_B: 3}


def test_timeout_is_504_naming_the_switch_that_did_not_confirm(
    client: TestClient,
    document: dict[str, Any],
    report_switch: Any,
    policies: PolicyStore,
) -> None:
    report_switch(0xA, applied=1)
    report_switch(0xB, applied=None)
    policies.put(document, author="seed")  # version 1, which A already runs
    client_timeout = 0.3
    started = time.monotonic()
    response = client.put(
        "/v1/policy",
        params={"wait": "applied", "timeout": client_timeout},
        json={**document, "default_class": "training"},  # not version 1's: a new version
    )
    elapsed = time.monotonic() - started
    assert response.status_code == 504
    assert response.headers["etag"] == '"2"'
    assert response.json() == {
        "detail": "version 2 is stored and active, but 2 of 2 live switch(es) did not confirm it"
        " within 0.3 s",
        "version": 2,
        "pending": [DPID_A, DPID_B],
    }
    assert client_timeout <= elapsed < client_timeout + 1.0
    assert policies.active_version() == 2  # stored and active all the same


def test_only_the_slow_switch_is_pending(
    client: TestClient, document: dict[str, Any], redis_client: redis.Redis, report_switch: Any
) -> None:
    fast = FakeController(redis_client, [report_switch(0xA)], delay_s=0.01)
    report_switch(0xB)
    fast.start()
    try:
        response = client.put(
            "/v1/policy", params={"wait": "applied", "timeout": 0.5}, json=document
        )
    finally:
        fast.stop()
    assert response.status_code == 504
    assert response.json()["pending"] == [DPID_B]


NO_LIVE_SWITCH = (
    "no live switch (no controller with a switch beat in the last 3 s): nothing would apply this"
    " version, so nothing was stored; write without wait=applied (flowlane policy apply"
    " --store-only) to store it anyway"
)


def test_no_live_switch_refuses_a_waiting_write_and_stores_nothing(
    client: TestClient, document: dict[str, Any], report_switch: Any, policies: PolicyStore
) -> None:
    report_switch(0xC, controller="crashed", beat=time.time() - 3600)
    started = time.monotonic()
    response = client.put("/v1/policy", params={"wait": "applied", "timeout": 30}, json=document)
    assert time.monotonic() - started < 1
    assert response.status_code == 409
    assert response.json() == {"detail": NO_LIVE_SWITCH}
    assert policies.active_version() is None
    assert "etag" not in response.headers


def test_a_live_controller_without_switches_is_no_live_switch(
    client: TestClient, document: dict[str, Any], switches: SwitchStore
) -> None:
    switches.heartbeat("ctl-idle")
    response = client.put("/v1/policy", params={"wait": "applied"}, json=document)
    assert response.status_code == 409


def test_without_wait_a_write_is_stored_only(
    client: TestClient, document: dict[str, Any], policies: PolicyStore
) -> None:
    response = client.put("/v1/policy", json=document)
    assert response.status_code == 201
    assert response.json()["applied"] == {}
    assert policies.active_version() == 1


def test_a_waiting_rollback_with_no_live_switch_is_refused(
    client: TestClient, document: dict[str, Any], policies: PolicyStore
) -> None:
    policies.put(document, author="op")
    policies.put({**document, "default_class": "training"}, author="op")
    response = client.post("/v1/policy/rollback", params={"wait": "applied"}, json={"version": 1})
    assert response.status_code == 409
    assert response.json() == {"detail": NO_LIVE_SWITCH}
    assert policies.active_version() == 2
    # An unknown version is still a 404, not hidden behind the missing switches.
    unknown = client.post("/v1/policy/rollback", params={"wait": "applied"}, json={"version": 9})
    assert unknown.status_code == 404


def test_a_switch_that_leaves_during_the_wait_stops_counting(
    client: TestClient,
    document: dict[str, Any],
    redis_client: redis.Redis,
    report_switch: Any,
    switches: SwitchStore,
) -> None:
    staying = FakeController(redis_client, [report_switch(0xB)], delay_s=0.3)
    report_switch(0xA)
    staying.start()
    timer = threading.Timer(0.1, switches.remove, args=(0xA,))
    timer.start()
    started = time.monotonic()
    try:
        response = client.put("/v1/policy", params={"wait": "applied", "timeout": 5}, json=document)
    finally:
        timer.join()
        staying.stop()
    assert response.status_code == 201, response.text
    assert response.json()["applied"] == {DPID_B: 1}
    assert time.monotonic() - started < 2


def test_every_switch_leaving_during_the_wait_is_a_failure(
    client: TestClient,
    document: dict[str, Any],
    report_switch: Any,
    switches: SwitchStore,
    policies: PolicyStore,
) -> None:
    report_switch(0xA)

    def leave_once_stored() -> None:
        # After the write, not after a fixed delay: on a loaded machine the PUT may not have
        # reached its wait 0.1 s later, and a switch gone before the write is another answer.
        deadline = time.monotonic() + 5
        while policies.active_version() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        switches.remove(0xA)

    leaving = threading.Thread(target=leave_once_stored)
    leaving.start()
    started = time.monotonic()
    response = client.put("/v1/policy", params={"wait": "applied", "timeout": 5}, json=document)
    leaving.join()
    assert time.monotonic() - started < 2
    assert response.status_code == 409
    assert response.headers["etag"] == '"1"'
    assert response.json() == {
        "detail": "version 1 is stored and active, but no live switch is left to apply it"
        " (their controllers stopped beating or the switches disconnected)",
        "version": 1,
    }
    assert policies.active_version() == 1


def test_a_newer_version_counts_as_confirmation() -> None:
    applied = {DPID_A: 5, DPID_B: 3}
    assert pending_switches([DPID_A, DPID_B], applied, 4) == [DPID_B]
    assert pending_switches([DPID_A, DPID_B], applied, 3) == []
    assert pending_switches([DPID_B, DPID_A, "00000000000000ff"], {}, 1) == [
        DPID_A,
        DPID_B,
        "00000000000000ff",
    ]
