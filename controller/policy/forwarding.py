"""The ``forwarding`` section: who decides where packets go.

``normal`` (the default) leaves forwarding to OVS's own L2 switch (``NORMAL``):
right for one switch, or for switches that already forward.  ``fabric`` makes
the controller route a leaf-spine itself: it discovers links (LLDP) and hosts,
answers ARP, spreads flows over every shortest path with select groups, and,
with ``placement``, pins big flows of throughput classes on the least-loaded
path.  A fabric with loops then needs no spanning tree.
"""

from __future__ import annotations

from collections.abc import Collection
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    WithJsonSchema,
    model_validator,
)

from controller.policy.detection import DetectionSpec, DurationField
from controller.policy.errors import FieldError
from controller.policy.units import AbsoluteRate, parse_absolute_rate

_RATE_SCHEMA = WithJsonSchema(
    {"type": "string", "examples": ["2Mbit"], "description": "bit/s with a unit"}
)
FlowRateField = Annotated[
    AbsoluteRate, PlainValidator(parse_absolute_rate), PlainSerializer(str), _RATE_SCHEMA
]


class ForwardingMode(StrEnum):
    NORMAL = "normal"
    FABRIC = "fabric"


class PlacementSpec(BaseModel):
    """Elephants of ``classes`` get a path of their own, chosen on measured link load."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    classes: list[str] = Field(
        default_factory=list,
        description="classes whose flows are placed; empty: the detection's elephant class",
    )
    min_rate: FlowRateField = AbsoluteRate(1_000_000)
    """Smaller flows stay on the hashed (ECMP) paths: moving them gains nothing."""
    interval: DurationField = Field(default=0.5, ge=0.1, le=60)
    """Port counters and flow rates are read, and placement re-run, this often."""
    hold: DurationField = Field(default=5.0, ge=0, le=3600)
    """A flow moved for balance is not moved again sooner (a failed link moves it at once)."""


class DiscoverySpec(BaseModel):
    """LLDP on every port every ``lldp_interval``; a link unseen for ``link_timeout`` is gone."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lldp_interval: DurationField = Field(default=1.0, ge=0.1, le=60)
    link_timeout: DurationField = Field(default=3.5, ge=0.3, le=600)

    @model_validator(mode="after")
    def _timeout_covers_intervals(self) -> DiscoverySpec:
        if self.link_timeout < 2 * self.lldp_interval:
            raise ValueError(
                "link_timeout must be at least twice lldp_interval, or one lost LLDP frame"
                " takes a healthy link down"
            )
        return self


class ForwardingSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: ForwardingMode = ForwardingMode.NORMAL
    placement: PlacementSpec | None = Field(default_factory=PlacementSpec)
    """``null``: hashing only (every flow on the select groups)."""
    discovery: DiscoverySpec = Field(default_factory=DiscoverySpec)
    punt_rate: int = Field(default=1000, ge=10, le=100_000)
    """Packets per second each switch may send the controller (ARP, LLDP, unknown hosts);
    an OpenFlow meter drops the rest, so a flood of unknown sources cannot swamp it."""

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        """``forwarding: fabric`` is ``forwarding: {mode: fabric}``."""
        if isinstance(value, str):
            return {"mode": value}
        return value

    @property
    def fabric(self) -> bool:
        return self.mode is ForwardingMode.FABRIC

    def placement_classes(self, detection: DetectionSpec | None) -> frozenset[str]:
        """The classes whose flows are placed (none when placement is off)."""
        if not self.fabric or self.placement is None:
            return frozenset()
        if self.placement.classes:
            return frozenset(self.placement.classes)
        if detection is not None:
            return frozenset({detection.elephant.traffic_class})
        return frozenset()


def forwarding_errors(
    spec: ForwardingSpec, class_names: Collection[str], detection: DetectionSpec | None
) -> list[FieldError]:
    """What needs the rest of the policy: the classes exist, and flows can be measured."""
    errors: list[FieldError] = []
    if spec.placement is None or not spec.fabric:
        return errors
    for index, name in enumerate(spec.placement.classes):
        if name not in class_names:
            errors.append(
                FieldError(
                    f"forwarding.placement.classes[{index}]",
                    f"unknown class {name!r} (classes: {', '.join(class_names)})",
                )
            )
    if spec.placement.classes and detection is None:
        errors.append(
            FieldError(
                "forwarding.placement",
                "placement needs a detection section: flow rates are read from its counting"
                " table; add one, or write `placement: null` to hash every flow",
            )
        )
    return errors
