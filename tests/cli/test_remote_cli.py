"""`flowlane policy show|apply|plan|history|rollback` and `flowlane switches`, on a real API."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import redis
import yaml
from typer.testing import CliRunner, Result

from controller.auth.model import Role
from controller.cli.main import app
from controller.fabric.model import Host, Link, PortRef, Topology
from controller.pipeline.desired import FabricInputs
from controller.pipeline.plan import PortState, SwitchInputs
from controller.store.inputs import InputsRecord
from controller.store.policies import PolicyStore
from controller.store.switches import PortReport, SwitchReport, SwitchStore
from controller.store.tokens import TokenStore

REPO = Path(__file__).resolve().parents[2]
DEFAULT_POLICY = REPO / "policies" / "default.yaml"
FIFO_POLICY = REPO / "policies" / "examples" / "fifo.yaml"
WIDE = {"COLUMNS": "250", "USER": "tester"}

BAD_POLICY = """\
classes:
  inference: {priority: 0, dscp: 46, min_rate: 20%}
  training:  {priority: 1, dscp: 26, min_rate: 70%}
default_class: inference
rules:
  - {name: roce, match: {udp_dst: 4791}, class: training}
  - {name: triton, match: {tcp_dst: 70000}, class: inference}
  - {name: ssh, match: {tcp_dst: 22}, class: bulk}
"""


def flat(text: str) -> str:
    """Console output with rich's line wrapping undone."""
    return " ".join(text.split())


def invoke(runner: CliRunner, api_url: str, *args: str, **env: str) -> Result:
    result = runner.invoke(app, list(args), env={**WIDE, "FLOWLANE_API": api_url, **env})
    # Never a traceback: the only exception a command may end with is its exit.
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result


@pytest.fixture
def switches(redis_client: redis.Redis) -> SwitchStore:
    return SwitchStore(redis_client)


def live_switch(switches: SwitchStore, dpid: int, applied: int | None = None) -> SwitchReport:
    switches.heartbeat("ctl-1")
    report = SwitchReport(
        dpid,
        "ctl-1",
        time.time(),
        applied,
        (PortReport("s1-eth1", 1, 10_000_000_000), PortReport("s1-eth2", 2, None)),
        ((0, 0, (), 0x0),),
        "netdev",
    )
    switches.report(report)
    return report


@pytest.fixture
def confirming_switch(redis_client: redis.Redis, switches: SwitchStore) -> Iterator[SwitchReport]:
    """A live switch whose controller confirms every new version 50 ms after it is written."""
    report = live_switch(switches, 0xA)
    pubsub = redis_client.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(PolicyStore(redis_client).channel)
    pubsub.get_message(timeout=1)
    stop = threading.Event()

    def confirm() -> None:
        while not stop.is_set():
            message = pubsub.get_message(timeout=0.05)
            if message is not None:
                stop.wait(0.05)
                version = json.loads(message["data"])["version"]
                switches.heartbeat("ctl-1")
                switches.report(replace(report, applied_version=version))

    thread = threading.Thread(target=confirm, daemon=True)
    thread.start()
    yield report
    stop.set()
    thread.join(timeout=5)
    pubsub.close()


@pytest.fixture
def bad_file(tmp_path: Path) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text(BAD_POLICY, encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------
# apply / show
# --------------------------------------------------------------------------------------------


def test_show_without_a_policy(runner: CliRunner, api_url: str) -> None:
    result = invoke(runner, api_url, "policy", "show")
    assert result.exit_code == 1
    assert "no policy stored yet" in flat(result.stderr)
    assert result.stdout == ""


def test_apply_then_show(runner: CliRunner, api_url: str) -> None:
    applied = invoke(
        runner, api_url, "policy", "apply", str(DEFAULT_POLICY), "--comment", "first", "--no-wait"
    )
    assert applied.exit_code == 0, applied.output
    assert "stored policy version 1 by cli-admin at " in applied.stdout
    assert applied.stdout.splitlines()[0].endswith(": first")
    assert "not waiting for the switches" in applied.stdout

    shown = invoke(runner, api_url, "policy", "show")
    assert shown.exit_code == 0, shown.output
    text = shown.stdout
    assert "policy version 1 by cli-admin" in text
    for expected in ("inference", "training", "best-effort", "rocev2", "udp_dst=4791", "triton"):
        assert expected in text, expected
    assert "no live switch reports an applied version" in text


def test_show_has_every_section_of_the_document(
    runner: CliRunner, api_url: str, tmp_path: Path
) -> None:
    """`policy show` printed classes, rules and ports only: detection, forwarding and tenants
    were left out, so a stored policy could not be read back whole."""
    invoke(runner, api_url, "policy", "apply", str(DEFAULT_POLICY), "--no-wait")
    lines = [line.strip() for line in invoke(runner, api_url, "policy", "show").stdout.splitlines()]
    at = lines.index("detection:")
    assert lines[at + 1 : at + 4] == [
        "interval: 500ms",
        "elephant: {rate: 10%, for: 1s, bytes: 32MiB, class: training}",
        "release_after: 30s",
    ]
    assert "forwarding: normal (the default: each switch forwards on its own, OVS NORMAL)" in lines

    fabric = tmp_path / "fabric.yaml"
    fabric.write_text(
        FIFO_POLICY.read_text(encoding="utf-8") + "\nforwarding: {mode: fabric, placement: null,"
        " discovery: {lldp_interval: 1s, link_timeout: 5s}}\n"
        "tenants: {red: {networks: [10.0.1.0/24, 10.0.2.0/24]}}\n",
        encoding="utf-8",
    )
    applied = invoke(runner, api_url, "policy", "apply", str(fabric), "--no-wait")
    assert applied.exit_code == 0, applied.output
    lines = [line.strip() for line in invoke(runner, api_url, "policy", "show").stdout.splitlines()]
    assert "detection: none (no flow is counted, so no elephant is found or moved)" in lines
    at = lines.index("forwarding:")
    assert lines[at + 1 : at + 4] == [
        "mode: fabric",
        "placement: null",
        "discovery: {lldp_interval: 1s, link_timeout: 5s}",
    ]
    at = lines.index("tenants:")
    assert lines[at + 1] == "red: {networks: [10.0.1.0/24, 10.0.2.0/24]}"


def test_show_json_is_the_api_body(runner: CliRunner, api_url: str) -> None:
    invoke(runner, api_url, "policy", "apply", str(DEFAULT_POLICY), "--no-wait")
    result = invoke(runner, api_url, "policy", "show", "--json")
    assert result.exit_code == 0
    body = json.loads(result.stdout)
    assert body["version"] == 1
    assert body["author"] == "cli-admin"
    assert body["policy"]["default_class"] == "inference"


def test_the_author_is_the_token_whoever_runs_the_cli(
    runner: CliRunner, api_url: str, redis_client: redis.Redis
) -> None:
    invoke(runner, api_url, "policy", "apply", str(DEFAULT_POLICY), "--no-wait", USER="alice")
    _, bob = TokenStore(redis_client).create("bob", Role.admin)
    isolation = str(REPO / "policies" / "examples" / "isolation.yaml")  # not the active one
    invoke(runner, api_url, "--token", bob, "policy", "apply", isolation, "--no-wait")
    versions = json.loads(invoke(runner, api_url, "policy", "history", "--json").stdout)
    assert [v["author"] for v in versions["versions"]] == ["bob", "cli-admin"]


def test_apply_an_invalid_policy_lists_every_error_and_stores_nothing(
    runner: CliRunner, api_url: str, bad_file: Path, redis_client: redis.Redis
) -> None:
    result = invoke(runner, api_url, "policy", "apply", str(bad_file))
    assert result.exit_code == 1
    stderr = flat(result.stderr)
    assert f"invalid policy {bad_file}: 2 error(s)" in stderr  # structure and references
    assert "rules[1].match.tcp_dst: port 70000 out of range (0-65535)" in stderr
    assert "rules[2].class: unknown class 'bulk'" in stderr
    assert result.stdout == ""
    assert PolicyStore(redis_client).active_version() is None


def test_apply_invalid_json_output(runner: CliRunner, api_url: str, bad_file: Path) -> None:
    result = invoke(runner, api_url, "policy", "apply", str(bad_file), "--json")
    assert result.exit_code == 1
    body = json.loads(result.stdout)
    assert [e["path"] for e in body["errors"]] == ["rules[1].match.tcp_dst", "rules[2].class"]


def test_apply_a_semantically_invalid_policy(
    runner: CliRunner, api_url: str, bad_file: Path
) -> None:
    bad_file.write_text(BAD_POLICY.replace("70000", "8000"), encoding="utf-8")
    result = invoke(runner, api_url, "policy", "apply", str(bad_file))
    assert result.exit_code == 1
    assert "rules[2].class: unknown class 'bulk' (classes: inference, training)" in flat(
        result.stderr
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "(file): cannot read: No such file or directory"),
        ("classes:\n  a: {priority: 1\n", "line 3, column 1: invalid YAML"),
        (b"\xff\xfeclasses", "(file): not UTF-8 text (byte 0)"),
    ],
)
def test_apply_an_unreadable_file(
    runner: CliRunner, api_url: str, tmp_path: Path, content: str | bytes | None, message: str
) -> None:
    path = tmp_path / "policy.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content, encoding="utf-8")
    result = invoke(runner, api_url, "policy", "apply", str(path))
    assert result.exit_code == 1
    assert message in flat(result.stderr)


def test_an_empty_file_is_reported_by_the_api(
    runner: CliRunner, api_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing yet\n", encoding="utf-8")
    result = invoke(runner, api_url, "policy", "apply", str(path))
    assert result.exit_code == 1
    assert "(document): a policy is a mapping of sections, got empty" in flat(result.stderr)


def test_if_match_conflict(runner: CliRunner, api_url: str) -> None:
    invoke(runner, api_url, "policy", "apply", str(DEFAULT_POLICY), "--no-wait")
    invoke(runner, api_url, "policy", "apply", str(FIFO_POLICY), "--no-wait")
    result = invoke(
        runner, api_url, "policy", "apply", str(DEFAULT_POLICY), "--no-wait", "--if-match", "1"
    )
    assert result.exit_code == 1
    assert (
        "conflict: you expected version 1, but the active version is 2;"
        " re-read it (flowlane policy show), then --if-match 2"
    ) in flat(result.stderr)
    ok = invoke(
        runner, api_url, "policy", "apply", str(DEFAULT_POLICY), "--no-wait", "--if-match", "2"
    )
    assert ok.exit_code == 0, ok.output
    assert "stored policy version 3" in ok.stdout


# --------------------------------------------------------------------------------------------
# waiting for the switches
# --------------------------------------------------------------------------------------------


def test_apply_waits_for_the_switches(
    runner: CliRunner, api_url: str, confirming_switch: SwitchReport
) -> None:
    result = invoke(runner, api_url, "policy", "apply", str(DEFAULT_POLICY))
    assert result.exit_code == 0, result.output
    assert "applied on 1 switch(es): 000000000000000a" in result.stdout


def test_apply_timeout_names_the_pending_switch(
    runner: CliRunner, api_url: str, switches: SwitchStore
) -> None:
    live_switch(switches, 0xB)
    result = invoke(runner, api_url, "policy", "apply", str(DEFAULT_POLICY), "--timeout", "0.3")
    assert result.exit_code == 4
    assert (
        "version 1 is stored and active, but 1 of 1 live switch(es) did not confirm it within"
        " 0.3 s; not confirmed by: 000000000000000b"
    ) in flat(result.stderr)


def test_a_timeout_above_the_api_maximum_is_refused_clearly(
    runner: CliRunner, api_url: str
) -> None:
    result = invoke(runner, api_url, "policy", "apply", str(DEFAULT_POLICY), "--timeout", "1000")
    assert result.exit_code == 1
    assert "query.timeout: Input should be less than or equal to 120" in flat(result.stderr)


# --------------------------------------------------------------------------------------------
# plan
# --------------------------------------------------------------------------------------------


def test_plan_without_switches(runner: CliRunner, api_url: str) -> None:
    result = invoke(runner, api_url, "policy", "plan", str(DEFAULT_POLICY))
    assert result.exit_code == 0
    assert "valid; no live switch, so nothing would change now" in result.stdout


def test_plan_shows_flow_and_queue_changes(
    runner: CliRunner, api_url: str, switches: SwitchStore, redis_client: redis.Redis
) -> None:
    live_switch(switches, 0x1)
    result = invoke(runner, api_url, "policy", "plan", str(FIFO_POLICY))
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "0000000000000001" in text
    assert "changes" in text
    assert "+ table=2 priority=0 actions=NORMAL cookie=0xf103" in text
    assert "- table=0 priority=0 cookie=0x0" in text
    assert "port s1-eth1 (1): rate - -> " in text
    assert "+ queue 0 (" in text
    assert PolicyStore(redis_client).active_version() is None


def test_validate_and_plan_say_what_their_entry_counts_count(
    runner: CliRunner, api_url: str, switches: SwitchStore
) -> None:
    """validate printed 53 entries, plan 40, for one file: validate counts every entry a switch
    holds, plan the rules' part alone (an upper bound); each now says so, and the totals meet
    on a live switch."""
    validated = invoke(runner, api_url, "policy", "validate", str(DEFAULT_POLICY))
    assert validated.exit_code == 0, validated.output
    text = flat(validated.stdout)
    assert (
        "53 OpenFlow entries per switch: 38 for the rules, 1 for the default class,"
        " 4 for detection (flow counting), 9 for DSCP marking (3 per class), 1 for forwarding."
    ) in text
    assert 38 + 1 + 4 + 9 + 1 == 53
    assert "`policy plan` counts the rules' entries alone, as an upper bound: 40" in text

    live_switch(switches, 0x1)
    planned = invoke(runner, api_url, "policy", "plan", str(DEFAULT_POLICY))
    assert planned.exit_code == 0, planned.output
    text = flat(planned.stdout)
    assert "rules: at most 40 classification entries per switch (limit 65536;" in text
    assert "besides the default-class, detection, marking and forwarding entries" in text
    # An empty switch gets every entry validate counted.
    assert "+53 ~0 -1 =0" in text


def test_plan_counts_groups_and_meters_and_notes_unknown_inputs(
    runner: CliRunner, api_url: str, switches: SwitchStore, tmp_path: Path
) -> None:
    """A fabric leaf with two uplinks toward a host gets a select group over both and the
    punt meter; a switch whose controller published no inputs is named with the reason."""
    document = yaml.safe_load(FIFO_POLICY.read_text())
    document["forwarding"] = "fabric"
    policy_file = tmp_path / "fabric.yaml"
    policy_file.write_text(yaml.safe_dump(document))
    links = [(PortRef(1, 1), PortRef(2, 1)), (PortRef(1, 2), PortRef(3, 1))]
    links += [(PortRef(2, 2), PortRef(4, 1)), (PortRef(3, 2), PortRef(4, 2))]
    topology = Topology(
        switches=frozenset({1, 2, 3, 4}),
        links=frozenset(Link(a, b) for x, y in links for a, b in ((x, y), (y, x))),
        hosts=(Host(0xB, PortRef(4, 3), 0x0A000002),),
    )
    report = live_switch(switches, 0x1)
    inputs = SwitchInputs(
        1,
        (PortState(1, "s1-eth1", 10_000_000_000), PortState(2, "s1-eth2", None)),
        fabric=FabricInputs(topology, frozenset()),
    )
    switches.report(replace(report, inputs=InputsRecord.of(inputs)))
    live_switch(switches, 0x2)  # no inputs: an older controller's report
    result = invoke(runner, api_url, "policy", "plan", str(policy_file))
    assert result.exit_code == 0, result.output
    text = flat(result.stdout)
    assert "groups" in text and "meters" in text
    # switch 1: one group and one meter to add; switch 2 (a switch alone): the meter only
    assert "│ +1 ~0 -0 =0 │ +1 ~0 =0 │" in text
    assert "│ +0 ~0 -0 =0 │ +1 ~0 =0 │" in text
    assert "+ group_id=0x" in text and "type=select bucket=watch_port:1,actions=output:1" in text
    assert "+ meter=1 pktps bands=type=drop rate=1000 burst_size=100" in text
    assert (
        "note: switch 0000000000000002: this switch's controller published no plan inputs" in text
    )


def test_plan_json(runner: CliRunner, api_url: str, switches: SwitchStore) -> None:
    live_switch(switches, 0x1)
    result = invoke(runner, api_url, "policy", "plan", str(FIFO_POLICY), "--json")
    body = json.loads(result.stdout)
    [switch] = body["switches"]
    assert switch["flows"]["removed"] == ["table=0 priority=0 cookie=0x0"]


def test_plan_an_invalid_policy(runner: CliRunner, api_url: str, bad_file: Path) -> None:
    result = invoke(runner, api_url, "policy", "plan", str(bad_file))
    assert result.exit_code == 1
    assert "rules[1].match.tcp_dst: port 70000 out of range" in flat(result.stderr)


# --------------------------------------------------------------------------------------------
# history / rollback
# --------------------------------------------------------------------------------------------


def test_history_and_rollback(runner: CliRunner, api_url: str) -> None:
    assert "no policy stored yet" in invoke(runner, api_url, "policy", "history").stdout
    # No live switch here: --store-only (tests/cli/test_policy_cli.py tests waiting without one).
    invoke(
        runner, api_url, "policy", "apply", str(DEFAULT_POLICY), "--comment", "one", "--store-only"
    )
    invoke(runner, api_url, "policy", "apply", str(FIFO_POLICY), "--comment", "two", "--store-only")

    rolled = invoke(runner, api_url, "policy", "rollback", "1", "--store-only")
    assert rolled.exit_code == 0, rolled.output
    assert "stored policy version 3 by cli-admin" in rolled.stdout
    # The store's default comment of a rollback says what the note says: printed once.
    assert "a rollback to version 1" in rolled.stdout
    assert "rollback to version 1: rollback to version 1" not in rolled.stdout
    why = invoke(
        runner, api_url, "policy", "rollback", "2", "--comment", "bad rule", "--store-only"
    )
    assert "a rollback to version 2: bad rule" in why.stdout

    history = invoke(runner, api_url, "policy", "history")
    assert history.exit_code == 0
    rows = [line for line in history.stdout.splitlines() if "cli-admin" in line]
    assert len(rows) == 4
    assert "active" in rows[0] and "rollback to 2" in rows[0]
    assert "rollback to 1" in rows[1]
    assert " one " in rows[3]

    limited = json.loads(
        invoke(runner, api_url, "policy", "history", "--limit", "1", "--json").stdout
    )
    assert [v["version"] for v in limited["versions"]] == [4]


def test_rollback_to_an_unknown_version(runner: CliRunner, api_url: str) -> None:
    invoke(runner, api_url, "policy", "apply", str(DEFAULT_POLICY), "--store-only")
    result = invoke(runner, api_url, "policy", "rollback", "9")
    assert result.exit_code == 1
    assert "error: no policy version 9" in flat(result.stderr)


def test_rollback_if_match(runner: CliRunner, api_url: str) -> None:
    invoke(runner, api_url, "policy", "apply", str(DEFAULT_POLICY), "--store-only")
    invoke(runner, api_url, "policy", "apply", str(FIFO_POLICY), "--store-only")
    result = invoke(runner, api_url, "policy", "rollback", "1", "--if-match", "1", "--store-only")
    assert result.exit_code == 1
    assert "the active version is 2" in flat(result.stderr)


# --------------------------------------------------------------------------------------------
# switches
# --------------------------------------------------------------------------------------------


def test_switches(runner: CliRunner, api_url: str, switches: SwitchStore) -> None:
    assert "no live switch" in invoke(runner, api_url, "switches").stdout
    invoke(runner, api_url, "policy", "apply", str(DEFAULT_POLICY), "--no-wait")
    live_switch(switches, 0x2A, applied=1)
    result = invoke(runner, api_url, "switches")
    assert result.exit_code == 0
    text = result.stdout
    assert "000000000000002a" in text
    assert "ctl-1" in text and "netdev" in text
    assert "s1-eth1" in text and "10Gbit" in text
    body = json.loads(invoke(runner, api_url, "switches", "--json").stdout)
    assert body["switches"][0]["applied_version"] == 1


# --------------------------------------------------------------------------------------------
# the API out of reach
# --------------------------------------------------------------------------------------------

COMMANDS = [
    ["policy", "show"],
    ["policy", "apply", str(DEFAULT_POLICY)],
    ["policy", "plan", str(DEFAULT_POLICY)],
    ["policy", "history"],
    ["policy", "rollback", "1"],
    ["switches"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_connection_refused_is_a_clear_error(
    runner: CliRunner, unused_port: int, args: list[str]
) -> None:
    url = f"http://127.0.0.1:{unused_port}"
    result = invoke(runner, url, *args)
    assert result.exit_code == 3
    stderr = flat(result.stderr)
    assert f"error: cannot reach the flowlane API at {url}:" in stderr
    assert "flowlane api" in stderr
    assert result.stdout == ""


def test_the_api_option_beats_the_environment(
    runner: CliRunner, api_url: str, unused_port: int
) -> None:
    result = runner.invoke(
        app,
        ["policy", "history", "--api", api_url],
        env={**WIDE, "FLOWLANE_API": f"http://127.0.0.1:{unused_port}"},
    )
    assert result.exit_code == 0, result.output


def test_a_malformed_api_url(runner: CliRunner) -> None:
    result = invoke(runner, "not a url", "policy", "show")
    assert result.exit_code == 3
    assert "cannot reach the flowlane API at not a url" in flat(result.stderr)
