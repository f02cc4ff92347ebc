"""/healthz answers without Redis; /readyz needs Redis, a fresh heartbeat and a sound store."""

from __future__ import annotations

import inspect
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from controller.api.errors import RETRY_AFTER_S
from controller.api.routes.health import readiness_problem
from controller.api.settings import ApiSettings
from controller.link.redis_link import RedisLink
from controller.policy.load import parse_policy
from controller.store.epoch import EpochStore, Regression, RegressionFlag
from controller.store.liveness import CONTROLLER_MAX_AGE_S, HEARTBEAT_INTERVAL_S
from controller.store.switches import SwitchStore
from tests.api.conftest import bearer

REPO = Path(__file__).resolve().parents[2]
GONE = RegressionFlag("ctl-a", Regression("gone", 5, None), since=1.0)


def test_healthz(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_the_max_age_is_a_few_heartbeats() -> None:
    """One late beat must not make a controller look dead; three missed ones do."""
    assert ApiSettings(redis_url="redis://x").controller_max_age_s == CONTROLLER_MAX_AGE_S
    assert CONTROLLER_MAX_AGE_S == 3 * HEARTBEAT_INTERVAL_S
    beat = inspect.signature(RedisLink).parameters["heartbeat_s"].default
    assert beat == HEARTBEAT_INTERVAL_S


# ---- the reasons, pure ---------------------------------------------------------------------


def test_no_controller_ever() -> None:
    assert readiness_problem([], None, [], 3.0, now=100.0) == (
        "no controller heartbeat in the last 3 s (none recorded)"
    )


def test_no_heartbeat_since() -> None:
    assert readiness_problem([], ("ctl-a", 1_700_000_000.0), [], 3.0, now=1_700_000_012.34) == (
        "no controller heartbeat in the last 3 s: the last was ctl-a's at"
        " 2023-11-14T22:13:20+00:00, 12.3 s ago"
    )


def test_a_live_controllers_flag_is_the_reason() -> None:
    other = RegressionFlag("ctl-b", Regression("older", 7, 2), since=1.0)
    assert readiness_problem(["ctl-a"], None, [GONE], 3.0, now=0) == GONE.message()
    assert readiness_problem(["ctl-a", "ctl-b"], None, [GONE, other], 3.0, now=0) == (
        f"{GONE.message()}; {other.message()}"
    )


def test_a_dead_controllers_flag_does_not_count() -> None:
    assert readiness_problem(["ctl-b"], None, [GONE], 3.0, now=0) is None


# ---- the route -----------------------------------------------------------------------------


def test_readyz_without_a_heartbeat_is_503(client: TestClient) -> None:
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"detail": "no controller heartbeat in the last 3 s (none recorded)"}
    assert response.headers["retry-after"] == str(RETRY_AFTER_S)


def test_readyz_with_a_fresh_heartbeat(client: TestClient, switches: SwitchStore) -> None:
    switches.heartbeat("ctl-b")
    switches.heartbeat("ctl-a", now=time.time() - 2)
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ready", "controllers": ["ctl-a", "ctl-b"]}


def test_readyz_with_a_stale_heartbeat_is_503(client: TestClient, switches: SwitchStore) -> None:
    switches.heartbeat("ctl-1", now=time.time() - 3.5)
    response = client.get("/readyz")
    assert response.status_code == 503
    detail = response.json()["detail"]
    assert detail.startswith("no controller heartbeat in the last 3 s: the last was ctl-1's at ")
    assert detail.endswith(" s ago")
    switches.heartbeat("ctl-1")
    assert client.get("/readyz").status_code == 200


def test_readyz_says_a_controller_found_the_store_behind(
    client: TestClient, switches: SwitchStore, redis_client: redis.Redis
) -> None:
    switches.heartbeat("ctl-a")
    EpochStore(redis_client).flag(GONE)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"detail": GONE.message()}
    EpochStore(redis_client).clear("ctl-a")
    assert client.get("/readyz").status_code == 200


def test_the_api_gives_a_new_store_its_epoch(client: TestClient, redis_client: redis.Redis) -> None:
    assert EpochStore(redis_client).current() is not None


# ---- with a real controller link -------------------------------------------------------------


@pytest.fixture
def link(redis_url: str, document: dict[str, Any]) -> Iterator[RedisLink]:
    """A controller's RedisLink on the test Redis (no switch), following on its own thread."""
    controller = RedisLink(redis_url, "ctl-real", heartbeat_s=0.2, check_s=0.2)
    controller.bootstrap(parse_policy(document), document)
    thread = threading.Thread(target=controller.run, args=(lambda _p, _v: None,))
    thread.start()
    yield controller
    controller.stop()
    thread.join(5)


def wait_status(client: TestClient, status: int, timeout_s: float, detail: str = "") -> Any:
    """The first /readyz answer with ``status`` (and ``detail`` in its body), or the last one."""
    deadline = time.monotonic() + timeout_s
    while True:
        response = client.get("/readyz")
        if response.status_code == status and detail in response.text:
            return response
        if time.monotonic() > deadline:
            return response
        time.sleep(0.05)


def test_readyz_after_redis_lost_its_data(
    client: TestClient, link: RedisLink, redis_client: redis.Redis, document: dict[str, Any]
) -> None:
    assert wait_status(client, 200, 5).status_code == 200
    redis_client.flushall()
    # Right after the flush there is no heartbeat either, until the next beat.
    response = wait_status(client, 503, 5, detail="lost data")
    assert response.status_code == 503
    assert response.json()["detail"] == (
        "controller ctl-real enforces version 1; the store has no active version: the store"
        " lost data; PUT a policy to recover (it gets a version above 1)"
    )
    assert client.get("/v1/policy").status_code == 401  # the tokens went with the data
    client.headers.update(bearer(redis_client))
    assert client.get("/v1/policy").status_code == 404
    written = client.put("/v1/policy", json=document)
    assert written.json()["version"] == 2
    assert wait_status(client, 200, 5).status_code == 200


def test_readyz_turns_503_within_the_max_age_of_a_killed_controller(
    client: TestClient, redis_url: str, document: dict[str, Any]
) -> None:
    """A controller process (default heartbeat) SIGKILLed: no goodbye, its beats just stop."""
    script = (
        "import json, sys\n"
        "from controller.link.redis_link import RedisLink\n"
        "from controller.policy.load import parse_policy\n"
        "document = json.loads(sys.argv[2])\n"
        "link = RedisLink(sys.argv[1], 'doomed')\n"
        "link.bootstrap(parse_policy(document), document)\n"
        "link.run(lambda policy, version: None)\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script, redis_url, json.dumps(document)], cwd=REPO
    )
    try:
        ready = wait_status(client, 200, 15)
        assert ready.status_code == 200, ready.text
        assert ready.json()["controllers"] == ["doomed"]
        time.sleep(2 * HEARTBEAT_INTERVAL_S)  # beating steadily: still ready
        assert client.get("/readyz").status_code == 200
        process.send_signal(signal.SIGKILL)
        process.wait(5)
        killed = time.monotonic()
        response = wait_status(client, 503, 10)
        elapsed = time.monotonic() - killed
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(5)
    assert response.status_code == 503
    assert "the last was doomed's at " in response.json()["detail"]
    assert elapsed <= CONTROLLER_MAX_AGE_S + 0.5
