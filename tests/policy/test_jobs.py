"""Job specs: every field checked with its path, a normalized document, and the class check."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from controller.policy.errors import FieldError, format_path
from controller.policy.jobs import MAX_TTL_S, MAX_WEIGHT, JobSpec, format_ports, job_errors


def spec(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "name": "train-1",
        "class": "training",
        "endpoints": [{"ipv4": "10.0.0.0/24", "ports": 4791}],
    }
    document.update(changes)
    return document


def errors(document: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ValidationError) as caught:
        JobSpec.model_validate(document)
    return [(format_path(e["loc"]), e["msg"]) for e in caught.value.errors()]


def test_a_minimal_job_gets_an_hour() -> None:
    job = JobSpec.model_validate(spec())
    assert (job.name, job.traffic_class, job.ttl) == ("train-1", "training", 3600.0)
    [endpoint] = job.endpoints
    assert (str(endpoint.ipv4), endpoint.ports) == ("10.0.0.0/24", ((4791, 4791),))


@pytest.mark.parametrize(
    ("ttl", "seconds"),
    [("30s", 30.0), ("10m", 600.0), ("1h", 3600.0), ("1.5s", 1.5), (90, 90.0), (0.5, 0.5)],
)
def test_ttl_is_a_duration_or_seconds(ttl: object, seconds: float) -> None:
    assert JobSpec.model_validate(spec(ttl=ttl)).ttl == seconds


def test_ttl_is_at_most_a_week() -> None:
    assert JobSpec.model_validate(spec(ttl="168h")).ttl == MAX_TTL_S
    [(path, message)] = errors(spec(ttl="169h"))
    assert path == "ttl"
    assert "longer than 7 days (168h)" in message


@pytest.mark.parametrize(
    ("ttl", "message"),
    [
        ("0s", "duration must be positive"),
        (-5, "duration must be positive"),
        ("5", "has no unit"),
        ("1w", "unknown duration unit 'w'"),
        (True, "expected a duration"),
        (None, "expected a duration"),
    ],
)
def test_bad_ttls(ttl: object, message: str) -> None:
    [(path, text)] = errors(spec(ttl=ttl))
    assert path == "ttl"
    assert message in text


def test_every_error_has_its_path() -> None:
    found = errors(
        {
            "name": "1bad",
            "class": "",
            "endpoints": [
                {"ipv4": "10.0.0.1/24"},
                {"ipv4": "10.0.0.0/8", "ports": 70000},
                {"ipv4": "::1"},
                {"ports": 80},
                {"ipv4": "10.0.0.0/8", "port": 80},
            ],
            "extra": 1,
        }
    )
    assert [path for path, _ in found] == [
        "name",
        "class",
        "endpoints[0].ipv4",
        "endpoints[1].ports",
        "endpoints[2].ipv4",
        "endpoints[3].ipv4",
        "endpoints[4].port",
        "extra",
    ]
    assert "host bits set" in found[2][1]
    assert "port 70000 out of range (0-65535)" in found[3][1]


def test_one_to_64_endpoints() -> None:
    endpoints = [{"ipv4": f"10.0.{n}.0/24"} for n in range(65)]
    assert len(JobSpec.model_validate(spec(endpoints=endpoints[:64])).endpoints) == 64
    for wrong in ([], endpoints):
        [(path, _)] = errors(spec(endpoints=wrong))
        assert path == "endpoints"


def test_ports_that_expand_too_far_are_refused() -> None:
    ports = list(range(1, 4000, 2))  # 2000 separate odd ports: 2000 masked matches
    [(path, message)] = errors(spec(endpoints=[{"ipv4": "10.0.0.0/8", "ports": ports}]))
    assert path == "endpoints[0].ports"
    assert "2000 masked matches, more than 1024" in message


def test_the_class_must_be_spelled_class() -> None:
    document = spec()
    document["traffic_class"] = document.pop("class")
    assert [path for path, _ in errors(document)] == ["class", "traffic_class"]


def test_the_document_is_normalized_and_reads_back() -> None:
    job = JobSpec.model_validate(
        spec(
            endpoints=[
                {"ipv4": "10.0.0.5", "ports": [8001, "8000", "9000-9010", 22]},
                {"ipv4": "10.1.0.0/16"},
            ],
            ttl="10m",
        )
    )
    document = job.document()
    assert document == {
        "class": "training",
        "endpoints": [
            {"ipv4": "10.0.0.5/32", "ports": [22, "8000-8001", "9000-9010"]},
            {"ipv4": "10.1.0.0/16", "ports": None},
        ],
        "ttl": 600.0,
        "weight": 1,
    }
    assert JobSpec.from_document("train-1", document) == job


def test_weight_defaults_to_one_and_reads_back() -> None:
    assert JobSpec.model_validate(spec()).weight == 1
    job = JobSpec.model_validate(spec(weight=MAX_WEIGHT))
    assert job.document()["weight"] == MAX_WEIGHT
    assert JobSpec.from_document("train-1", job.document()) == job


def test_a_document_stored_before_weights_reads_as_weight_one() -> None:
    document = JobSpec.model_validate(spec()).document()
    del document["weight"]
    assert JobSpec.from_document("train-1", document).weight == 1


@pytest.mark.parametrize(
    ("weight", "message"),
    [
        (0, "weight 0 is outside 1..100: a job's share is relative to the other jobs of its class"),
        (101, "weight 101 is outside 1..100"),
        (-3, "weight -3 is outside 1..100"),
        ("2", "weight must be a whole number from 1 to 100, not '2'"),
        (2.0, "weight must be a whole number from 1 to 100, not 2.0"),
        (True, "weight must be a whole number from 1 to 100, not True"),
        (None, "weight must be a whole number from 1 to 100, not None"),
    ],
)
def test_a_bad_weight_is_refused_with_its_reason(weight: object, message: str) -> None:
    [(path, found)] = errors(spec(weight=weight))
    assert path == "weight"
    assert message in found


def test_the_schema_documents_the_weight_bound() -> None:
    schema = JobSpec.model_json_schema(by_alias=True)["properties"]["weight"]
    assert (schema["minimum"], schema["maximum"], schema["default"]) == (1, MAX_WEIGHT, 1)
    assert "from 1 to 100, because" in schema["description"]


def test_format_ports() -> None:
    assert format_ports(((22, 22), (8000, 8010))) == [22, "8000-8010"]
    assert format_ports(()) == []


def test_job_errors_check_the_class_against_the_policy() -> None:
    job = JobSpec.model_validate(spec(**{"class": "bulk"}))
    assert job_errors(job, ["inference", "training"]) == [
        FieldError("class", "unknown class 'bulk' (classes: inference, training)")
    ]
    assert job_errors(job, ["bulk"]) == []
    assert job_errors(job, []) == [FieldError("class", "unknown class 'bulk' (classes: none)")]
