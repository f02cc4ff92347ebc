"""Every invalid input is a 422 with every error at its exact path, and nothing is stored."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from controller.store.policies import PolicyStore

POLICY_ROUTES = [("PUT", "/v1/policy"), ("POST", "/v1/policy/plan")]


@pytest.fixture(autouse=True)
def nothing_stored(redis_client: redis.Redis) -> Iterator[None]:
    """Every test here sends only invalid requests: Redis must hold no policy key after it."""
    yield
    assert redis_client.keys("flowlane:policy:*") == []


def errors_of(response: Any) -> list[tuple[str, str]]:
    assert response.status_code == 422, response.text
    body = response.json()
    assert set(body) == {"detail", "errors"}
    assert body["detail"].endswith(f": {len(body['errors'])} error(s)")
    return [(e["path"], e["message"]) for e in body["errors"]]


@pytest.mark.parametrize(("method", "path"), POLICY_ROUTES)
def test_policy_errors_carry_their_paths(
    client: TestClient, document: dict[str, Any], method: str, path: str
) -> None:
    document["classes"]["training"]["dscp"] = 64
    document["rules"][1]["match"]["tcp_dst"] = [8000, 70000]
    document["rules"][2]["class"] = "bulk"
    document["ports"]["overrides"]["s1-eth4"] = "10mbps"
    response = client.request(method, path, json=document)
    errors = errors_of(response)
    assert response.json()["detail"] == "invalid policy: 4 error(s)"
    assert errors == [
        ("classes.training.dscp", "Input should be less than or equal to 63"),
        ("rules[1].match.tcp_dst", "port 70000 out of range (0-65535)"),
        (
            "ports.overrides.s1-eth4",
            "unknown rate unit 'mbps' in '10mbps': use bit, Kbit, Mbit or Gbit",
        ),
        ("rules[2].class", "unknown class 'bulk' (classes: inference, training, best-effort)"),
    ]


@pytest.mark.parametrize(("method", "path"), POLICY_ROUTES)
def test_structural_and_cross_field_errors_in_one_answer(
    client: TestClient, document: dict[str, Any], method: str, path: str
) -> None:
    """One 422 lists what used to take four round trips: the structural error first."""
    document["rules"][0]["match"]["udp_dst"] = 70000
    document["rules"][2]["class"] = "besteffort"
    document["classes"]["best-effort"]["dscp"] = 46
    document["classes"]["best-effort"]["min_rate"] = "30%"
    document["classes"]["inference"]["min_rte"] = "5%"
    response = client.request(method, path, json=document)
    assert errors_of(response) == [
        ("classes.inference.min_rte", "unknown field 'min_rte' (did you mean 'min_rate'?)"),
        ("rules[0].match.udp_dst", "port 70000 out of range (0-65535)"),
        (
            "rules[2].class",
            "unknown class 'besteffort' (classes: inference, training, best-effort)",
        ),
        (
            "classes.best-effort.dscp",
            "DSCP 46 is already used by class 'inference'; each class needs its own DSCP to get"
            " its own queue",
        ),
        ("classes", "min_rate shares add up to 120%, more than 100% of the port rate"),
    ]
    assert response.json()["detail"] == "invalid policy: 5 error(s)"


def test_semantic_errors_of_a_structurally_valid_policy(
    client: TestClient, document: dict[str, Any]
) -> None:
    document["rules"][2]["class"] = "bulk"
    document["default_class"] = "inferenc"
    document["classes"]["training"]["dscp"] = 46
    assert errors_of(client.put("/v1/policy", json=document)) == [
        (
            "default_class",
            "unknown class 'inferenc' (classes: inference, training, best-effort)",
        ),
        ("rules[2].class", "unknown class 'bulk' (classes: inference, training, best-effort)"),
        (
            "classes.training.dscp",
            "DSCP 46 is already used by class 'inference'; each class needs its own DSCP to get"
            " its own queue",
        ),
    ]


def test_match_level_errors_point_at_the_match(
    client: TestClient, document: dict[str, Any]
) -> None:
    document["rules"][0]["match"] = {"ip_proto": "tcp", "udp_dst": 4791}
    document["rules"][1]["match"]["bogus"] = 1
    assert errors_of(client.put("/v1/policy", json=document)) == [
        ("rules[0].match", "udp_src/udp_dst need ip_proto udp, got ip_proto 6"),
        (
            "rules[1].match.bogus",
            "unknown field 'bogus' (fields: in_port, eth_type, vlan_vid,"
            " ip_proto, ip_dscp, ipv4_src, ipv4_dst, tcp_src, tcp_dst, udp_src, udp_dst)",
        ),
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "empty body: send the policy document as JSON"),
        (b"  \n", "empty body: send the policy document as JSON"),
        (b"{", "invalid JSON: Expecting property name enclosed in double quotes"),
        (b'{"classes": NaN}', "invalid JSON: NaN is not valid JSON"),
        (b'{"a": Infinity}', "invalid JSON: Infinity is not valid JSON"),
        (b"\xff\xfe{}", "invalid JSON: "),
        (b'{"in_port": "\\ud800"}', "invalid JSON: a \\u escape is a lone surrogate"),
        (b"[" * 100_000 + b"]" * 100_000, "invalid JSON: nested too deeply"),
        (b"[]", "a policy is a mapping of sections, got list"),
        (b"null", "a policy is a mapping of sections, got empty"),
        (b'"classes"', "a policy is a mapping of sections, got str"),
        (b"42", "a policy is a mapping of sections, got int"),
    ],
)
@pytest.mark.parametrize(("method", "path"), POLICY_ROUTES)
def test_bodies_that_are_not_a_document(
    client: TestClient, method: str, path: str, body: bytes, message: str
) -> None:
    response = client.request(
        method, path, content=body, headers={"Content-Type": "application/json"}
    )
    [(error_path, error_message)] = errors_of(response)
    assert error_path == "(document)"
    assert error_message.startswith(message), error_message


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"version": 1, "\\udc00": 2}', "invalid JSON: a \\u escape is a lone surrogate"),
        (b"\xff\xfe\x00r", "invalid JSON: "),  # FastAPI alone would answer 400 here
        (b"", "empty body: send a JSON document"),
        (b'{"version": NaN}', "invalid JSON: NaN is not valid JSON"),
    ],
)
def test_rollback_bodies_that_are_not_json(client: TestClient, body: bytes, message: str) -> None:
    response = client.post(
        "/v1/policy/rollback", content=body, headers={"Content-Type": "application/json"}
    )
    [(path, error)] = errors_of(response)
    assert response.json()["detail"] == "invalid request body: 1 error(s)"
    assert path == "(document)"
    assert error.startswith(message), error


@pytest.mark.parametrize(
    ("query", "path", "message"),
    [
        ("wait=applied&timeout=0", "query.timeout", "Input should be greater than 0"),
        ("wait=applied&timeout=-1", "query.timeout", "Input should be greater than 0"),
        ("wait=applied&timeout=121", "query.timeout", "Input should be less than or equal to 120"),
        ("wait=applied&timeout=nan", "query.timeout", "Input should be less than or equal to 120"),
        (
            "wait=applied&timeout=soon",
            "query.timeout",
            "Input should be a valid number, unable to parse string as a number",
        ),
        ("wait=always", "query.wait", "Input should be 'applied'"),
        ("author=root", "query.author", "the author is the name of the request's token"),
    ],
)
def test_bad_query_parameters(
    client: TestClient, document: dict[str, Any], query: str, path: str, message: str
) -> None:
    response = client.put(f"/v1/policy?{query}", json=document)
    assert errors_of(response) == [(path, message)]
    assert response.json()["detail"] == "invalid request: 1 error(s)"


@pytest.mark.parametrize("if_match", ['W/"1"', '"1', "0", "-1", "one", '"1", "2"', " "])
def test_malformed_if_match(client: TestClient, document: dict[str, Any], if_match: str) -> None:
    response = client.put("/v1/policy", json=document, headers={"If-Match": if_match})
    [(path, message)] = errors_of(response)
    assert path == "header.if-match"
    assert message.startswith("String should match pattern")


def test_if_match_and_if_none_match_together(client: TestClient, document: dict[str, Any]) -> None:
    response = client.put(
        "/v1/policy", json=document, headers={"If-Match": '"1"', "If-None-Match": "*"}
    )
    assert errors_of(response) == [
        ("header.if-none-match", "send If-Match or If-None-Match, not both")
    ]


def test_a_bad_query_and_a_bad_body_report_the_query(
    client: TestClient, document: dict[str, Any]
) -> None:
    """FastAPI checks parameters before the route reads its body; either way, nothing stored."""
    document["default_class"] = 3
    assert errors_of(client.put("/v1/policy?timeout=0&wait=applied", json=document)) == [
        ("query.timeout", "Input should be greater than 0")
    ]


@pytest.mark.parametrize(
    ("limit", "message"),
    [
        ("0", "Input should be greater than or equal to 1"),
        ("501", "Input should be less than or equal to 500"),
        ("ten", "Input should be a valid integer, unable to parse string as an integer"),
    ],
)
def test_bad_history_limit(client: TestClient, limit: str, message: str) -> None:
    assert errors_of(client.get(f"/v1/policy/history?limit={limit}")) == [("query.limit", message)]


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        ({}, [("version", "Field required")]),
        ({"version": 0}, [("version", "Input should be greater than or equal to 1")]),
        (
            {"version": "two"},
            [("version", "Input should be a valid integer, unable to parse string as an integer")],
        ),
        ({"version": 1, "why": "x"}, [("why", "unknown field 'why' (fields: version)")]),
        (
            {"verison": 2},
            [
                ("version", "Field required"),
                ("verison", "unknown field 'verison' (did you mean 'version'?)"),
            ],
        ),
        (
            [],
            [("(document)", "Input should be a valid dictionary or instance of RollbackIn")],
        ),
    ],
)
def test_bad_rollback_bodies(client: TestClient, body: Any, errors: list[tuple[str, str]]) -> None:
    assert errors_of(client.post("/v1/policy/rollback", json=body)) == errors


def test_rollback_body_that_is_not_json(client: TestClient) -> None:
    response = client.post(
        "/v1/policy/rollback", content=b"{", headers={"Content-Type": "application/json"}
    )
    [(path, message)] = errors_of(response)
    assert path == "(document)"
    assert message.startswith("invalid JSON: Expecting property name enclosed in double quotes")


def test_an_invalid_put_leaves_the_active_version_alone(
    client: TestClient, document: dict[str, Any], policies: PolicyStore, redis_client: redis.Redis
) -> None:
    # This test stores a policy on purpose; the autouse check is for the others.
    client.put("/v1/policy", json=document)
    before = {k: redis_client.dump(k) for k in redis_client.keys("flowlane:policy:*")}
    document["classes"] = {}
    errors_of(client.put("/v1/policy", json=document, headers={"If-Match": '"1"'}))
    assert {k: redis_client.dump(k) for k in redis_client.keys("flowlane:policy:*")} == before
    assert policies.active_version() == 1
    redis_client.flushdb()
