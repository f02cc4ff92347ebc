"""The ``detection`` policy section: what is accepted, and every way to get it wrong."""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

import pytest
from pydantic import ValidationError

from controller.policy.detection import (
    DEFAULT_MAX_TRACKED,
    DEFAULT_RATE,
    DetectionSpec,
    ElephantSpec,
    detection_errors,
)
from controller.policy.errors import FieldError, format_path
from controller.policy.units import AbsoluteRate, ShareRate

CLASSES = ("inference", "training", "best-effort")

SECTION: dict[str, Any] = {
    "interval": "500ms",
    "elephant": {"rate": "10%", "for": "1s", "bytes": "10MiB", "class": "training"},
    "release_after": "30s",
    "max_tracked": 100_000,
}


def section(**changes: Any) -> dict[str, Any]:
    """The example section with top-level changes; ``None`` removes a key."""
    document = copy.deepcopy(SECTION)
    for key, value in changes.items():
        if value is None:
            document.pop(key, None)
        else:
            document[key] = value
    return document


def elephant(**fields: Any) -> dict[str, Any]:
    return section(elephant={"class": "training", **fields})


def errors(document: dict[str, Any]) -> dict[str, str]:
    """Path (as the policy loader prints it) → message, for an invalid section."""
    with pytest.raises(ValidationError) as info:
        DetectionSpec.model_validate(document)
    found: dict[str, str] = {}
    for error in info.value.errors():
        path = format_path(["detection", *error["loc"]])
        found[path] = error["msg"].removeprefix("Value error, ")
    return found


# --------------------------------------------------------------------------------------------
# Valid sections
# --------------------------------------------------------------------------------------------


def test_the_documented_example_is_valid() -> None:
    spec = DetectionSpec.model_validate(SECTION)
    assert spec.interval == 0.5
    assert spec.release_after == 30.0
    assert spec.max_tracked == 100_000
    assert spec.elephant.min_bytes == 10 * 2**20
    assert spec.elephant.rate == ShareRate(Fraction(1, 10))
    assert spec.elephant.sustain == spec.sustain_s == 1.0
    assert spec.elephant.traffic_class == "training"
    assert spec.elephant.release_ratio == 0.5


def test_defaults() -> None:
    spec = DetectionSpec.model_validate({"elephant": {"class": "training"}})
    assert (spec.interval, spec.release_after, spec.max_tracked) == (
        0.5,
        30.0,
        DEFAULT_MAX_TRACKED,
    )
    assert spec.elephant.rate == DEFAULT_RATE == ShareRate(Fraction(1, 10))
    assert spec.elephant.min_bytes is None
    assert spec.sustain_s == 1.0  # a rate must hold for two intervals when `for` is absent
    slow = DetectionSpec.model_validate({"interval": "2s", "elephant": {"class": "training"}})
    assert slow.sustain_s == 4.0


def test_a_section_written_for_bytes_alone_counts_them_at_the_default_rate() -> None:
    """The old PIAS form still loads; its bytes now count only while a flow keeps up 10 %."""
    spec = DetectionSpec.model_validate({"elephant": {"bytes": "1MiB", "class": "training"}})
    assert spec.elephant.min_bytes == 1 << 20
    assert spec.elephant.rate == DEFAULT_RATE
    dumped = spec.model_dump(by_alias=True, exclude_defaults=True)
    assert dumped == {"elephant": {"bytes": "1MiB", "class": "training"}}
    assert spec.model_dump(by_alias=True)["elephant"]["rate"] == "10%"


@pytest.mark.parametrize(
    ("fields", "rate", "sustain"),
    [
        ({"rate": "10%"}, ShareRate(Fraction(1, 10)), None),
        ({"rate": "5%", "bytes": "1MiB"}, ShareRate(Fraction(1, 20)), None),
        ({"rate": "50Mbit", "for": "1s"}, AbsoluteRate(50_000_000), 1.0),
        ({"rate": 50_000_000, "for": 2}, AbsoluteRate(50_000_000), 2.0),
        ({"bytes": "10MiB", "rate": "10%", "for": "1.5s"}, ShareRate(Fraction(1, 10)), 1.5),
    ],
)
def test_a_rate_elephant_with_or_without_for(
    fields: dict[str, Any], rate: AbsoluteRate | ShareRate, sustain: float | None
) -> None:
    spec = DetectionSpec.model_validate(elephant(**fields))
    assert spec.elephant.rate == rate
    assert spec.elephant.sustain == sustain
    assert spec.sustain_s == (1.0 if sustain is None else sustain)


def test_release_ratio_can_be_tuned() -> None:
    spec = DetectionSpec.model_validate(elephant(rate="10%", release_ratio=0.25))
    assert spec.elephant.release_ratio == 0.25
    spec = DetectionSpec.model_validate(elephant(bytes="10MiB", release_ratio=0.25))
    assert spec.elephant.release_ratio == 0.25  # every elephant is released when calm


def test_the_section_writes_back_as_the_operator_wrote_it() -> None:
    document = elephant(bytes="64KiB", rate="50Mbit", **{"for": "1.5s"})
    document["interval"] = "250ms"
    document["release_after"] = "2m"
    spec = DetectionSpec.model_validate(document)
    dumped = spec.model_dump(by_alias=True, exclude_defaults=True)
    assert dumped == {
        "interval": "250ms",
        "elephant": {"bytes": "64KiB", "rate": "50Mbit", "for": "1.5s", "class": "training"},
        "release_after": "2m",
    }
    assert DetectionSpec.model_validate(spec.model_dump(by_alias=True)) == spec


def test_python_names_work_too() -> None:
    spec = ElephantSpec.model_validate({"min_bytes": 1000, "traffic_class": "training"})
    assert spec.min_bytes == 1000
    assert spec.traffic_class == "training"


def test_the_section_is_frozen() -> None:
    spec = DetectionSpec.model_validate(SECTION)
    with pytest.raises(ValidationError):
        spec.interval = 1.0


def test_the_schema_documents_units() -> None:
    schema = DetectionSpec.model_json_schema(by_alias=True)
    properties = schema["$defs"]["ElephantSpec"]["properties"]
    assert set(properties) == {"bytes", "rate", "for", "class", "release_ratio"}
    assert "10MiB" in str(properties["bytes"])
    assert "500ms" in str(schema["properties"]["interval"])


# --------------------------------------------------------------------------------------------
# Invalid sections: each reported at its path, with a reason
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "path", "message"),
    [
        (
            elephant(rate="10%", release_ratio=0),
            "detection.elephant.release_ratio",
            "greater than 0",
        ),
        (elephant(rate="10%", release_ratio=1), "detection.elephant.release_ratio", "less than 1"),
        (elephant(bytes="10Mb"), "detection.elephant.bytes", "'10Mb' looks like bits"),
        (elephant(bytes="ten MiB"), "detection.elephant.bytes", "cannot parse size"),
        (elephant(bytes="10XB"), "detection.elephant.bytes", "unknown size unit 'XB'"),
        (elephant(bytes=0), "detection.elephant.bytes", "size must be positive"),
        (elephant(bytes="1000"), "detection.elephant.bytes", "has no unit: write e.g. '1000B'"),
        (elephant(rate="10Mbps"), "detection.elephant.rate", "unknown rate unit 'Mbps'"),
        (elephant(rate="150%"), "detection.elephant.rate", "at most 100%"),
        (
            elephant(rate="10%", **{"for": "0s"}),
            "detection.elephant.for",
            "duration must be positive",
        ),
        (elephant(rate="10%", **{"for": "soon"}), "detection.elephant.for", "cannot parse"),
        (section(elephant={"bytes": "10MiB"}), "detection.elephant.class", "Field required"),
        (elephant(bytes="1MiB", size="2MiB"), "detection.elephant.size", "Extra inputs"),
        (section(elephant=None), "detection.elephant", "Field required"),
        (
            section(interval="50ms"),
            "detection.interval",
            "interval must be between 100ms and 1m, got 50ms",
        ),
        (section(interval="2m"), "detection.interval", "between 100ms and 1m, got 2m"),
        (section(interval="1"), "detection.interval", "has no unit: write e.g. '1s'"),
        (section(interval=True), "detection.interval", "expected a duration"),
        (
            section(interval="1s", release_after="1s"),
            "detection.release_after",
            "release_after (1s) must be longer than interval (1s)",
        ),
        (
            section(interval="1m", release_after=None),
            "detection.release_after",
            "release_after (30s) must be longer than interval (1m)",
        ),
        (section(release_after="-3s"), "detection.release_after", "cannot parse duration"),
        (section(max_tracked=0), "detection.max_tracked", "greater than or equal to 1"),
        (section(max_tracked=10**8), "detection.max_tracked", "less than or equal to 10000000"),
        (section(max_tracked="many"), "detection.max_tracked", "valid integer"),
        (section(interval_ms=500), "detection.interval_ms", "Extra inputs"),
    ],
)
def test_each_mistake_is_reported_where_it_is(
    document: dict[str, Any], path: str, message: str
) -> None:
    found = errors(document)
    assert path in found, found
    assert message in found[path]


def test_every_independent_mistake_is_reported_at_once() -> None:
    document = section(interval="5ms", max_tracked=-1)
    document["elephant"]["bytes"] = "lots"
    assert set(errors(document)) == {
        "detection.interval",
        "detection.max_tracked",
        "detection.elephant.bytes",
    }


def test_release_after_is_not_compared_with_an_invalid_interval() -> None:
    """One mistake, one message: a broken interval does not also fail release_after."""
    assert set(errors(section(interval="forever"))) == {"detection.interval"}


# --------------------------------------------------------------------------------------------
# Checks that need the policy's classes
# --------------------------------------------------------------------------------------------


def test_a_known_class_other_than_the_default_is_fine() -> None:
    spec = DetectionSpec.model_validate(SECTION)
    assert detection_errors(spec, CLASSES, default_class="inference") == []
    assert detection_errors(spec, CLASSES) == []


def test_an_unknown_class_is_reported_with_the_known_ones() -> None:
    spec = DetectionSpec.model_validate(elephant(bytes="10MiB", **{"class": "trainig"}))
    assert detection_errors(spec, CLASSES, "inference") == [
        FieldError(
            "detection.elephant.class",
            "unknown class 'trainig' (classes: inference, training, best-effort)",
        )
    ]


def test_demoting_to_the_default_class_is_refused() -> None:
    spec = DetectionSpec.model_validate(elephant(bytes="10MiB", **{"class": "inference"}))
    [error] = detection_errors(spec, CLASSES, default_class="inference")
    assert error.path == "detection.elephant.class"
    assert "is the default class: detected elephants would not move" in error.message


def test_the_error_path_can_be_prefixed() -> None:
    spec = DetectionSpec.model_validate(elephant(bytes="10MiB", **{"class": "nope"}))
    [error] = detection_errors(spec, CLASSES, path="policy.detection")
    assert error.path == "policy.detection.elephant.class"
