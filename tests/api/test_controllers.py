"""GET /v1/controllers: instances, leases, the switches each masters, takeovers, from the
mastership keys two instances wrote in a real Redis (with the controllers' own scripts)."""

from __future__ import annotations

import json
import time

import redis
from fastapi.testclient import TestClient

from controller.auth.model import Role
from controller.mastership.leases import Leases
from controller.store.switches import SwitchStore
from tests.api.conftest import bearer


def hexed(dpid: int) -> str:
    return f"{dpid:016x}"


def test_no_controller(client: TestClient) -> None:
    response = client.get("/v1/controllers")
    assert response.status_code == 200
    assert response.json() == {"controllers": [], "unmastered": []}


def test_two_instances_a_dead_one_and_a_takeover(
    client: TestClient, redis_client: redis.Redis, switches: SwitchStore
) -> None:
    a = Leases(redis_client, "ctl-a", ttl_s=3.0)
    b = Leases(redis_client, "ctl-b", ttl_s=3.0)
    a.renew({1, 2})
    assert a.take(1).generation == 1 and a.take(2).generation == 1
    b.renew({2, 3})
    # ctl-c died owning switch 3: its owner record is left, its lease gone.
    record = {"instance": "ctl-c", "generation": 4, "at": 1000.0}
    redis_client.hset("flowlane:mastership:owners", hexed(3), json.dumps(record))
    redis_client.incrby(f"flowlane:mastership:generation:{hexed(3)}", 4)
    switches.heartbeat("ctl-a")
    switches.heartbeat("ctl-b")

    body = client.get("/v1/controllers").json()
    assert [c["id"] for c in body["controllers"]] == ["ctl-a", "ctl-b", "ctl-c"]
    ctl_a, ctl_b, ctl_c = body["controllers"]
    assert ctl_a["alive"] and ctl_a["connected"] == [hexed(1), hexed(2)]
    assert [(m["dpid"], m["generation"], m["taken_from"]) for m in ctl_a["masters"]] == [
        (hexed(1), 1, None),
        (hexed(2), 1, None),
    ]
    assert 0 < ctl_a["lease_expires_in_s"] <= 3.0
    assert 0 <= ctl_a["lease_age_s"] < 5 and 0 <= ctl_a["heartbeat_age_s"] < 5
    assert abs(ctl_a["registered_at"] - time.time()) < 5
    assert ctl_a["last_takeover"] is None
    assert ctl_b["alive"] and ctl_b["masters"] == []
    assert not ctl_c["alive"] and ctl_c["lease_expires_in_s"] is None
    assert ctl_c["heartbeat_age_s"] is None and ctl_c["lease_age_s"] is None
    assert [m["dpid"] for m in ctl_c["masters"]] == [hexed(3)]
    assert body["unmastered"] == [hexed(3)]  # b is connected to it; its owner is dead

    taken = b.take(3)
    assert (taken.generation, taken.previous) == (5, "ctl-c")
    body = client.get("/v1/controllers").json()
    ctl_b = body["controllers"][1]
    assert [(m["dpid"], m["generation"], m["taken_from"]) for m in ctl_b["masters"]] == [
        (hexed(3), 5, "ctl-c")
    ]
    takeover = ctl_b["last_takeover"]
    assert (takeover["dpid"], takeover["previous"], takeover["generation"]) == (
        hexed(3),
        "ctl-c",
        5,
    )
    assert [c["id"] for c in body["controllers"]] == ["ctl-a", "ctl-b"]  # c named by nothing
    assert body["unmastered"] == []


def test_a_resigned_instance_masters_nothing_and_a_viewer_may_read(
    client: TestClient, redis_client: redis.Redis
) -> None:
    a = Leases(redis_client, "ctl-a")
    a.renew({1})
    a.take(1)
    a.resign()
    viewer = bearer(redis_client, Role.viewer, tenant="blue")
    response = client.get("/v1/controllers", headers=viewer)
    assert response.status_code == 200
    assert response.json() == {"controllers": [], "unmastered": []}
    assert "token" not in response.text
