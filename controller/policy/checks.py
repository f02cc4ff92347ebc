"""Checks that span several fields of a structurally valid policy."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

from controller.policy.detection import detection_errors
from controller.policy.errors import FieldError
from controller.policy.forwarding import forwarding_errors
from controller.policy.limits import MAX_POLICY_ENTRIES, rule_entries
from controller.policy.model import Policy
from controller.policy.tenants import tenant_errors
from controller.policy.units import ShareRate, format_rate


def semantic_errors(policy: Policy) -> list[FieldError]:
    """Every cross-field problem, in document order."""
    return [
        *_class_reference_errors(policy),
        *_duplicate_rule_names(policy),
        *_dscp_collisions(policy),
        *_rate_errors(policy),
        *(
            detection_errors(policy.detection, policy.class_names, policy.default_class)
            if policy.detection is not None
            else []
        ),
        *forwarding_errors(policy.forwarding, policy.class_names, policy.detection),
        *tenant_errors(policy.tenants),
        *_size_errors(policy),
    ]


def _known(policy: Policy) -> str:
    return ", ".join(policy.class_names)


def _class_reference_errors(policy: Policy) -> Iterator[FieldError]:
    if policy.default_class not in policy.classes:
        yield FieldError(
            "default_class",
            f"unknown class {policy.default_class!r} (classes: {_known(policy)})",
        )
    for index, rule in enumerate(policy.rules):
        if rule.traffic_class not in policy.classes:
            yield FieldError(
                f"rules[{index}].class",
                f"unknown class {rule.traffic_class!r} (classes: {_known(policy)})",
            )


def _duplicate_rule_names(policy: Policy) -> Iterator[FieldError]:
    first_seen: dict[str, int] = {}
    for index, rule in enumerate(policy.rules):
        if rule.name in first_seen:
            yield FieldError(
                f"rules[{index}].name",
                f"duplicate rule name {rule.name!r} (also rules[{first_seen[rule.name]}])",
            )
        else:
            first_seen[rule.name] = index


def _dscp_collisions(policy: Policy) -> Iterator[FieldError]:
    """On the userspace datapath a tc filter steers by DSCP, so each class needs its own."""
    owner: dict[int, str] = {}
    for name, traffic_class in policy.classes.items():
        if traffic_class.dscp in owner:
            yield FieldError(
                f"classes.{name}.dscp",
                f"DSCP {traffic_class.dscp} is already used by class {owner[traffic_class.dscp]!r};"
                " each class needs its own DSCP to get its own queue",
            )
        else:
            owner[traffic_class.dscp] = name


def _rate_errors(policy: Policy) -> Iterator[FieldError]:
    shares = sum(
        (c.min_rate.fraction for c in policy.classes.values() if isinstance(c.min_rate, ShareRate)),
        Fraction(0),
    )
    if shares > 1:
        yield FieldError(
            "classes",
            f"min_rate shares add up to {float(shares * 100):g}%, more than 100% of the port rate",
        )
        return
    port_rates = {"ports.rate": policy.ports.rate}
    port_rates.update({f"ports.overrides.{n}": r for n, r in policy.ports.overrides.items()})
    for path, port_rate in port_rates.items():
        guaranteed = sum(c.min_rate.resolve(port_rate.bps) for c in policy.classes.values())
        if guaranteed > port_rate.bps:
            yield FieldError(
                path,
                f"class min_rate values add up to {format_rate(guaranteed)},"
                f" above this port rate of {port_rate}",
            )
    for name, traffic_class in policy.classes.items():
        if traffic_class.max_rate is None:
            continue
        for port_rate in port_rates.values():
            low = traffic_class.min_rate.resolve(port_rate.bps)
            high = traffic_class.max_rate.resolve(port_rate.bps)
            if high < low:
                yield FieldError(
                    f"classes.{name}.max_rate",
                    f"max_rate {traffic_class.max_rate} is below min_rate"
                    f" {traffic_class.min_rate} on a {port_rate} port",
                )
                break


def _size_errors(policy: Policy) -> Iterator[FieldError]:
    entries = rule_entries(policy.rules)
    if entries > MAX_POLICY_ENTRIES:
        yield FieldError(
            "rules",
            f"the rules expand to {entries} OpenFlow entries per switch, more than the limit"
            f" of {MAX_POLICY_ENTRIES}: use fewer rules, or wider port ranges and networks",
        )
