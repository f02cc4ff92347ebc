"""The applied-version notifications: a confirmation wakes a waiting write at once."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time

import pytest
import redis
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from controller.api import waiting
from controller.api.app import create_app
from controller.api.applied_watch import AppliedWatch
from controller.api.settings import ApiSettings
from controller.store.policies import PolicyStore
from controller.store.switches import SwitchStore

from .conftest import DOCUMENT, ReportSwitch, bearer


async def _woken(watch: AppliedWatch, act: threading.Thread, within_s: float) -> bool:
    """Whether a waiter registered before ``act`` starts is woken within ``within_s``."""
    with watch.waiter() as event:
        act.start()
        try:
            await asyncio.wait_for(event.wait(), within_s)
        except TimeoutError:
            return False
        finally:
            await asyncio.to_thread(act.join)
        return True


def _run_watched(client: redis.Redis, body: threading.Thread, within_s: float) -> bool:
    switches = SwitchStore(client)

    async def scenario() -> bool:
        watch = AppliedWatch(client, switches.applied_channel)
        watch.start()
        try:
            assert await asyncio.to_thread(watch.subscribed.wait, 5.0)
            await asyncio.sleep(0.05)  # the wake-up of the subscription itself has passed
            return await _woken(watch, body, within_s)
        finally:
            await asyncio.to_thread(watch.stop)

    return asyncio.run(scenario())


def test_a_confirmation_wakes_the_waiters(redis_client: redis.Redis) -> None:
    switches = SwitchStore(redis_client)
    confirm = threading.Thread(target=switches.set_applied, args=(0xA, 3, "ctl-1"))
    assert _run_watched(redis_client, confirm, within_s=2.0)


def test_a_report_wakes_the_waiters_too(
    redis_client: redis.Redis, report_switch: ReportSwitch
) -> None:
    confirm = threading.Thread(target=report_switch, args=(0xA,), kwargs={"applied": 3})
    assert _run_watched(redis_client, confirm, within_s=2.0)


def test_other_writes_wake_nobody(redis_client: redis.Redis) -> None:
    unrelated = threading.Thread(target=redis_client.hset, args=("flowlane:applied", "a", 1))
    assert not _run_watched(redis_client, unrelated, within_s=0.3)


def test_a_lost_subscription_is_resumed_and_wakes_every_waiter(redis_client: redis.Redis) -> None:
    def kill_subscriber() -> None:
        redis_client.client_kill_filter(_type="pubsub")

    assert _run_watched(redis_client, threading.Thread(target=kill_subscriber), within_s=3.0)


def test_a_wait_returns_on_the_confirmation_not_the_poll(
    redis_client: redis.Redis,
    settings: ApiSettings,
    report_switch: ReportSwitch,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With every re-read 30 s apart, only the notification can end the wait in time."""
    slow_poll = dataclasses.replace(settings, poll_interval_s=30.0, registry=CollectorRegistry())
    # The live switches are re-read every 0.25 s too; pushed out of reach, so that a bound with
    # room for a loaded machine (the suite runs on every core) still tells the two apart.
    monkeypatch.setattr(waiting, "REFRESH_LIVE_S", 30.0)
    report_switch(0xA, applied=None)
    switches = SwitchStore(redis_client)
    policies = PolicyStore(redis_client)

    def controller() -> None:
        deadline = time.monotonic() + 5
        while policies.active_version() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        switches.set_applied(0xA, 1, "ctl-1")

    confirming = threading.Thread(target=controller)
    with TestClient(create_app(slow_poll), headers=bearer(redis_client)) as client:
        confirming.start()
        started = time.monotonic()
        response = client.put("/v1/policy", params={"wait": "applied"}, json=DOCUMENT)
        elapsed = time.monotonic() - started
    confirming.join()
    assert response.status_code == 201, response.text
    assert response.json()["applied"] == {"000000000000000a": 1}
    # Far below the 30 s of every other wake-up.
    assert elapsed < 3.0, elapsed


def test_a_lost_notification_is_caught_by_the_re_read(
    redis_client: redis.Redis, settings: ApiSettings, report_switch: ReportSwitch
) -> None:
    """A confirmation written without its message (lost to a reconnect) still ends the wait."""
    report_switch(0xA, applied=None)
    policies = PolicyStore(redis_client)

    def silent_controller() -> None:
        deadline = time.monotonic() + 5
        while policies.active_version() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        redis_client.hset("flowlane:applied", "000000000000000a", 1)

    confirming = threading.Thread(target=silent_controller)
    with TestClient(create_app(settings), headers=bearer(redis_client)) as client:
        confirming.start()
        response = client.put("/v1/policy", params={"wait": "applied", "timeout": 5}, json=DOCUMENT)
    confirming.join()
    assert response.status_code == 201, response.text
    assert response.json()["applied"] == {"000000000000000a": 1}
