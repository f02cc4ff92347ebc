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
takes seconds.
"""

from __future__ import annotations

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
from controller.store.switches import SwitchStore

MAX_EXAMPLES = 30
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


def _cases() -> list[tuple[str, str, GenerationMode]]:
    """(METHOD, path, mode) for every operation, read from an app that never connects.

    An operation without parameters or body has no invalid input to send,
    so it is only sent valid requests.
    """
    app = create_app(ApiSettings(redis_url="redis://127.0.0.1:1/0"))
    cases = []
    for path, operations in app.openapi()["paths"].items():
        for method, operation in operations.items():
            cases.append((method.upper(), path, GenerationMode.POSITIVE))
            if operation.get("parameters") or operation.get("requestBody"):
                cases.append((method.upper(), path, GenerationMode.NEGATIVE))
    return cases


CASES = _cases()


@pytest.fixture
def api_schema(redis_client: redis.Redis, settings: ApiSettings) -> Any:
    """The app in its normal state: Redis up and a controller beating.

    /readyz answers 503 by design without a heartbeat; with one, any 5xx is a bug.
    """
    SwitchStore(redis_client).heartbeat("fuzz-controller", now=time.time() + 3600)
    return schemathesis.openapi.from_asgi("/openapi.json", create_app(settings))


def test_every_operation_is_fuzzed() -> None:
    assert len({(method, path) for method, path, _ in CASES}) == 9
    assert len(CASES) == 9 + 4  # PUT, plan, history and rollback take input; nothing else does


@pytest.mark.parametrize(
    ("method", "path", "mode"), CASES, ids=[f"{m} {p} {mode.value}" for m, p, mode in CASES]
)
def test_no_input_makes_a_server_error(
    api_schema: Any, method: str, path: str, mode: GenerationMode
) -> None:
    operation = api_schema[path][method]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def fuzz(case: schemathesis.Case) -> None:
        case.call_and_validate(checks=CHECKS)

    fuzz()
