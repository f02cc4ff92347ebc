"""`flowlane jobs add|list|delete` on a real API: output, errors with paths, exit codes."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import uvicorn
from prometheus_client import CollectorRegistry
from typer.testing import CliRunner, Result

from controller.api.app import create_app
from controller.api.settings import ApiSettings
from controller.cli.jobs import endpoint_text, job_document, parse_endpoint, remaining
from controller.cli.main import app
from controller.store.events import EventStore
from controller.store.jobs import JobStore

REPO = Path(__file__).resolve().parents[2]
DEFAULT_POLICY = REPO / "policies" / "default.yaml"
WIDE = {"COLUMNS": "250", "USER": "tester"}


def flat(text: str) -> str:
    return " ".join(text.split())


def invoke(runner: CliRunner, api_url: str, *args: str) -> Result:
    result = runner.invoke(app, list(args), env={**WIDE, "FLOWLANE_API": api_url})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result


@pytest.fixture
def with_policy(runner: CliRunner, api_url: str) -> str:
    """The API, with policies/default.yaml (inference, training, best-effort) active."""
    applied = invoke(runner, api_url, "policy", "apply", str(DEFAULT_POLICY), "--no-wait")
    assert applied.exit_code == 0, applied.output
    return api_url


def add(runner: CliRunner, api_url: str, *extra: str) -> Result:
    return invoke(
        runner,
        api_url,
        "jobs",
        "add",
        "train-1",
        "--class",
        "training",
        "--endpoint",
        "10.0.0.0/24:4791",
        "-e",
        "10.0.1.7",
        *extra,
    )


def test_add_list_delete(runner: CliRunner, with_policy: str, redis_client: redis.Redis) -> None:
    added = add(runner, with_policy, "--ttl", "10m")
    assert added.exit_code == 0, added.output
    assert (
        "registered job train-1: class training, weight 1, 10.0.0.0/24:4791, 10.0.1.7/32;"
        " expires at" in flat(added.stdout)
    )
    assert "(in 9m 5" in added.stdout
    [job] = JobStore(redis_client).all()
    assert (job.name, job.expires_at - job.created_at) == ("train-1", 600.0)

    listed = invoke(runner, with_policy, "jobs", "list")
    assert listed.exit_code == 0
    text = flat(listed.stdout)
    for expected in ("train-1", "training", "10.0.0.0/24:4791", "10.0.1.7/32", "9m 5"):
        assert expected in text, expected

    deleted = invoke(runner, with_policy, "jobs", "delete", "train-1")
    assert (deleted.exit_code, deleted.stdout.strip()) == (0, "deleted job train-1")
    assert JobStore(redis_client).all() == []
    assert invoke(runner, with_policy, "jobs", "list").stdout.strip() == "no live job"
    ops = [e.data["op"] for e in EventStore(redis_client).read() if e.kind == "job"]
    assert ops == ["registered", "deleted"]


def test_add_with_a_weight_and_list_shows_it(
    runner: CliRunner, with_policy: str, redis_client: redis.Redis
) -> None:
    added = add(runner, with_policy, "--weight", "3")
    assert added.exit_code == 0, added.output
    assert "registered job train-1: class training, weight 3," in flat(added.stdout)
    [job] = JobStore(redis_client).all()
    assert job.document["weight"] == 3
    listed = invoke(runner, with_policy, "jobs", "list")
    header, row = (
        line for line in listed.stdout.splitlines() if "weight" in line or "train-1" in line
    )
    # The weight column sits under its header: the table shows 3 for train-1.
    assert row[header.index("weight") :].split("│")[0].strip() == "3"
    as_json = json.loads(invoke(runner, with_policy, "jobs", "list", "--json").stdout)
    assert as_json["jobs"][0]["weight"] == 3


def test_a_bad_weight_names_the_option(
    runner: CliRunner, with_policy: str, redis_client: redis.Redis
) -> None:
    result = add(runner, with_policy, "--weight", "500")
    assert result.exit_code == 1
    stderr = flat(result.stderr)
    assert "invalid job train-1: 1 error(s)" in stderr
    assert "weight: weight 500 is outside 1..100" in stderr
    assert "(--weight)" in stderr
    assert JobStore(redis_client).all() == []


def test_add_json_and_list_json_are_the_api_bodies(runner: CliRunner, with_policy: str) -> None:
    added = add(runner, with_policy, "--json")
    body = json.loads(added.stdout)
    assert body["ttl"] == 3600.0  # the default: an hour
    assert body["endpoints"] == [
        {"ipv4": "10.0.0.0/24", "ports": [4791]},
        {"ipv4": "10.0.1.7/32", "ports": None},
    ]
    listed = json.loads(invoke(runner, with_policy, "jobs", "list", "--json").stdout)
    assert listed == {"jobs": [body]}


def test_an_invalid_job_names_the_endpoint_at_fault(
    runner: CliRunner, with_policy: str, redis_client: redis.Redis
) -> None:
    result = invoke(
        runner,
        with_policy,
        "jobs",
        "add",
        "train-1",
        "--class",
        "training",
        "-e",
        "10.0.0.0/24",
        "-e",
        "10.0.0.1/24:80,70000",
        "--ttl",
        "8d",
    )
    assert result.exit_code == 1
    stderr = flat(result.stderr)
    assert "invalid job train-1: 3 error(s)" in stderr
    assert "endpoints[1].ipv4: not an IPv4 network '10.0.0.1/24'" in stderr
    assert "has host bits set (--endpoint 10.0.0.1/24:80,70000)" in stderr
    assert (
        "endpoints[1].ports: port 70000 out of range (0-65535) (--endpoint 10.0.0.1/24:80,70000)"
        in stderr
    )
    assert "ttl: ttl '8d' is longer than 7 days (168h)" in stderr
    assert result.stdout == ""
    assert JobStore(redis_client).all() == []


def test_an_unknown_class(runner: CliRunner, with_policy: str) -> None:
    result = invoke(runner, with_policy, "jobs", "add", "j", "--class", "bulk", "-e", "10.0.0.1")
    assert result.exit_code == 1
    assert "class: unknown class 'bulk' (classes: inference, training, best-effort)" in flat(
        result.stderr
    )


def test_add_without_a_policy(runner: CliRunner, api_url: str) -> None:
    result = add(runner, api_url)
    assert result.exit_code == 1
    assert "error: no policy stored yet: a job names a class of the active policy" in flat(
        result.stderr
    )


def test_add_needs_a_class_and_an_endpoint(runner: CliRunner, api_url: str) -> None:
    no_class = invoke(runner, api_url, "jobs", "add", "j", "-e", "10.0.0.1")
    assert no_class.exit_code == 2
    assert "Missing option '--class'" in no_class.output
    no_endpoint = invoke(runner, api_url, "jobs", "add", "j", "--class", "training")
    assert no_endpoint.exit_code == 2
    assert "Missing option '--endpoint'" in no_endpoint.output


def test_delete_an_unknown_job(runner: CliRunner, api_url: str) -> None:
    result = invoke(runner, api_url, "jobs", "delete", "nope")
    assert result.exit_code == 1
    assert "error: no job 'nope'" in flat(result.stderr)
    bad = invoke(runner, api_url, "jobs", "delete", "x y")
    assert bad.exit_code == 1
    assert "invalid job x y: 1 error(s) path.name: String should match pattern" in flat(bad.stderr)


COMMANDS = [
    ["jobs", "add", "x", "--class", "training", "-e", "10.0.0.1"],
    ["jobs", "list"],
    ["jobs", "delete", "x"],
    ["flows"],
    ["events"],
    ["events", "--follow"],
]


@pytest.fixture
def down_api_url(unused_port: int, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A real API whose Redis nobody listens on: every route that needs it answers 503 (the
    CLI's token cannot even be checked)."""
    monkeypatch.setenv("FLOWLANE_TOKEN", "flt_unchecked")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    settings = ApiSettings(
        redis_url=f"redis://127.0.0.1:{unused_port}/0", registry=CollectorRegistry()
    )
    server = uvicorn.Server(uvicorn.Config(create_app(settings), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_an_unreachable_api_is_exit_3(runner: CliRunner, unused_port: int, args: list[str]) -> None:
    url = f"http://127.0.0.1:{unused_port}"
    result = invoke(runner, url, *args)
    assert result.exit_code == 3
    assert f"error: cannot reach the flowlane API at {url}:" in flat(result.stderr)
    assert result.stdout == ""


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_redis_down_is_exit_3(runner: CliRunner, down_api_url: str, args: list[str]) -> None:
    result = invoke(runner, down_api_url, *args)
    assert result.exit_code == 3
    assert "error: the API is not ready: Redis unavailable:" in flat(result.stderr)


# --------------------------------------------------------------------------------------------
# the pure parts
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "endpoint"),
    [
        ("10.0.0.0/24", {"ipv4": "10.0.0.0/24"}),
        ("10.0.0.5:4791", {"ipv4": "10.0.0.5", "ports": [4791]}),
        ("10.0.0.5:80, 8000-8010", {"ipv4": "10.0.0.5", "ports": [80, "8000-8010"]}),
        ("10.0.0.5:", {"ipv4": "10.0.0.5", "ports": [""]}),  # the API says what is wrong
    ],
)
def test_parse_endpoint(text: str, endpoint: dict[str, object]) -> None:
    assert parse_endpoint(text) == endpoint


def test_job_document_and_endpoint_text() -> None:
    document = job_document("j", "training", ["10.0.0.0/24:1,2-3"], "30s")
    assert document == {
        "name": "j",
        "class": "training",
        "endpoints": [{"ipv4": "10.0.0.0/24", "ports": [1, "2-3"]}],
        "ttl": "30s",
    }
    assert job_document("j", "training", ["10.0.0.5"], "30s", 4)["weight"] == 4
    assert endpoint_text({"ipv4": "10.0.0.0/24", "ports": [1, "2-3"]}) == "10.0.0.0/24:1,2-3"
    assert endpoint_text({"ipv4": "10.0.0.0/24", "ports": None}) == "10.0.0.0/24"


@pytest.mark.parametrize(
    ("left", "text"),
    [(-1, "expired"), (0, "expired"), (59, "59s"), (3599, "59m 59s"), (3600, "1h"),
     (90061, "1d 1h")],
)  # fmt: skip
def test_remaining(left: float, text: str) -> None:
    now = time.time()
    assert remaining(now + left + 0.5, now) == text
    assert remaining(None, now) == "-"
