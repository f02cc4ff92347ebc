"""Requests generated from the OpenAPI schema, valid and invalid: no 5xx, answers as documented.

Schemathesis builds requests for every operation from ``/openapi.json``
(positive: what the schema allows; negative: what it forbids) and sends them
to the app in-process, on the test Redis.  The checks:

- no response is a server error;
- every status code, content type, header and body is one the schema declares.

Two of schemathesis' default checks are left out on purpose:
``positive_data_acceptance`` (a schema-valid document can still be refused:
cross-field rules such as "default_class names a class" are not JSON
Schema), and ``negative_data_rejection`` (pydantic's lax mode accepts
``"3"`` for an integer, which the schema does not list).

The cases come from schemathesis' Python API (``APIOperation.as_strategy``)
under a plain Hypothesis ``@given``: its pytest plugin rewrites
``Function._nodeid``, which pytest 9.2 no longer has.  Bounded: at most 30
examples per operation and mode, derandomized, so a run is reproducible and
takes seconds.  An operation with no parameters and no body gets one: its
examples differ only in the generated ``Authorization`` header, which every
case replaces with the fuzzer's token, so the other 29 sent the same request.

The schema is generated once, at collection (it names the cases), and each
test loads it into a fresh app of its own rather than asking that app for it:
the same document (``test_the_fuzzed_schema_is_the_apps``), without a
generation and a parse per test.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import redis
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from controller.api.app import create_app
from controller.api.settings import ApiSettings
from controller.auth.model import Role
from controller.fabric.model import Host, Link, PortRef, Topology
from controller.fabric.snapshot import build_snapshot
from controller.policy.jobs import JobSpec
from controller.store.events import EventStore
from controller.store.fabric import FabricStore
from controller.store.flows import FlowRecord, FlowStore
from controller.store.jobs import JobStore
from controller.store.policies import PolicyStore
from controller.store.switches import SwitchReport, SwitchStore
from controller.store.tokens import TokenStore

MAX_EXAMPLES = 30
"""Per operation and mode, for an operation with input (parameters or a body)."""
JOB: dict[str, Any] = {
    "class": "training",
    "endpoints": [{"ipv4": "10.0.0.0/24", "ports": [4791, "8000-8010"]}, {"ipv4": "10.0.1.7"}],
}
FLOW = FlowRecord(
    "000000000000002a", 0x0800, 17, "10.0.0.1", "10.0.0.2", 5000, 4791,
    "training", "job:fuzz", 10**9, 8e8, 1000.0, 1010.0,
)  # fmt: skip
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


FABRIC = (
    Topology()
    .with_switch(1)
    .with_switch(2)
    .with_link(Link(PortRef(1, 3), PortRef(2, 1)))
    .with_link(Link(PortRef(2, 1), PortRef(1, 3)))
    .with_host(Host(0x0A, PortRef(1, 1), 0x0A000001))
    .with_host(Host(0x0B, PortRef(2, 2), 0x0A000002))
)
"""Two switches, one link, a host on each: /v1/topology and /v1/paths answer with bodies."""


def _schema_text() -> str:
    """``/openapi.json`` as the app serves it, from an app that never connects."""
    return json.dumps(create_app(ApiSettings(redis_url="redis://127.0.0.1:1/0")).openapi())


SCHEMA_TEXT = _schema_text()


def _has_input(operation: dict[str, Any]) -> bool:
    return bool(operation.get("parameters") or operation.get("requestBody"))


def _cases() -> list[tuple[str, str, GenerationMode]]:
    """(METHOD, path, mode) for every operation.

    An operation without parameters or body has no invalid input to send,
    so it is only sent valid requests.
    """
    cases = []
    for path, operations in json.loads(SCHEMA_TEXT)["paths"].items():
        for method, operation in operations.items():
            cases.append((method.upper(), path, GenerationMode.POSITIVE))
            if _has_input(operation):
                cases.append((method.upper(), path, GenerationMode.NEGATIVE))
    return cases


CASES = _cases()
WITH_INPUT = {(method, path) for method, path, mode in CASES if mode is GenerationMode.NEGATIVE}
"""The operations with parameters or a body: the ones sent negative cases too."""


@pytest.fixture
def api_schema(redis_client: redis.Redis, settings: ApiSettings, document: dict[str, Any]) -> Any:
    """The app in its normal state: Redis up, a controller beating, a policy, data to read.

    /readyz answers 503 by design without a heartbeat; with one, any 5xx is a bug.
    A job, flows and events make the read routes answer with real bodies, so their
    schemas are checked against more than empty lists.
    """
    switches = SwitchStore(redis_client)
    switches.heartbeat("fuzz-controller", now=time.time() + 3600)
    switches.report(SwitchReport(0x2A, "fuzz-controller", time.time(), 1))
    PolicyStore(redis_client).put(document, author="fuzz")
    job = JobSpec.model_validate({**JOB, "name": "fuzz"})
    JobStore(redis_client).put(job.name, job.document(), job.ttl)
    FlowStore(redis_client).publish(0x2A, [FLOW])
    events = EventStore(redis_client)
    events.append("job", {"name": "fuzz", "op": "registered"})
    events.append("reclassified", {"switch": FLOW.switch, "to": "training"})
    FabricStore(redis_client).publish(
        build_snapshot("fuzz-controller", time.time(), FABRIC, {}, {}, [])
    )
    _, secret = TokenStore(redis_client).create(FUZZ_TOKEN, Role.admin)
    AUTH["Authorization"] = f"Bearer {secret}"
    # What from_asgi("/openapi.json", app) loads, without generating it again.
    schema = schemathesis.openapi.from_dict(json.loads(SCHEMA_TEXT))
    schema.app = create_app(settings)
    schema.location = "/openapi.json"
    return schema


FUZZ_TOKEN = "fuzzer-admin-4f0c"
"""An admin token the fuzzer calls with; a name it will not happen to revoke."""
AUTH: dict[str, str] = {}


def _known_class(case: schemathesis.Case) -> None:
    """Positive job bodies name a class of the stored policy, so some get stored (201).

    Random class names would all be refused by the class check (422), and the
    write path would never run under the fuzzer.
    """
    if case.method == "POST" and case.path == "/v1/jobs" and isinstance(case.body, dict):
        case.body["class"] = "training"


def test_every_operation_is_fuzzed() -> None:
    assert len({(method, path) for method, path, _ in CASES}) == 23
    # Input: PUT, plan, history, rollback; POST /v1/jobs, GET and DELETE /v1/jobs/{name},
    # /v1/flows, /v1/events, /v1/paths, POST /v1/tokens, DELETE /v1/tokens/{name},
    # /v1/audit, /v1/switches/{dpid}/queues. Nothing else takes any.
    assert len(CASES) == 23 + 14


def test_the_fuzzed_schema_is_the_apps(settings: ApiSettings) -> None:
    """The collection-time schema is what an app on the test Redis serves."""
    assert json.loads(SCHEMA_TEXT) == json.loads(json.dumps(create_app(settings).openapi()))


@pytest.mark.parametrize(
    ("method", "path", "mode"), CASES, ids=[f"{m} {p} {mode.value}" for m, p, mode in CASES]
)
def test_no_input_makes_a_server_error(
    api_schema: Any, method: str, path: str, mode: GenerationMode
) -> None:
    operation = api_schema[path][method]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=MAX_EXAMPLES if (method, path) in WITH_INPUT else 1,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def fuzz(case: schemathesis.Case) -> None:
        if mode is GenerationMode.POSITIVE:
            _known_class(case)
        case.headers = {**(case.headers or {}), **AUTH}  # authenticated, as an admin
        case.call_and_validate(checks=CHECKS)

    fuzz()
