"""Quotas: live jobs per tenant, and classification entries per switch from the rules and every
live job together; a registration past one is 429 naming it, and the plan shows the headroom."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from fastapi.testclient import TestClient

from controller.api.routes.jobs import Budget, budget_of, job_load
from controller.auth.model import Role
from controller.cli.policy import quota_lines, render_plan
from controller.pipeline import tables
from controller.policy.errors import PolicyError
from controller.policy.jobs import JobSpec
from controller.policy.load import parse_policy
from controller.policy.quotas import (
    DEFAULT_ENTRIES_PER_SWITCH,
    DEFAULT_JOBS_PER_TENANT,
    ENTRIES_PER_SWITCH,
    JOBS_PER_TENANT,
    MAX_JOBS_PER_TENANT,
    JobLoad,
    Quotas,
    QuotaUse,
    admission,
    quota_use,
)
from controller.store.events import EventStore
from controller.store.jobs import JobRecord, JobStore
from controller.store.policies import PolicyVersion
from tests.api.conftest import DOCUMENT, bearer

TENANTS = {"blue": {"networks": ["10.1.0.0/16"]}, "red": {"networks": ["10.2.0.0/16"]}}
RULE_ENTRIES = 12  # the conftest document: 3 rules of one port each, two families, mirrored


def job(name: str, *addresses: str, ports: list[int] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "class": "training",
        "endpoints": [{"ipv4": address, "ports": ports} for address in addresses],
    }


def names(client: TestClient) -> list[str]:
    return [j["name"] for j in client.get("/v1/jobs").json()["jobs"]]


def registered(redis_client: redis.Redis) -> list[str]:
    return [
        e.data["name"]
        for e in EventStore(redis_client).read(limit=1000)
        if e.kind == "job" and e.data["op"] == "registered"
    ]


@pytest.fixture
def tenanted(client: TestClient, document: dict[str, Any]) -> Any:
    """Apply the document with two tenants and the given quotas (None: the defaults)."""

    def apply(quotas: dict[str, Any] | None = None) -> TestClient:
        body = {**document, "tenants": TENANTS}
        if quotas is not None:
            body["quotas"] = quotas
        answer = client.put("/v1/policy", json=body)
        assert answer.status_code in (200, 201), answer.text
        return client

    return apply


# --------------------------------------------------------------------------------------------
# the API
# --------------------------------------------------------------------------------------------


def test_one_tenant_cannot_fill_the_switches_with_64_endpoint_jobs(
    tenanted: Any, redis_client: redis.Redis
) -> None:
    """The probe's flood: 64-endpoint jobs of one tenant. At the default quota (65 536 entries
    per switch, rules and jobs together) the fourth of 16 384 entries does not fit."""
    client = tenanted()
    red = bearer(redis_client, Role.operator, tenant="red")
    hosts = [f"10.2.0.{i}" for i in range(1, 65)]
    statuses = [
        client.post("/v1/jobs", json=job(f"big-{i}", *hosts, ports=[4791]), headers=red)
        for i in range(5)
    ]
    assert [answer.status_code for answer in statuses] == [201, 201, 201, 429, 429]
    refused = statuses[3].json()
    wanted = RULE_ENTRIES + 4 * 16_384
    assert refused == {
        "detail": f"quota quotas.entries_per_switch exceeded: job 'big-3' expands to 16384"
        f" classification entries per switch; with the policy's rules ({RULE_ENTRIES}) and the"
        f" other live jobs (49152) that is {wanted}, more than the 65536 allowed; use fewer"
        " endpoints or port ranges, delete a job, or ask an admin to raise the quota",
        "quota": ENTRIES_PER_SWITCH,
        "limit": DEFAULT_ENTRIES_PER_SWITCH,
        "wanted": wanted,
    }
    # Nothing of the refused jobs is stored or announced.
    assert names(client) == ["big-0", "big-1", "big-2"]
    assert registered(redis_client) == ["big-0", "big-1", "big-2"]
    # What is left still takes a small job, of any tenant.
    blue = bearer(redis_client, Role.operator, tenant="blue")
    assert client.post("/v1/jobs", json=job("small", "10.1.0.1"), headers=blue).status_code == 201


def test_jobs_per_tenant_counts_each_tenant_and_the_unscoped_tokens_apart(
    tenanted: Any, redis_client: redis.Redis
) -> None:
    client = tenanted({"jobs_per_tenant": 2})
    red = bearer(redis_client, Role.operator, tenant="red")
    blue = bearer(redis_client, Role.operator, tenant="blue")
    for name in ("r1", "r2"):
        assert client.post("/v1/jobs", json=job(name, "10.2.0.1"), headers=red).status_code == 201
    third = client.post("/v1/jobs", json=job("r3", "10.2.0.1"), headers=red)
    assert third.status_code == 429
    assert third.json()["quota"] == JOBS_PER_TENANT and third.json()["wanted"] == 3
    assert "2 live job(s) of tenant 'red' already, at most 2" in third.json()["detail"]
    # Renewing one of its jobs grows nothing: never refused.
    assert client.post("/v1/jobs", json=job("r1", "10.2.0.9"), headers=red).status_code == 201
    # Other tenants, and the tokens without a tenant (as one more), have their own count.
    for name in ("b1", "b2"):
        assert client.post("/v1/jobs", json=job(name, "10.1.0.1"), headers=blue).status_code == 201
    for name in ("o1", "o2"):
        assert client.post("/v1/jobs", json=job(name, "10.9.0.1")).status_code == 201
    unscoped = client.post("/v1/jobs", json=job("o3", "10.9.0.1"))
    assert unscoped.status_code == 429
    assert "2 live job(s) of tokens without a tenant already" in unscoped.json()["detail"]
    # A place freed is a place taken again.
    assert client.delete("/v1/jobs/r2", headers=red).status_code == 204
    assert client.post("/v1/jobs", json=job("r3", "10.2.0.1"), headers=red).status_code == 201
    assert names(client) == ["b1", "b2", "o1", "o2", "r1", "r3"]


def test_a_lowered_quota_keeps_the_live_jobs_and_refuses_new_ones(
    tenanted: Any, redis_client: redis.Redis
) -> None:
    client = tenanted()
    red = bearer(redis_client, Role.operator, tenant="red")
    for name in ("r1", "r2", "r3"):
        assert client.post("/v1/jobs", json=job(name, "10.2.0.1"), headers=red).status_code == 201
    tenanted({"jobs_per_tenant": 1})
    assert names(client) == ["r1", "r2", "r3"]
    assert client.post("/v1/jobs", json=job("r4", "10.2.0.1"), headers=red).status_code == 429
    assert client.post("/v1/jobs", json=job("r1", "10.2.0.1"), headers=red).status_code == 201


def test_a_job_stored_without_its_count_is_counted_from_its_document(
    tenanted: Any, redis_client: redis.Redis
) -> None:
    """Jobs registered before quotas have no recorded count: they still take their entries."""
    client = tenanted({"entries_per_switch": 100})
    spec = JobSpec.model_validate(job("old", "10.9.0.1", "10.9.0.2", "10.9.0.3", "10.9.0.4"))
    assert spec.entries == 4 * 4 * 3
    JobStore(redis_client).put("old", spec.document(), 600)  # no count, as an old API wrote
    [record] = JobStore(redis_client).all()
    assert record.entries is None and job_load(record) == JobLoad("old", None, 48)
    hosts = ("10.9.1.1", "10.9.1.2", "10.9.1.3", "10.9.1.4")
    answer = client.post("/v1/jobs", json=job("new", *hosts))
    assert answer.status_code == 429  # 12 + 48 + 48 > 100
    assert answer.json()["wanted"] == RULE_ENTRIES + 48 + 48
    assert client.post("/v1/jobs", json=job("new", *hosts[:3])).status_code == 201  # + 27


def test_a_policy_whose_rules_exceed_its_entry_quota_is_refused(
    client: TestClient, document: dict[str, Any]
) -> None:
    answer = client.put("/v1/policy", json={**document, "quotas": {"entries_per_switch": 10}})
    assert answer.status_code == 422
    assert answer.json()["errors"] == [
        {
            "path": ENTRIES_PER_SWITCH,
            "message": "the rules expand to 12 classification entries per switch, more than this"
            " quota of 10 (rules and jobs together): raise it, or use fewer rules",
        }
    ]
    typo = client.put("/v1/policy", json={**document, "quotas": {"jobs_per_tenants": 5}})
    assert typo.status_code == 422 and "did you mean 'jobs_per_tenant'" in typo.text
    assert client.get("/v1/policy").status_code == 404  # nothing stored


def test_the_plan_shows_each_quotas_headroom(
    tenanted: Any,
    redis_client: redis.Redis,
    document: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    client = tenanted()
    red = bearer(redis_client, Role.operator, tenant="red")
    assert client.post("/v1/jobs", json=job("r1", "10.2.0.1", "10.2.0.2"), headers=red).is_success
    assert client.post("/v1/jobs", json=job("o1", "10.9.0.1")).is_success
    planned = {
        **document,
        "tenants": TENANTS,
        "quotas": {"jobs_per_tenant": 1, "entries_per_switch": 20},
    }
    answer = client.post("/v1/policy/plan", json=planned)
    assert answer.status_code == 200, answer.text
    used = RULE_ENTRIES + 2 * 2 * 3 + 3
    assert answer.json()["quotas"] == [
        row(ENTRIES_PER_SWITCH, None, 20, used),
        row(JOBS_PER_TENANT, "blue", 1, 0),
        row(JOBS_PER_TENANT, "red", 1, 1),
        row(JOBS_PER_TENANT, None, 1, 1),
    ]
    render_plan(answer.json())  # what `flowlane policy plan` prints
    printed = capsys.readouterr().out
    assert f"quota quotas.entries_per_switch: {used} of 20, {used - 20} over: new jobs refused" in (
        printed
    )
    assert "quota quotas.jobs_per_tenant (tenant blue): 0 of 1, 1 left" in printed
    assert "quota quotas.jobs_per_tenant (tokens without a tenant): 1 of 1, 0 left" in printed


def row(quota: str, tenant: str | None, limit: int, used: int) -> dict[str, Any]:
    return {
        "quota": quota,
        "tenant": tenant,
        "limit": limit,
        "used": used,
        "headroom": limit - used,
    }


# --------------------------------------------------------------------------------------------
# the store: the check and the write are one
# --------------------------------------------------------------------------------------------


def test_a_job_registered_during_the_check_is_judged_again(redis_client: redis.Redis) -> None:
    """Two registrations at once cannot both take the last place: a write between the check
    and the store makes the store read and judge again."""
    store = JobStore(redis_client)
    other = JobStore(redis_client)
    seen: list[list[str]] = []
    document = {"class": "training", "endpoints": [], "ttl": 60.0}

    def admit(live: list[JobRecord]) -> None:
        seen.append([record.name for record in live])
        if len(seen) == 1:
            other.put("rival", document, 60, tenant="red")  # lands between check and write
        if len(live) >= 1:
            raise RuntimeError("quota: one job")

    with pytest.raises(RuntimeError, match="quota: one job"):
        store.put("mine", document, 60, tenant="red", entries=3, admit=admit)
    assert seen == [[], ["rival"]]
    assert [record.name for record in store.all()] == ["rival"]
    stored = store.put("mine", document, 60, tenant="blue", entries=3, admit=lambda live: None)
    assert store.get("mine") == stored and stored.entries == 3


# --------------------------------------------------------------------------------------------
# the pure parts
# --------------------------------------------------------------------------------------------


def test_the_defaults_are_the_documented_ones_and_bounded() -> None:
    policy = parse_policy(DOCUMENT)
    assert policy.quotas == Quotas(jobs_per_tenant=100, entries_per_switch=65_536)
    assert (DEFAULT_JOBS_PER_TENANT, DEFAULT_ENTRIES_PER_SWITCH) == (100, 65_536)
    assert MAX_JOBS_PER_TENANT == tables.MAX_JOBS  # past it, jobs would share a priority
    with pytest.raises(PolicyError, match=r"quotas\.jobs_per_tenant"):
        parse_policy({**DOCUMENT, "quotas": {"jobs_per_tenant": MAX_JOBS_PER_TENANT + 1}})
    with pytest.raises(PolicyError, match=r"quotas\.entries_per_switch"):
        parse_policy({**DOCUMENT, "quotas": {"entries_per_switch": 0}})


BLUE = [JobLoad("b1", "blue", 10), JobLoad("b2", "blue", 10)]


def test_admission_counts_the_callers_tenant_only() -> None:
    quotas = Quotas(jobs_per_tenant=2)
    refused = admission(quotas, 0, BLUE, JobLoad("b3", "blue", 1))
    assert refused is not None and (refused.quota, refused.limit, refused.wanted) == (
        JOBS_PER_TENANT,
        2,
        3,
    )
    assert admission(quotas, 0, BLUE, JobLoad("r1", "red", 1)) is None
    assert admission(quotas, 0, BLUE, JobLoad("o1", None, 1)) is None
    assert admission(quotas, 0, BLUE, JobLoad("b1", "blue", 10)) is None  # a renewal
    nobody = admission(Quotas(jobs_per_tenant=0), 0, [], JobLoad("x", "red", 1))
    assert nobody is not None and "0 live job(s) of tenant 'red' already, at most 0" in str(nobody)


def test_admission_counts_entries_of_the_rules_and_every_live_job() -> None:
    quotas = Quotas(entries_per_switch=50)
    assert admission(quotas, 20, BLUE, JobLoad("r1", "red", 10)) is None  # 50: at the limit
    refused = admission(quotas, 20, BLUE, JobLoad("r1", "red", 11))
    assert refused is not None and (refused.quota, refused.wanted) == (ENTRIES_PER_SWITCH, 51)
    assert "rules (20) and the other live jobs (20) that is 51" in refused.message
    # Replacing a job counts the new one in place of the old.
    assert admission(quotas, 20, BLUE, JobLoad("b1", "blue", 20)) is None


def test_over_a_lowered_quota_only_growth_is_refused() -> None:
    tight = Quotas(jobs_per_tenant=1, entries_per_switch=15)
    assert admission(tight, 0, BLUE, JobLoad("b1", "blue", 10)) is None  # grows nothing
    assert admission(tight, 0, BLUE, JobLoad("b1", "blue", 9)) is None  # shrinks
    grown = admission(tight, 0, BLUE, JobLoad("b1", "blue", 11))
    assert grown is not None and grown.quota == ENTRIES_PER_SWITCH
    new = admission(tight, 0, BLUE, JobLoad("b3", "blue", 0))
    assert new is not None and new.quota == JOBS_PER_TENANT


def test_quota_use_lists_declared_tenants_then_others_then_the_unscoped() -> None:
    live = [*BLUE, JobLoad("z", "zeta", 1), JobLoad("o", None, 2), JobLoad("a", "alpha", 4)]
    rows = quota_use(Quotas(jobs_per_tenant=2), 7, live, ["red", "blue"])
    assert rows == [
        QuotaUse(ENTRIES_PER_SWITCH, None, DEFAULT_ENTRIES_PER_SWITCH, 7 + 27),
        QuotaUse(JOBS_PER_TENANT, "red", 2, 0),
        QuotaUse(JOBS_PER_TENANT, "blue", 2, 2),
        QuotaUse(JOBS_PER_TENANT, "alpha", 2, 1),
        QuotaUse(JOBS_PER_TENANT, "zeta", 2, 1),
        QuotaUse(JOBS_PER_TENANT, None, 2, 1),
    ]
    assert [r.headroom for r in rows][:3] == [DEFAULT_ENTRIES_PER_SWITCH - 34, 2, 0]


def test_quota_lines_say_what_is_left_or_over() -> None:
    assert quota_lines(
        [row(ENTRIES_PER_SWITCH, None, 100, 40), row(JOBS_PER_TENANT, "red", 1, 3)]
    ) == [
        "quota quotas.entries_per_switch: 40 of 100, 60 left",
        "quota quotas.jobs_per_tenant (tenant red): 3 of 1, 2 over: new jobs refused",
    ]


def test_a_jobs_entries_are_the_expansion_limits_count() -> None:
    spec = JobSpec.model_validate(job("j", "10.0.0.1", "10.0.0.2", ports=[4791, 8000]))
    assert spec.entries == 2 * 2 * (2 * 2 * 2)  # pairs x (tcp, udp) x mirrored x two ports


def test_the_documented_defaults_are_the_defaults() -> None:
    """The README's quotas block and the tenants example state the defaults: keep them true."""
    repo = Path(__file__).resolve().parents[2]
    readme = (repo / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(  quotas:\n.*?)```", readme, re.DOTALL)
    assert block is not None
    section = yaml.safe_load(textwrap.dedent(block.group(1)))["quotas"]
    assert Quotas.model_validate(section) == Quotas()
    example = yaml.safe_load((repo / "policies/examples/tenants.yaml").read_text())
    assert Quotas.model_validate(example["quotas"]) == Quotas()


def test_a_stored_version_is_judged_once_and_by_what_parses_if_it_no_longer_validates() -> None:
    bad_rule = {"name": "bad", "match": {"tcp_dst": 70000}, "class": "training"}
    broken = {**DOCUMENT, "quotas": {"jobs_per_tenant": 3}, "rules": [*DOCUMENT["rules"], bad_rule]}
    assert budget_of(PolicyVersion(7, "a", 1.5, "", broken)) == Budget(
        Quotas(jobs_per_tenant=3), 12
    )
    # Another version of the same number (another store, a lost one) is its own budget.
    valid = {**DOCUMENT, "quotas": {"jobs_per_tenant": 4}}
    assert budget_of(PolicyVersion(7, "a", 2.5, "", valid)) == Budget(
        Quotas(jobs_per_tenant=4), RULE_ENTRIES
    )
