"""`flowlane controllers`: the instances sharing the store, on a real API, and its rendering."""

from __future__ import annotations

import json

import redis
from typer.testing import CliRunner, Result

from controller.cli.controllers import render_controllers
from controller.cli.main import app
from controller.cli.render import out
from controller.mastership.leases import Leases
from controller.store.switches import SwitchStore

WIDE = {"COLUMNS": "250", "USER": "tester"}


def flat(text: str) -> str:
    return " ".join(text.replace("\u2502", " ").split())


def invoke(runner: CliRunner, api_url: str, *args: str) -> Result:
    result = runner.invoke(app, list(args), env={**WIDE, "FLOWLANE_API": api_url})
    assert "Traceback" not in result.output
    return result


def two_instances(client: redis.Redis) -> None:
    """ctl-a masters switch 1; ctl-b took switch 2 from ctl-c, whose lease is gone."""
    a, b = Leases(client, "ctl-a"), Leases(client, "ctl-b")
    a.renew({1})
    a.take(1)
    b.renew({2})
    record = {"instance": "ctl-c", "generation": 3, "at": 1.0}
    client.hset("flowlane:mastership:owners", f"{2:016x}", json.dumps(record))
    client.set(f"flowlane:mastership:generation:{2:016x}", 3)
    b.take(2)
    SwitchStore(client).heartbeat("ctl-a")


def test_the_table_names_each_instance_what_it_masters_and_its_takeover(
    runner: CliRunner, api_url: str, redis_client: redis.Redis
) -> None:
    two_instances(redis_client)
    result = invoke(runner, api_url, "controllers")
    assert result.exit_code == 0, result.output
    text = flat(result.stdout)
    assert "ctl-a live" in text and "1 (gen 1)" in text
    assert "ctl-b live" in text and "2 (gen 4)" in text
    assert "2 from ctl-c 0s ago" in text
    assert "no live master" not in text


def test_json_is_the_apis_answer(
    runner: CliRunner, api_url: str, redis_client: redis.Redis
) -> None:
    two_instances(redis_client)
    result = invoke(runner, api_url, "controllers", "--json")
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert [c["id"] for c in body["controllers"]] == ["ctl-a", "ctl-b"]
    assert body["controllers"][1]["masters"][0]["taken_from"] == "ctl-c"
    assert body["unmastered"] == []


def test_none_and_an_unmastered_switch_are_said() -> None:
    with out.capture() as captured:
        render_controllers({"controllers": [], "unmastered": []}, 100.0)
    assert "no controller instance" in captured.get()
    dead = {
        "id": "ctl-c",
        "alive": False,
        "registered_at": None,
        "lease_age_s": None,
        "lease_expires_in_s": None,
        "connected": [],
        "masters": [{"dpid": f"{2:016x}", "generation": 3}],
        "last_takeover": {"dpid": f"{5:016x}", "at": 40.0, "previous": "ctl-d", "generation": 2},
    }
    with out.capture() as captured:
        render_controllers({"controllers": [dead], "unmastered": [f"{2:016x}"]}, 100.0)
    text = flat(captured.get())
    assert "ctl-c expired" in text and "5 from ctl-d 1m ago" in text
    assert f"no live master for 1 connected switch(es): {2:016x}" in text


def test_the_api_down_is_said(runner: CliRunner, unused_port: int) -> None:
    result = invoke(runner, f"http://127.0.0.1:{unused_port}", "controllers")
    assert result.exit_code != 0
    assert "cannot reach the flowlane API" in flat(result.output)
