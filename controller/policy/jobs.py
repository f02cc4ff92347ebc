"""Jobs: a scheduler's word that some endpoints carry one class, for a while.

Rules say what an operator knows when writing the policy (RoCEv2 is
training).  A job says what only a scheduler knows at run time: which hosts
a training run landed on, and which ports it uses.  It names a class of the
active policy and expires by itself, so a scheduler that dies does not leave
its hosts pinned to a class forever.

The model checks each field on its own; whether the class exists needs the
active policy, so ``job_errors`` checks that, as ``semantic_errors`` does for
a policy.  ``JobSpec.document`` is the normalized form the store keeps:
``JobSpec.from_document`` reads it back, so a controller gets exactly the
ranges and networks the API validated.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from controller.policy.errors import FieldError
from controller.policy.limits import MAX_JOB_ENTRIES, job_entries
from controller.policy.match import (
    MAX_FLOWS_PER_RULE,
    Ipv4Field,
    PortRange,
    PortSet,
    port_prefixes,
)
from controller.policy.model import Name
from controller.policy.units import format_duration, parse_duration

DEFAULT_TTL_S = 3600.0
MAX_TTL_S = 7 * 24 * 3600.0
"""A week: longer than any run a scheduler would forget to renew, short enough to clean up."""

MAX_ENDPOINTS = 64

MAX_WEIGHT = 100
"""The largest job weight. Weights become shares of a class's bandwidth on a port; at
100:1 the lightest job's share is already under 1 % of the class, about where a
queue's rate stops being kept, so larger ratios would promise what the datapath
cannot give, and a typo (1000 for 10) would starve every other job."""


def _parse_ttl(value: object) -> float:
    seconds = parse_duration(value)
    if seconds > MAX_TTL_S:
        raise ValueError(
            f"ttl {value!r} is longer than 7 days ({format_duration(MAX_TTL_S)}):"
            " register the job again before it expires instead"
        )
    return seconds


def format_ports(ranges: tuple[PortRange, ...]) -> list[int | str]:
    """Merged ranges back in the form operators write: ``[22, "8000-8010"]``."""
    return [low if low == high else f"{low}-{high}" for low, high in ranges]


_DURATION_PATTERN = r"^\s*[0-9]+(\.[0-9]+)?\s*([mM][sS]|[sSmMhH])\s*$"

_PORT_ITEM: dict[str, Any] = {
    "anyOf": [
        {"type": "integer", "minimum": 0, "maximum": 65535},
        {"type": "string", "examples": ["8000", "8000-8010"]},
    ]
}
PortsField = Annotated[
    Annotated[PortSet, PlainSerializer(format_ports)] | None,
    WithJsonSchema(
        {
            "anyOf": [
                *_PORT_ITEM["anyOf"],
                {"type": "array", "items": _PORT_ITEM, "minItems": 1},
                {"type": "null"},
            ],
            "description": "A port, a range such as '8000-8010', or a list of those;"
            " absent: any port",
        }
    ),
]
TtlField = Annotated[
    float,
    PlainValidator(_parse_ttl),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": _DURATION_PATTERN, "examples": ["30s", "10m", "1h"]},
                {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TTL_S},
            ],
            "description": "How long the job lasts unless registered again: ms, s, m or h,"
            " or a number of seconds; at most 7 days",
        }
    ),
]


class Endpoint(BaseModel):
    """Hosts of the job, and optionally the ports it uses on them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ipv4: Ipv4Field
    ports: PortsField = None

    @field_validator("ports")
    @classmethod
    def _check_size(cls, value: tuple[PortRange, ...] | None) -> tuple[PortRange, ...] | None:
        """Each endpoint may become masked OpenFlow matches; bound them as a rule's are."""
        if value is not None and len(port_prefixes(value)) > MAX_FLOWS_PER_RULE:
            raise ValueError(
                f"these ports need {len(port_prefixes(value))} masked matches, more than"
                f" {MAX_FLOWS_PER_RULE}: use fewer or wider ranges"
            )
        return value


class JobSpec(BaseModel):
    """A job as a scheduler registers it: ``POST /v1/jobs``, ``flowlane jobs add``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Name
    traffic_class: Name = Field(alias="class", description="A class of the active policy")
    endpoints: list[Endpoint] = Field(min_length=1, max_length=MAX_ENDPOINTS)
    ttl: TtlField = DEFAULT_TTL_S
    weight: int = Field(
        default=1,
        ge=1,
        le=MAX_WEIGHT,
        strict=True,
        description="The job's share of its class's bandwidth on every port, relative to the"
        " other jobs of the class (2 gets twice what 1 gets, whatever number of flows each"
        f" opens): an integer from 1 to {MAX_WEIGHT}, because at {MAX_WEIGHT}:1 the lightest"
        " job's share is already under 1 % of the class, about where a queue's rate is no"
        " longer kept; default 1",
    )

    @field_validator("weight", mode="before")
    @classmethod
    def _check_weight(cls, value: object) -> object:
        """Say what a weight is, in place of pydantic's generic "valid integer": a scheduler
        writing ``"2"`` or ``2.5`` should learn the rule, not guess it (strict: no strings,
        floats or booleans, which JSON would otherwise turn into surprising integers)."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"weight must be a whole number from 1 to {MAX_WEIGHT}, not {value!r}")
        if not 1 <= value <= MAX_WEIGHT:
            raise ValueError(
                f"weight {value} is outside 1..{MAX_WEIGHT}: a job's share is relative to the"
                f" other jobs of its class, and beyond {MAX_WEIGHT}:1 the lightest job's share"
                " would be too small for a queue to keep"
            )
        return value

    @property
    def entries(self) -> int:
        """Classification entries the job costs on every switch: the bound the expansion
        limit and the ``entries_per_switch`` quota both judge (``job_entries``)."""
        return job_entries(endpoint.ports for endpoint in self.endpoints)

    @model_validator(mode="after")
    def _check_expansion(self) -> JobSpec:
        entries = self.entries
        if entries > MAX_JOB_ENTRIES:
            raise ValueError(
                f"the endpoints expand to {entries} OpenFlow entries per switch, more than the"
                f" limit of {MAX_JOB_ENTRIES}: fewer endpoints, fewer port ranges, or wider"
                " networks in place of single hosts"
            )
        return self

    def document(self) -> dict[str, Any]:
        """What the store keeps under the job's name: normalized, and JSON."""
        return self.model_dump(mode="json", by_alias=True, exclude={"name"})

    @staticmethod
    def from_document(name: str, document: dict[str, Any]) -> JobSpec:
        """The job a stored ``document`` describes (raises ``ValidationError`` if it is not one)."""
        return JobSpec.model_validate({**document, "name": name})


def stored_jobs(
    documents: Iterable[tuple[str, dict[str, Any]]],
) -> tuple[tuple[JobSpec, ...], list[tuple[str, ValidationError]]]:
    """The jobs of stored ``(name, document)`` pairs, and the ones that do not validate.

    The controller installs the jobs, and the API's dry-run plan shows them,
    from this one reading, so both skip the same invalid records.
    """
    specs: list[JobSpec] = []
    invalid: list[tuple[str, ValidationError]] = []
    for name, document in documents:
        try:
            specs.append(JobSpec.from_document(name, document))
        except ValidationError as exc:
            invalid.append((name, exc))
    return tuple(specs), invalid


def job_errors(spec: JobSpec, class_names: Collection[str]) -> list[FieldError]:
    """What needs the active policy: the job's class must be one of its classes."""
    if spec.traffic_class in class_names:
        return []
    known = ", ".join(class_names) or "none"
    return [FieldError("class", f"unknown class {spec.traffic_class!r} (classes: {known})")]
