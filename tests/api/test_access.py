"""Who may call what: the role x route matrix from the OpenAPI document, tokens, the audit
log, and refused cross-site writes."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from controller.api.app import create_app
from controller.api.auth import ROLE_KEY, needed_role
from controller.api.settings import ApiSettings
from controller.auth.model import Role, secret_hash
from controller.store.events import EventStore
from controller.store.policies import PolicyStore
from controller.store.tokens import TokenStore
from tests.api.conftest import bearer


def operations() -> list[tuple[str, str, str]]:
    """(METHOD, path, role) of every operation the API documents."""
    app = create_app(ApiSettings(redis_url="redis://127.0.0.1:1/0"))
    return [
        (method.upper(), path, operation[ROLE_KEY])
        for path, methods in app.openapi()["paths"].items()
        for method, operation in methods.items()
    ]


OPERATIONS = operations()


def concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x", path)


def call(client: TestClient, method: str, path: str, headers: dict[str, str]) -> Any:
    body = {} if method in ("POST", "PUT") else None
    return client.request(method, concrete(path), json=body, headers=headers)


def test_every_operation_states_a_role_and_only_the_probes_are_public() -> None:
    public = {(m, p) for m, p, role in OPERATIONS if role == "public"}
    assert public == {("GET", "/healthz"), ("GET", "/readyz")}
    assert {role for _, _, role in OPERATIONS} == {"public", "viewer", "operator", "admin"}
    writes = {(m, p): role for m, p, role in OPERATIONS if m != "GET"}
    assert writes.pop(("POST", "/v1/jobs")) == writes.pop(("DELETE", "/v1/jobs/{name}"))
    assert set(writes.values()) == {"admin"}  # every other write is the admin's


def test_an_undeclared_route_is_viewer_to_read_and_admin_to_write() -> None:
    assert needed_role({"GET"}, None) is Role.viewer
    assert needed_role({"POST"}, {}) is Role.admin
    assert needed_role({"GET"}, {ROLE_KEY: "public"}) is None
    with pytest.raises(ValueError, match="unknown role 'root'"):
        needed_role({"GET"}, {ROLE_KEY: "root"})


@pytest.mark.parametrize(("method", "path", "role"), OPERATIONS, ids=lambda v: str(v))
def test_the_role_matrix(
    anonymous: TestClient, redis_client: redis.Redis, method: str, path: str, role: str
) -> None:
    if role == "public":
        assert call(anonymous, method, path, {}).status_code not in (401, 403)
        return
    needed = Role.parse(role)
    missing = call(anonymous, method, path, {})
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == 'Bearer realm="flowlane"'
    bad = call(anonymous, method, path, {"Authorization": "Bearer flt_not-a-token"})
    assert bad.status_code == 401
    assert 'error="invalid_token"' in bad.headers["www-authenticate"]
    for held in Role:
        answer = call(anonymous, method, path, bearer(redis_client, held))
        if held < needed:
            assert answer.status_code == 403, (held, answer.text)
            assert f"this needs {needed.name}" in answer.json()["detail"]
        else:
            assert answer.status_code not in (401, 403), (held, answer.text)


# ---- tokens ---------------------------------------------------------------------------------


def test_a_token_is_shown_once_and_stored_as_a_hash(
    client: TestClient, anonymous: TestClient, redis_client: redis.Redis
) -> None:
    created = client.post("/v1/tokens", json={"name": "ci", "role": "operator", "ttl": "30d"})
    assert created.status_code == 201, created.text
    body = created.json()
    secret = body.pop("token")
    assert secret.startswith("flt_") and len(secret) > 40
    assert body["role"] == "operator" and body["tenant"] is None
    assert 29.9 * 86400 < body["expires_at"] - body["created_at"] <= 30 * 86400
    dump = json.dumps({k: redis_client.hgetall(k) for k in redis_client.keys("flowlane:tokens*")})
    assert secret not in dump and secret_hash(secret) in dump
    listed = client.get("/v1/tokens").json()["tokens"]
    assert {t["name"] for t in listed} == {"test-admin", "ci"}
    assert all("token" not in t and "hash" not in t for t in listed)
    # the token works, for what its role allows
    as_ci = {"Authorization": f"Bearer {secret}"}
    assert anonymous.get("/v1/jobs", headers=as_ci).status_code == 200
    assert anonymous.get("/v1/tokens", headers=as_ci).status_code == 403
    used = {t["name"]: t for t in client.get("/v1/tokens").json()["tokens"]}["ci"]
    assert used["last_used"] is not None


def test_a_revoked_token_is_refused_at_once(
    client: TestClient, anonymous: TestClient, redis_client: redis.Redis
) -> None:
    viewer = bearer(redis_client, Role.viewer, name="reader")
    assert anonymous.get("/v1/jobs", headers=viewer).status_code == 200
    assert client.delete("/v1/tokens/reader").status_code == 204
    assert anonymous.get("/v1/jobs", headers=viewer).status_code == 401
    assert client.delete("/v1/tokens/reader").status_code == 404


def test_an_expired_token_is_refused(anonymous: TestClient, redis_client: redis.Redis) -> None:
    _, secret = TokenStore(redis_client).create(
        "brief", Role.admin, ttl_s=60, now=time.time() - 120
    )
    answer = anonymous.get("/v1/jobs", headers={"Authorization": f"Bearer {secret}"})
    assert answer.status_code == 401


@pytest.mark.parametrize(
    ("body", "path", "message"),
    [
        ({"name": "x", "role": "root"}, "role", "unknown role 'root'"),
        ({"name": "1x", "role": "admin"}, "name", "String should match pattern"),
        ({"name": "x", "role": "admin", "ttl": "soon"}, "ttl", "cannot parse duration"),
        ({"name": "x", "role": "admin", "rol": "admin"}, "rol", "did you mean 'role'?"),
    ],
)
def test_a_bad_token_request_names_the_field(
    client: TestClient, body: dict[str, Any], path: str, message: str
) -> None:
    answer = client.post("/v1/tokens", json=body)
    assert answer.status_code == 422
    [error] = answer.json()["errors"]
    assert error["path"] == path and message in error["message"]
    assert [t["name"] for t in client.get("/v1/tokens").json()["tokens"]] == ["test-admin"]


def test_a_taken_name_is_409(client: TestClient) -> None:
    assert client.post("/v1/tokens", json={"name": "ci", "role": "viewer"}).status_code == 201
    again = client.post("/v1/tokens", json={"name": "ci", "role": "admin"})
    assert again.status_code == 409
    roles = {t["name"]: t["role"] for t in client.get("/v1/tokens").json()["tokens"]}
    assert roles["ci"] == "viewer"


def test_bootstrap_makes_one_admin_token_and_only_on_an_empty_store(
    redis_client: redis.Redis,
) -> None:
    tokens = TokenStore(redis_client)
    secrets = [tokens.bootstrap() for _ in range(3)]
    assert secrets[0] is not None and secrets[1:] == [None, None]
    record = tokens.authenticate(secrets[0])
    assert record is not None and (record.name, record.role) == ("bootstrap-admin", "admin")


def test_the_api_writes_the_bootstrap_token_for_its_owner_only(
    redis_client: redis.Redis, tmp_path: Any
) -> None:
    path = tmp_path / "config" / "token"
    settings = ApiSettings(redis_url=_url(redis_client), token_file=path)
    with TestClient(create_app(settings)) as test_client:
        deadline = time.monotonic() + 5
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert path.stat().st_mode & 0o777 == 0o600
        assert path.parent.stat().st_mode & 0o777 == 0o700
        token = {"Authorization": f"Bearer {path.read_text().strip()}"}
        assert test_client.get("/v1/tokens", headers=token).status_code == 200
    first = path.read_text()
    again = ApiSettings(redis_url=_url(redis_client), token_file=path)
    with TestClient(create_app(again)):  # tokens exist now: nothing new is written
        time.sleep(0.2)
    assert path.read_text() == first


def _url(client: redis.Redis) -> str:
    kwargs = client.connection_pool.connection_kwargs
    return f"redis://{kwargs['host']}:{kwargs['port']}/0"


# ---- the audit log --------------------------------------------------------------------------


def test_writes_and_refusals_are_audited_and_reads_are_not(
    client: TestClient,
    anonymous: TestClient,
    redis_client: redis.Redis,
    document: dict[str, Any],
) -> None:
    assert client.put("/v1/policy", json=document).status_code == 201
    document["default_class"] = "training"
    assert client.put("/v1/policy", json=document).status_code == 201
    assert client.get("/v1/policy").status_code == 200  # a read: not audited
    viewer = bearer(redis_client, Role.viewer, name="nosy")
    assert anonymous.delete("/v1/jobs/x", headers=viewer).status_code == 403
    assert anonymous.put("/v1/policy", json=document).status_code == 401
    # The 401 follows the 403 from the same client within a second: it is written as a
    # summary of that client's refusals a second later (controller/api/audit.py).
    deadline = time.monotonic() + 5
    while len(entries := client.get("/v1/audit").json()["events"]) < 4:
        assert time.monotonic() < deadline, entries
        time.sleep(0.1)
    first, second, refused, anonymous_entry = entries
    assert (first["token"], first["role"], first["method"], first["route"]) == (
        "test-admin",
        "admin",
        "PUT",
        "/v1/policy",
    )
    assert (first["before"], first["after"], first["outcome"]) == (None, 1, "ok")
    assert (second["before"], second["after"], second["status"]) == (1, 2, 201)
    assert first["client"] == "testclient"
    assert (refused["token"], refused["status"], refused["outcome"]) == ("nosy", 403, "refused")
    assert (refused["route"], refused["path"]) == ("/v1/jobs/{name}", "/v1/jobs/x")
    assert (anonymous_entry["token"], anonymous_entry["status"]) == (None, 401)
    assert (anonymous_entry["count"], anonymous_entry["refusals"]) == (1, {"401": 1})
    # the audit log itself is the admin's
    assert anonymous.get("/v1/audit", headers=viewer).status_code == 403


def test_a_job_write_names_the_job(client: TestClient, document: dict[str, Any]) -> None:
    client.put("/v1/policy", json=document)
    job = {"name": "train-1", "class": "training", "endpoints": [{"ipv4": "10.0.0.0/24"}]}
    assert client.post("/v1/jobs", json=job).status_code == 201
    assert client.delete("/v1/jobs/train-1").status_code == 204
    entries = client.get("/v1/audit").json()["events"]
    assert [(e["method"], e.get("job"), e["status"]) for e in entries[1:]] == [
        ("POST", "train-1", 201),
        ("DELETE", "train-1", 204),
    ]


def test_the_audit_is_a_stream_of_its_own(client: TestClient, redis_client: redis.Redis) -> None:
    client.post("/v1/tokens", json={"name": "ci", "role": "viewer"})
    assert EventStore(redis_client).read() == []  # the events stream has none of it
    [entry] = client.get("/v1/audit").json()["events"]
    assert (entry["token_name"], entry["token_role"]) == ("ci", "viewer")
    assert "token" in entry and entry["token"] == "test-admin"


# ---- no cross-site writes -------------------------------------------------------------------


def test_a_text_plain_job_is_415_and_stores_nothing(
    client: TestClient, document: dict[str, Any]
) -> None:
    client.put("/v1/policy", json=document)
    job = json.dumps({"name": "j", "class": "training", "endpoints": [{"ipv4": "10.0.0.1"}]})
    answer = client.post("/v1/jobs", content=job, headers={"Content-Type": "text/plain"})
    assert answer.status_code == 415
    assert answer.json()["detail"] == (
        "a request body must be application/json (Content-Type: text/plain)"
    )
    assert client.get("/v1/jobs").json()["jobs"] == []


def test_a_cross_origin_form_rollback_is_refused(
    client: TestClient, document: dict[str, Any], policies: PolicyStore
) -> None:
    client.put("/v1/policy", json=document)
    document["default_class"] = "training"
    client.put("/v1/policy", json=document)
    answer = client.post(
        "/v1/policy/rollback",
        content="version=1",
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Origin": "http://evil.example",
        },
    )
    assert answer.status_code == 403
    assert "cross-origin request refused" in answer.json()["detail"]
    assert policies.active_version() == 2


@pytest.mark.parametrize("site", ["cross-site", "same-site"])
def test_a_browser_cross_site_write_is_refused(client: TestClient, site: str) -> None:
    answer = client.delete("/v1/jobs/x", headers={"Sec-Fetch-Site": site})
    assert answer.status_code == 403


def test_a_same_origin_write_and_any_read_pass(client: TestClient) -> None:
    answer = client.post(
        "/v1/tokens",
        json={"name": "ci", "role": "viewer"},
        headers={"Origin": "http://testserver", "Sec-Fetch-Site": "same-origin"},
    )
    assert answer.status_code == 201
    assert client.get("/v1/jobs", headers={"Origin": "http://evil.example"}).status_code == 200
