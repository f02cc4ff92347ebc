"""The ``detection`` section: how flows no rule names are promoted to the elephant class.

Rules classify what an operator knows about.  Everything else starts in the
default (latency) class, and the controller demotes a flow that has sent
``bytes`` (or kept up ``rate`` for ``for``) to the elephant class: a PIAS-style
demotion that needs no knowledge of flow sizes.  The override is dropped once
the flow has been idle for ``release_after``.

The models check each field and what spans the section; whether the class
exists, and whether it differs from the default class, needs the rest of the
policy, so ``detection_errors`` checks that for ``controller.policy.checks``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from controller.policy.errors import FieldError
from controller.policy.units import (
    AbsoluteRate,
    ShareRate,
    format_duration,
    format_size,
    parse_duration,
    parse_rate,
    parse_size,
)

MIN_INTERVAL_S = 0.1
"""Below this, reading a 100 000-entry table would take most of every interval."""

MAX_INTERVAL_S = 60.0
"""Above this, an elephant runs a minute in the latency queue before anyone notices."""

DEFAULT_MAX_TRACKED = 100_000
MAX_MAX_TRACKED = 10_000_000
"""A detector keeps a few hundred bytes per tracked flow; this caps it near a few GB."""

DEFAULT_RELEASE_RATIO = 0.5

DurationField = Annotated[
    float,
    PlainValidator(parse_duration),
    PlainSerializer(format_duration),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "examples": ["500ms", "1.5s", "2m"]},
                {"type": "number", "exclusiveMinimum": 0},
            ],
            "description": "ms, s, m or h, or a number of seconds",
        }
    ),
]
SizeField = Annotated[
    int,
    PlainValidator(parse_size),
    PlainSerializer(format_size),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "examples": ["10MiB", "500KB"]},
                {"type": "integer", "minimum": 1},
            ],
            "description": "B, KB, MB, GB (decimal), KiB, MiB, GiB (binary), or bytes as a number",
        }
    ),
]
RateField = Annotated[
    AbsoluteRate | ShareRate,
    PlainValidator(parse_rate),
    PlainSerializer(str),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "examples": ["50Mbit", "10%"]},
                {"type": "integer", "minimum": 1},
            ],
            "description": "bit, Kbit, Mbit, Gbit (decimal), a % of the port rate, or bit/s",
        }
    ),
]


class ElephantSpec(BaseModel):
    """When a flow counts as an elephant, and the class it then moves to.

    ``bytes`` alone is PIAS: every flow starts in the latency class and the big
    ones fall out of it, however they pace themselves.  ``rate`` (held for
    ``for``) catches a steady stream before it has sent much.  With both, either
    one demotes.  A rate-detected elephant is released when its rate stays
    below ``release_ratio`` of the threshold for ``release_after``: the gap
    between the two thresholds is what keeps a flow hovering around the
    threshold from flapping between queues.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    min_bytes: SizeField | None = Field(default=None, alias="bytes")
    rate: RateField | None = None
    sustain: DurationField | None = Field(
        default=None,
        alias="for",
        description="how long the rate must hold; defaults to one polling interval",
    )
    traffic_class: str = Field(alias="class", min_length=1)
    release_ratio: float = Field(
        default=DEFAULT_RELEASE_RATIO,
        gt=0,
        lt=1,
        description="a rate-detected elephant is calm below this fraction of `rate`",
    )

    @model_validator(mode="after")
    def _check_criteria(self) -> ElephantSpec:
        if self.min_bytes is None and self.rate is None:
            raise ValueError("an elephant needs 'bytes', 'rate' or both (e.g. bytes: 10MiB)")
        if self.rate is None and self.sustain is not None:
            raise ValueError("'for' says how long 'rate' must hold: it needs 'rate'")
        if self.rate is None and "release_ratio" in self.model_fields_set:
            raise ValueError(
                "'release_ratio' is a fraction of 'rate': it needs 'rate'"
                " (a 'bytes' elephant is released when idle)"
            )
        return self


class DetectionSpec(BaseModel):
    """How often the counting table is read, and how long an override outlives its flow."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    interval: DurationField = 0.5
    elephant: ElephantSpec
    release_after: DurationField = Field(
        default=30.0,
        validate_default=True,  # the default must still outlast a long interval
        description="idle time after which an override is dropped",
    )
    max_tracked: int = Field(default=DEFAULT_MAX_TRACKED, ge=1, le=MAX_MAX_TRACKED)

    @field_validator("interval")
    @classmethod
    def _check_interval(cls, value: float) -> float:
        if not MIN_INTERVAL_S <= value <= MAX_INTERVAL_S:
            raise ValueError(
                f"interval must be between {format_duration(MIN_INTERVAL_S)} and"
                f" {format_duration(MAX_INTERVAL_S)}, got {format_duration(value)}"
            )
        return value

    @field_validator("release_after")
    @classmethod
    def _check_release_after(cls, value: float, info: ValidationInfo) -> float:
        """Idleness is only seen at poll times: a shorter wait could not be told from a gap."""
        interval = info.data.get("interval")  # absent when the interval itself is invalid
        if interval is not None and value <= interval:
            raise ValueError(
                f"release_after ({format_duration(value)}) must be longer than"
                f" interval ({format_duration(interval)})"
            )
        return value

    @property
    def sustain_s(self) -> float:
        """How long a rate must hold; one interval when ``for`` is not given."""
        sustain = self.elephant.sustain
        return self.interval if sustain is None else sustain


def detection_errors(
    spec: DetectionSpec,
    class_names: Collection[str],
    default_class: str | None = None,
    path: str = "detection",
) -> list[FieldError]:
    """Problems that need the rest of the policy: the elephant class must exist, and move flows.

    ``default_class`` is where undetected flows already are; demoting to it
    would install overrides that change nothing.
    """
    name = spec.elephant.traffic_class
    where = f"{path}.elephant.class"
    if name not in class_names:
        known = ", ".join(class_names)
        return [FieldError(where, f"unknown class {name!r} (classes: {known})")]
    if name == default_class:
        return [
            FieldError(
                where,
                f"class {name!r} is the default class: detected elephants would not move;"
                " name the class elephants should move to (e.g. training)",
            )
        ]
    return []
