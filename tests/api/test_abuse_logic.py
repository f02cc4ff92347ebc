"""The pure parts of the abuse bounds: the failed-token limiter, the refusal summary and the
entry size bound, on an injected clock; the gate's route table; and the audit store's byte cap
on a real Redis."""

from __future__ import annotations

import json
import re

import pytest
import redis

from controller.api.app import create_app
from controller.api.audit import (
    ENTRY_MAX_BYTES,
    OTHERS,
    PATH_MAX_CHARS,
    RefusalSummary,
    bounded,
)
from controller.api.auth import ROLE_KEY, RouteTable
from controller.api.limits import FailureLimiter, client_key, retry_after
from controller.api.settings import ApiSettings
from controller.auth.model import Role
from controller.store.events import EventStore


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# ---- FailureLimiter ---------------------------------------------------------------------------


def test_the_limiter_allows_a_burst_then_its_rate() -> None:
    clock = Clock()
    limiter = FailureLimiter(burst=3, rate=0.5, clock=clock)
    assert [limiter.fail("10.0.0.1") for _ in range(3)] == [None, None, None]
    assert limiter.fail("10.0.0.1") == pytest.approx(2.0)  # one failure per 2 s
    clock.now += 1.0
    assert limiter.fail("10.0.0.1") == pytest.approx(1.0)  # half refilled, and not drained
    clock.now += 1.0
    assert limiter.fail("10.0.0.1") is None
    assert limiter.fail("10.0.0.1") is not None
    # Another address has its own bucket.
    assert limiter.fail("10.0.0.2") is None


def test_a_refused_failure_does_not_push_the_retry_further() -> None:
    clock = Clock()
    limiter = FailureLimiter(burst=1, rate=1.0, clock=clock)
    assert limiter.fail("a") is None
    for _ in range(100):
        assert limiter.fail("a") == pytest.approx(1.0)
    clock.now += 1.0
    assert limiter.fail("a") is None


def test_the_limiter_table_is_bounded() -> None:
    clock = Clock()
    limiter = FailureLimiter(burst=2, rate=1.0, clock=clock, max_tracked=3)
    for host in ("a", "b", "c"):
        assert limiter.fail(host) is None
    # Full of active buckets: a new address shares the overflow bucket.
    assert limiter.fail("d") is None and limiter.fail("e") is None
    assert limiter.fail("f") is not None
    assert limiter.tracked() == 4  # a, b, c and the overflow
    # Refilled buckets are forgotten when room is needed.
    clock.now += 10
    assert limiter.fail("g") is None
    assert limiter.tracked() <= 3


def test_client_keys_group_ipv6_by_64() -> None:
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:bbbb::7")
    assert client_key("2001:db8:1:2::1") == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::1") != client_key("2001:db8:1:2::1")
    assert client_key("127.0.0.1") == "127.0.0.1"
    assert client_key(None) == "unknown"
    assert client_key("testclient") == "testclient"
    assert retry_after(0.2) == "1" and retry_after(1.5) == "2"


def test_limiter_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="burst >= 1 and rate > 0"):
        FailureLimiter(burst=0)


# ---- RefusalSummary ---------------------------------------------------------------------------


def refusal(client: str, status: int = 401, path: str = "/v1/jobs") -> dict[str, object]:
    return {"client": client, "status": status, "path": path, "method": "POST", "token": None}


def test_a_clients_first_refusal_is_written_and_the_rest_summarised() -> None:
    clock = Clock()
    summary = RefusalSummary(clock=clock)
    assert summary.refuse(refusal("a")) is not None
    for status in (401, 401, 404, 429):
        clock.now += 0.1
        assert summary.refuse(refusal("a", status, f"/p{status}")) is None
    assert summary.waiting() == 4
    assert summary.due() == []  # the client's last entry is less than a second old
    clock.now = 1001.0
    [entry] = summary.due()
    assert entry["client"] == "a" and entry["count"] == 4
    assert entry["refusals"] == {"401": 2, "404": 1, "429": 1}
    assert entry["paths"] == ["/p401", "/p404", "/p429"]
    assert entry["since"] == pytest.approx(1000.1)
    assert summary.waiting() == 0
    # Written a second ago: the next refusal waits for the next summary.
    assert summary.refuse(refusal("a")) is None
    clock.now += 1.0
    assert [e["count"] for e in summary.due()] == [1]


def test_at_most_one_entry_per_client_and_second() -> None:
    """A sustained flood from one client: one entry a second, every refusal counted."""
    clock = Clock()
    summary = RefusalSummary(clock=clock)
    written: list[dict[str, object]] = []
    for tick in range(1000):  # 10 s at 100 refusals a second, the flusher every 0.5 s
        clock.now = 1000.0 + tick / 100
        entry = summary.refuse(refusal("a"))
        if entry is not None:
            written.append({**entry, "count": 1})
        if tick % 50 == 0:
            written.extend(summary.due())
    clock.now += 1
    written.extend(summary.due(everything=True))
    assert len(written) <= 11
    assert sum(int(str(e["count"])) for e in written) == 1000


def test_refusal_entries_of_all_clients_are_bounded_per_second() -> None:
    clock = Clock()
    summary = RefusalSummary(clock=clock, entries_per_interval=5, max_clients=50)
    immediate = [summary.refuse(refusal(f"c{i}")) for i in range(100)]
    assert sum(e is not None for e in immediate) == 5
    assert summary.due() == []  # this second's budget is spent
    clock.now += 1
    assert len(summary.due()) == 5  # the next second's, oldest first
    # More clients than the table holds share one summary.
    rest = summary.due(everything=True)
    assert rest[-1]["client"] == OTHERS
    assert sum(int(str(e["count"])) for e in rest) + 5 + 5 == 100


# ---- bounded entries --------------------------------------------------------------------------


def test_a_long_path_is_cut_and_its_length_noted() -> None:
    entry = bounded(refusal("127.0.0.1", 404, "/v1x" + "a" * 60_000))
    assert len(entry["path"]) == PATH_MAX_CHARS and entry["path"].endswith("…")
    assert entry["path_length"] == 60_004
    assert len(json.dumps(entry)) <= ENTRY_MAX_BYTES


@pytest.mark.parametrize(
    "noted",
    [
        {"job": "j" * 5000},
        {"x": ["é" * 400] * 50},
        {f"k{i}": i for i in range(500)},
        {"token": "\u2603" * 10_000, "client": "\u2603" * 10_000},
    ],
)
def test_any_entry_fits(noted: dict[str, object]) -> None:
    entry = bounded({**refusal("127.0.0.1", 409, "/\u2603" * 2000), **noted, "status": 409})
    assert len(json.dumps(entry)) <= ENTRY_MAX_BYTES
    assert entry["status"] == 409


def test_an_ordinary_entry_is_kept_as_it_is() -> None:
    entry = {**refusal("127.0.0.1", 201, "/v1/policy"), "before": 1, "after": 2}
    assert bounded(entry) == entry


def test_the_audit_store_refuses_oversized_entries(redis_client: redis.Redis) -> None:
    """The store's own bound: an entry too large is kept as a marker of its size, so the
    stream's data is at most max_len x max_data_bytes whatever a caller writes."""
    store = EventStore(redis_client, name="audit", max_len=50, max_data_bytes=512)
    for _ in range(500):
        store.append("refused", {"path": "x" * 60_000})
    events = store.read(limit=1000)
    assert events[-1].data == {"truncated": True, "size": len(json.dumps({"path": "x" * 60_000}))}
    assert len(events) <= 150  # trimmed approximately
    usage = redis_client.memory_usage(store.stream)
    assert usage is not None and usage < 150 * 1024, usage


# ---- the gate's route table -------------------------------------------------------------------


def test_the_gate_asks_every_operation_for_the_role_its_document_states() -> None:
    """The gate matches routes itself (before the router reads the body): for every operation
    of the OpenAPI document it must find the role the document states, so a new route can
    neither open up nor lose its body check."""
    app = create_app(ApiSettings(redis_url="redis://127.0.0.1:1/0"))
    table = RouteTable(app.routes)
    for path, methods in app.openapi()["paths"].items():
        for method, operation in methods.items():
            scope = {
                "type": "http",
                "method": method.upper(),
                "path": re.sub(r"\{[^}]+\}", "x", path),
            }
            role, matched = table.role(scope)
            expected = operation[ROLE_KEY]
            assert (role.name if role else "public") == expected, (method, path)
            assert getattr(matched, "path", None) == path
    for public in ("/docs", "/redoc", "/openapi.json", "/docs/assets/swagger-ui.css"):
        assert table.role({"type": "http", "method": "GET", "path": public}) == (None, None)
    for unknown in (("POST", "/v1x"), ("DELETE", "/v1/policy"), ("GET", "/v1/jobs/")):
        role, _ = table.role({"type": "http", "method": unknown[0], "path": unknown[1]})
        assert role is Role.viewer, unknown
