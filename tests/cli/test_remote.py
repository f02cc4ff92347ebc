"""What an API answer means to the CLI: messages and exit codes, from responses alone."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from controller.cli.credentials import (
    EXIT_NOT_APPLIED,
    EXIT_REJECTED,
    EXIT_UNAVAILABLE,
    ApiCallError,
)
from controller.cli.remote import (
    ApiClient,
    WriteOptions,
    failure_of,
)
from controller.policy.errors import FieldError


def response(status: int, body: Any = None, text: str | None = None) -> httpx.Response:
    if text is not None:
        return httpx.Response(status, text=text)
    return httpx.Response(status, json=body)


def test_422_keeps_every_path() -> None:
    failure = failure_of(
        response(
            422,
            {
                "detail": "invalid policy: 2 error(s)",
                "errors": [
                    {"path": "rules[1].match.tcp_dst", "message": "port 70000 out of range"},
                    {"path": "default_class", "message": "unknown class"},
                ],
            },
        )
    )
    assert failure.exit_code == EXIT_REJECTED
    assert failure.errors == [
        FieldError("rules[1].match.tcp_dst", "port 70000 out of range"),
        FieldError("default_class", "unknown class"),
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"detail": "x", "expected_version": 3, "active_version": 5},
            "conflict: you expected version 3, but the active version is 5;"
            " re-read it (flowlane policy show), then --if-match 5",
        ),
        (
            {"detail": "x", "expected_version": None, "active_version": 1},
            "conflict: you expected no policy, but the active version is 1;"
            " re-read it (flowlane policy show), then --if-match 1",
        ),
        (
            {"detail": "x", "expected_version": 2, "active_version": None},
            "conflict: you expected version 2, but no policy exists yet",
        ),
    ],
)
def test_412_says_what_is_active(body: dict[str, Any], message: str) -> None:
    failure = failure_of(response(412, body))
    assert (failure.message, failure.exit_code) == (message, EXIT_REJECTED)


def test_503_and_504_have_their_own_exit_codes() -> None:
    down = failure_of(response(503, {"detail": "Redis unavailable: refused"}))
    assert down.message == "the API is not ready: Redis unavailable: refused"
    assert down.exit_code == EXIT_UNAVAILABLE
    slow = failure_of(
        response(504, {"detail": "version 4 is stored", "version": 4, "pending": ["0a", "0b"]})
    )
    assert slow.message == "version 4 is stored; not confirmed by: 0a, 0b"
    assert slow.exit_code == EXIT_NOT_APPLIED


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (response(404, {"detail": "no policy version 9"}), "no policy version 9"),
        (response(500, text="Internal Server Error"), "API error 500: Internal Server Error"),
        (response(502, text=""), "API error 502: Bad Gateway"),
        (response(400, ["not", "a", "dict"]), "API error 400: "),
    ],
)
def test_other_answers(answer: httpx.Response, message: str) -> None:
    assert failure_of(answer).message.startswith(message)


def test_a_success_that_is_not_json_is_not_the_flowlane_api() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, text="<html>"))
    with pytest.raises(ApiCallError) as caught:
        ApiClient("http://example.test", transport=transport).get_policy()
    assert caught.value.exit_code == EXIT_UNAVAILABLE
    assert "without JSON: is it the flowlane API?" in caught.value.message


def test_a_slow_api_is_a_clear_timeout() -> None:
    def hang(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    with pytest.raises(ApiCallError) as caught:
        ApiClient("http://example.test", transport=httpx.MockTransport(hang)).switches()
    assert (
        caught.value.message == "the flowlane API at http://example.test did not answer within 10 s"
    )


def test_write_options_become_query_and_headers() -> None:
    waiting = WriteOptions("why", wait=True, timeout_s=2.5, if_match=7)
    assert waiting.params == {
        "comment": "why",
        "wait": "applied",
        "timeout": "2.5",
    }
    assert waiting.headers == {"If-Match": '"7"'}
    assert waiting.http_timeout_s == 12.5
    plain = WriteOptions(wait=False)
    assert (plain.params, plain.headers, plain.http_timeout_s) == ({}, {}, 10.0)


def test_requests_the_client_sends() -> None:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    client = ApiClient("http://api.test/", transport=httpx.MockTransport(record))
    client.put_policy({"rules": []}, WriteOptions("a", if_match=3, timeout_s=1))
    client.rollback(2, WriteOptions("a", wait=False))
    client.plan({"classes": {}})
    client.history(5)
    put, rollback, plan, history = seen
    assert (put.method, put.url.path, put.headers["if-match"]) == ("PUT", "/v1/policy", '"3"')
    assert put.url.params["wait"] == "applied"
    assert put.content == b'{"rules": []}'
    assert (rollback.method, rollback.url.path) == ("POST", "/v1/policy/rollback")
    assert "wait" not in rollback.url.params
    assert plan.url.path == "/v1/policy/plan"
    assert history.url.params["limit"] == "5"
