"""The ``detection`` section: how flows no rule names are promoted to the elephant class.

Rules classify what an operator knows about.  Everything else starts in the
default (latency) class, and the controller demotes a flow to the elephant
class once it is throughput-bound: it has kept up ``rate`` for ``for``, or
sent ``bytes`` while keeping it up.  A flow is an elephant because of what it
needs now, not because of how much it has sent over its life: a long-lived
inference connection sends gigabytes over hours at a small share of the port
and must stay in the latency class.  The override is dropped once the flow
has been idle, or below ``release_ratio`` of the rate, for ``release_after``.

The models check each field and what spans the section; whether the class
exists, and whether it differs from the default class, needs the rest of the
policy, so ``detection_errors`` checks that for ``controller.policy.checks``.
"""

from __future__ import annotations

from collections.abc import Collection
from fractions import Fraction
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

DEFAULT_RATE = ShareRate(Fraction(1, 10))
"""Twice the share a busy inference connection keeps up (5 %), so request bursts stay below it."""

DEFAULT_SUSTAIN_INTERVALS = 2
"""One window above the rate can be a burst of responses; two in a row is a transfer."""

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
            "description": "bit, Kbit, Mbit, Gbit (decimal), a % of ports.rate, or bit/s",
        }
    ),
]


class ElephantSpec(BaseModel):
    """When a flow counts as an elephant, and the class it then moves to.

    An elephant is a flow that is *throughput-bound*: it keeps up ``rate`` (a
    share of the port, or bit/s) from each growth of its counter to the next for ``for``, or
    sends ``bytes`` while keeping it up.  Bytes sent below the rate never
    count, so a keep-alive inference connection carrying requests at a small
    share of the port is never demoted however much it sends over its life,
    while a bulk transfer is caught within ``for`` (sooner with ``bytes``).

    A share resolves against ``ports.rate``, one threshold per switch: the
    counting table learns a flow's 5-tuple, not the port it leaves by, so the
    share cannot follow each port's ceiling.  Where a port is too slow for the
    threshold, ``controller.policy.warnings`` says so.

    ``rate`` defaults to ``DEFAULT_RATE``, so a section that names only
    ``bytes`` (once PIAS, where a flow's total decided) now means bytes sent
    while above that share.

    An elephant is released when its rate stays below ``release_ratio`` of the
    threshold for ``release_after``: the gap between the two levels is what
    keeps a flow hovering around the threshold from flapping between queues.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    rate: RateField = Field(
        default=DEFAULT_RATE,
        description=(
            "the rate a flow must keep up to count as bulk; default 10% of ports.rate"
            " (not of each port: a port slower than this is warned about)"
        ),
    )
    sustain: DurationField | None = Field(
        default=None,
        alias="for",
        description="how long the rate must hold without a break; defaults to two intervals",
    )
    min_bytes: SizeField | None = Field(
        default=None,
        alias="bytes",
        description="demote sooner once this much was sent while at or above `rate`",
    )
    traffic_class: str = Field(alias="class", min_length=1)
    release_ratio: float = Field(
        default=DEFAULT_RELEASE_RATIO,
        gt=0,
        lt=1,
        description="an elephant is calm below this fraction of `rate`",
    )


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
        """How long a rate must hold; two intervals when ``for`` is not given."""
        sustain = self.elephant.sustain
        return DEFAULT_SUSTAIN_INTERVALS * self.interval if sustain is None else sustain


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
