"""The OpenAPI schema: served at /openapi.json and /docs, and true to the policy documents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
import yaml
from fastapi.testclient import TestClient

POLICIES = Path(__file__).resolve().parents[2] / "policies"


@pytest.fixture
def openapi(client: TestClient) -> dict[str, Any]:
    response = client.get("/openapi.json")
    assert response.status_code == 200
    schema: dict[str, Any] = response.json()
    return schema


def policy_validator(openapi: dict[str, Any]) -> Any:
    """A validator of the ``Policy`` component, resolving refs within the whole schema."""
    root = {**openapi, "$ref": "#/components/schemas/Policy"}
    return jsonschema_rs.Draft202012Validator(root)


def test_docs_page(client: TestClient) -> None:
    response = client.get("/docs")
    assert response.status_code == 200
    assert "swagger" in response.text.lower()


def test_every_route_is_documented(openapi: dict[str, Any]) -> None:
    assert {path: sorted(ops) for path, ops in openapi["paths"].items()} == {
        "/healthz": ["get"],
        "/readyz": ["get"],
        "/v1/policy": ["get", "put"],
        "/v1/policy/plan": ["post"],
        "/v1/policy/history": ["get"],
        "/v1/policy/rollback": ["post"],
        "/v1/switches": ["get"],
        "/v1/switches/{dpid}/queues": ["get"],
        "/v1/controllers": ["get"],
        "/v1/jobs": ["get", "post"],
        "/v1/jobs/{name}": ["delete", "get"],
        "/v1/flows": ["get"],
        "/v1/events": ["get"],
        "/v1/topology": ["get"],
        "/v1/paths": ["get"],
        "/metrics": ["get"],
        "/v1/tokens": ["get", "post"],
        "/v1/tokens/{name}": ["delete"],
        "/v1/audit": ["get"],
    }


def test_policy_bodies_reference_the_policy_schema(openapi: dict[str, Any]) -> None:
    for path, method in (("/v1/policy", "put"), ("/v1/policy/plan", "post")):
        body = openapi["paths"][path][method]["requestBody"]
        assert body["required"] is True
        assert body["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/Policy"
        }
    for name in ("Policy", "TrafficClass", "Rule", "MatchSpec", "PortRates"):
        assert name in openapi["components"]["schemas"]


def test_write_statuses_are_documented(openapi: dict[str, Any]) -> None:
    put = openapi["paths"]["/v1/policy"]["put"]
    assert sorted(put["responses"]) == [
        "200",
        "201",
        "401",
        "403",
        "409",
        "412",
        "422",
        "503",
        "504",
    ]
    assert "ETag" in put["responses"]["200"]["headers"]
    assert "ETag" in put["responses"]["201"]["headers"]
    rollback = openapi["paths"]["/v1/policy/rollback"]["post"]
    assert sorted(rollback["responses"]) == [
        "200",
        "201",
        "401",
        "403",
        "404",
        "409",
        "412",
        "422",
        "503",
        "504",
    ]
    assert put["responses"]["422"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ValidationErrorOut"
    }


def test_wait_timeout_limits_are_in_the_schema(openapi: dict[str, Any]) -> None:
    [timeout] = [
        p for p in openapi["paths"]["/v1/policy"]["put"]["parameters"] if p["name"] == "timeout"
    ]
    assert timeout["in"] == "query"
    bounded = next(s for s in timeout["schema"]["anyOf"] if s.get("type") == "number")
    assert (bounded["exclusiveMinimum"], bounded["maximum"]) == (0, 120)


@pytest.mark.parametrize(
    "path", sorted(POLICIES.rglob("*.yaml")), ids=lambda p: str(p.relative_to(POLICIES))
)
def test_shipped_policies_conform_to_the_documented_schema(
    openapi: dict[str, Any], path: Path
) -> None:
    """The schema must not be stricter than the documents operators really write."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    errors = [str(e) for e in policy_validator(openapi).iter_errors(document)]
    assert errors == []


@pytest.mark.parametrize(
    "match",
    [
        {"tcp_dst": 8000},
        {"tcp_dst": "8000-8010"},
        {"tcp_dst": [8000, "9000-9010"]},
        {"eth_type": "ipv6", "ip_proto": "tcp"},
        {"eth_type": 2048, "ip_proto": 6},
        {"in_port": "s1-eth1"},
        {"in_port": 3},
        {"ipv4_dst": "10.0.0.0/8"},
    ],
)
def test_match_forms_the_parser_accepts_are_documented(
    openapi: dict[str, Any], document: dict[str, Any], match: dict[str, Any]
) -> None:
    document["rules"] = [{"name": "r", "match": match, "class": "training"}]
    document["classes"]["training"]["min_rate"] = 7_000_000
    assert policy_validator(openapi).is_valid(document)


@pytest.mark.parametrize(
    "broken",
    [
        {"classes": {}},
        {"default_class": 3},
        {"rules": [{"name": "r", "match": {"tcp_dst": []}, "class": "training"}]},
        {"rules": [{"name": "r", "match": {"tcp_dst": True}, "class": "training"}]},
        {"ports": {"rate": 0}},
        {"extra": 1},
    ],
)
def test_structurally_broken_documents_fail_the_schema_too(
    openapi: dict[str, Any], document: dict[str, Any], broken: dict[str, Any]
) -> None:
    assert not policy_validator(openapi).is_valid({**document, **broken})
