"""The policy document: traffic classes, classification rules and port rates.

The pydantic models check each field on its own; ``semantic_errors`` checks
what spans fields (a rule naming a class that does not exist, two classes with
one DSCP, guarantees above 100 %).  ``controller.policy.load`` runs both and
reports every error at once.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    WithJsonSchema,
)

from controller.policy.detection import DetectionSpec
from controller.policy.forwarding import ForwardingSpec
from controller.policy.match import MatchSpec
from controller.policy.quotas import Quotas
from controller.policy.tenants import MAX_TENANTS, Tenant
from controller.policy.units import (
    AbsoluteRate,
    ShareRate,
    parse_absolute_rate,
    parse_rate,
)

_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_.-]{0,62}$"
_RATE_SCHEMA = WithJsonSchema(
    {"type": "string", "examples": ["50Mbit", "20%"], "description": "bit/s units or % of port"}
)

RateField = Annotated[
    AbsoluteRate | ShareRate, PlainValidator(parse_rate), PlainSerializer(str), _RATE_SCHEMA
]
PortRateField = Annotated[
    AbsoluteRate, PlainValidator(parse_absolute_rate), PlainSerializer(str), _RATE_SCHEMA
]
Name = Annotated[str, Field(pattern=_NAME_PATTERN)]

Share = Literal["per-flow", "per-job"]
PER_FLOW: Share = "per-flow"
PER_JOB: Share = "per-job"


class TrafficClass(BaseModel):
    """One class: one queue on every port, one DSCP on the wire.

    ``priority`` is the HTB priority (0 is served first when queues compete for
    spare bandwidth); ``min_rate`` is the guaranteed share; ``max_rate`` caps
    borrowing and defaults to the whole port.  ``share`` says who shares the
    class's bandwidth on a port: its flows (``per-flow``, one queue), or its
    registered jobs in proportion to their weights (``per-job``, a queue per job:
    ``controller.qos.shares``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    priority: int = Field(ge=0, le=7)
    dscp: int = Field(ge=0, le=63)
    min_rate: RateField
    max_rate: RateField | None = None
    share: Share = Field(
        default=PER_FLOW,
        description="per-flow: the class's flows share one queue; per-job: each registered"
        " job of the class gets a queue and a share in proportion to its weight",
    )


class Rule(BaseModel):
    """Ordered classification rule: the first rule whose match fits sets the class."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: Name
    match: MatchSpec
    traffic_class: Name = Field(alias="class")
    bidirectional: bool = Field(
        default=True,
        description="also match the reverse direction (src/dst swapped): replies share the class",
    )


class PortRates(BaseModel):
    """Egress rate (the HTB ceiling) of switch ports, by OVS port name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rate: PortRateField = AbsoluteRate(10_000_000_000)
    overrides: dict[Name, PortRateField] = Field(default_factory=dict)

    def configured_rate(self, port_name: str) -> AbsoluteRate:
        return self.overrides.get(port_name, self.rate)


class Policy(BaseModel):
    """A whole policy; the controller installs all of it or none of it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    classes: dict[Name, TrafficClass] = Field(min_length=1, max_length=64)
    default_class: Name
    rules: list[Rule] = Field(default_factory=list, max_length=4096)  # = tables.MAX_RULES
    ports: PortRates = Field(default_factory=PortRates)
    detection: DetectionSpec | None = None
    """Elephant detection for flows no rule claims; off when absent."""
    forwarding: ForwardingSpec = Field(default_factory=ForwardingSpec)
    """``normal`` (OVS L2 switching) or ``fabric`` (the controller routes a leaf-spine)."""
    tenants: dict[Name, Tenant] = Field(default_factory=dict, max_length=MAX_TENANTS)
    """Teams sharing the fabric, by the networks of their hosts: scopes tenant tokens."""
    quotas: Quotas = Field(default_factory=Quotas)
    """Jobs per tenant, and rule and job entries per switch (``controller.policy.quotas``)."""

    @property
    def class_names(self) -> tuple[str, ...]:
        """Classes in document order; a class's position is its queue number."""
        return tuple(self.classes)

    def queue_id(self, class_name: str) -> int:
        return self.class_names.index(class_name)
