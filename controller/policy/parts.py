"""What the cross-field checks read: a valid policy, or whatever parsed of an invalid one.

A document with a structural error (``udp_dst: 70000``) has no ``Policy``,
but its other parts still say things worth reporting in the same pass: a
rule naming class ``besteffort``, two classes with one DSCP, guarantees of
120 %.  So an invalid document is read again here, one section, one class,
one rule and one field at a time, and every value that is valid on its own
is kept; ``controller.policy.checks`` runs on what was kept.  A check that
needs a missing value skips it: the structural error already names it.

Pure: documents in, frozen values out.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from controller.policy.detection import DetectionSpec
from controller.policy.forwarding import ForwardingSpec
from controller.policy.model import PER_JOB, Policy, PortRates, Rule, TrafficClass
from controller.policy.quotas import Quotas
from controller.policy.tenants import Tenant
from controller.policy.units import AbsoluteRate, Rate

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class ClassParts:
    """One class's fields the checks read; None when absent or invalid."""

    dscp: int | None = None
    min_rate: Rate | None = None
    max_rate: Rate | None = None
    per_job: bool = False
    """``share: per-job`` (absent, invalid or ``per-flow``: False)."""


@dataclass(frozen=True, slots=True)
class RuleParts:
    """One rule's name and class (None when absent or invalid), and the whole rule when it
    is valid: only a valid match can be counted against the entry limit."""

    name: str | None = None
    traffic_class: str | None = None
    rule: Rule | None = None


@dataclass(frozen=True, slots=True)
class PolicyParts:
    """A policy as far as it parsed; a valid policy fills every field.

    ``class_names`` holds every class the document names, valid or not: a rule
    naming a class whose DSCP is out of range names a class that exists, and
    is not also told it is unknown.  Empty when the ``classes`` section is
    missing or not a mapping: then no reference can be judged.
    ``port_rates`` maps the path of each parsed port rate to the rate.
    ``detection_known`` is false when a detection section is there but invalid:
    checks that ask whether detection is configured cannot tell.
    """

    class_names: tuple[str, ...] = ()
    classes: Mapping[str, ClassParts] = field(default_factory=dict)
    default_class: str | None = None
    rules: Mapping[int, RuleParts] = field(default_factory=dict)
    port_rates: Mapping[str, AbsoluteRate] = field(default_factory=dict)
    detection: DetectionSpec | None = None
    detection_known: bool = True
    forwarding: ForwardingSpec | None = None
    tenants: Mapping[str, Tenant] = field(default_factory=dict)
    quotas: Quotas | None = None


def policy_parts(policy: Policy) -> PolicyParts:
    """A valid policy, whole."""
    return PolicyParts(
        class_names=policy.class_names,
        classes={
            name: ClassParts(c.dscp, c.min_rate, c.max_rate, c.share == PER_JOB)
            for name, c in policy.classes.items()
        },
        default_class=policy.default_class,
        rules={
            index: RuleParts(rule.name, rule.traffic_class, rule)
            for index, rule in enumerate(policy.rules)
        },
        port_rates=_port_rates(policy.ports),
        detection=policy.detection,
        forwarding=policy.forwarding,
        tenants=policy.tenants,
        quotas=policy.quotas,
    )


def document_parts(document: Mapping[str, Any]) -> PolicyParts:
    """What parsed of a document ``Policy`` rejected: each value that is valid on its own.

    Indices and names are the document's, so an error found here carries the
    same path it would have in a valid document.
    """
    sections = valid_fields(Policy, document)
    classes = document.get("classes")
    class_names = (
        tuple(k for k in classes if isinstance(k, str)) if isinstance(classes, dict) else ()
    )
    detection = sections.get("detection")
    return PolicyParts(
        class_names=class_names,
        classes=_classes(classes),
        default_class=sections.get("default_class"),
        rules=_rules(document.get("rules", [])),
        port_rates=_document_port_rates(document.get("ports", {})),
        detection=detection,
        detection_known=detection is not None or document.get("detection") is None,
        forwarding=sections.get("forwarding"),
        tenants=_valid_items(document.get("tenants", {}), Tenant),
        quotas=sections.get("quotas"),
    )


def valid_fields(model: type[BaseModel], raw: object) -> dict[str, Any]:
    """The fields of ``model`` in ``raw`` that are valid on their own, parsed, by field name;
    an absent field with a default gets it.

    Only a field's own type is checked, not the model's validators: it suits
    models whose checks are all in their field types (``Policy``,
    ``TrafficClass``, ``Rule``, ``PortRates``), which a test asserts.
    """
    if not isinstance(raw, dict):
        return {}
    by_name = bool(model.model_config.get("populate_by_name"))
    values: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        # A rule's class is written ``class``; with populate_by_name ``traffic_class`` is too.
        keys = (info.alias or name, name) if by_name else (info.alias or name,)
        key = next((k for k in keys if k in raw), None)
        if key is None:
            if not info.is_required():
                values[name] = info.get_default(call_default_factory=True)
            continue
        try:
            values[name] = _field_adapter(model, name).validate_python(raw[key])
        except ValidationError:
            continue
    return values


@functools.cache
def _field_adapter(model: type[BaseModel], name: str) -> TypeAdapter[Any]:
    info = model.model_fields[name]
    # The field's type with its constraints (``ge``, ``pattern``, parsers), rebuilt at run time.
    annotated: Any = (
        Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
    )
    return TypeAdapter(annotated)


def _classes(raw: object) -> dict[str, ClassParts]:
    if not isinstance(raw, dict):
        return {}
    parts: dict[str, ClassParts] = {}
    for name, body in raw.items():
        if isinstance(name, str):
            values = valid_fields(TrafficClass, body)
            parts[name] = ClassParts(
                values.get("dscp"),
                values.get("min_rate"),
                values.get("max_rate"),
                values.get("share") == PER_JOB,
            )
    return parts


def _rules(raw: object) -> dict[int, RuleParts]:
    if not isinstance(raw, list):
        return {}
    parts: dict[int, RuleParts] = {}
    for index, body in enumerate(raw):
        values = valid_fields(Rule, body)
        rule = _valid(Rule, body)
        parts[index] = RuleParts(values.get("name"), values.get("traffic_class"), rule)
    return parts


def _document_port_rates(raw: object) -> dict[str, AbsoluteRate]:
    if not isinstance(raw, dict):
        return {}
    rates: dict[str, AbsoluteRate] = {}
    rate = valid_fields(PortRates, raw).get("rate")
    if rate is not None:
        rates["ports.rate"] = rate
    overrides = raw.get("overrides", {})
    if isinstance(overrides, dict):
        adapter = _field_adapter(PortRates, "rate")
        for name, value in overrides.items():
            try:
                rates[f"ports.overrides.{name}"] = adapter.validate_python(value)
            except ValidationError:
                continue
    return rates


def _port_rates(ports: PortRates) -> dict[str, AbsoluteRate]:
    rates = {"ports.rate": ports.rate}
    rates.update({f"ports.overrides.{name}": rate for name, rate in ports.overrides.items()})
    return rates


def _valid_items(raw: object, model: type[M]) -> dict[str, M]:
    if not isinstance(raw, dict):
        return {}
    items = {name: _valid(model, body) for name, body in raw.items() if isinstance(name, str)}
    return {name: item for name, item in items.items() if item is not None}


def _valid(model: type[M], raw: object) -> M | None:
    try:
        return model.model_validate(raw)
    except ValidationError:
        return None
