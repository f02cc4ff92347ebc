"""Checks that span several fields: of a valid policy, or of what parsed of an invalid one.

They read ``PolicyParts`` so that one bad field does not hide the rest: a
check skips what did not parse (its structural error names it) and judges
everything else, so a file is fixed in one pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

from controller.policy.detection import detection_errors
from controller.policy.errors import FieldError
from controller.policy.forwarding import forwarding_errors
from controller.policy.limits import (
    DSCP_VALUES,
    MAX_JOB_QUEUES,
    MAX_POLICY_ENTRIES,
    rule_entries,
)
from controller.policy.model import Policy
from controller.policy.parts import PolicyParts, policy_parts
from controller.policy.quotas import quota_errors
from controller.policy.tenants import tenant_errors
from controller.policy.units import ShareRate, format_rate


def semantic_errors(policy: Policy) -> list[FieldError]:
    """Every cross-field problem of a valid policy, in document order."""
    return cross_field_errors(policy_parts(policy))


def cross_field_errors(parts: PolicyParts) -> list[FieldError]:
    """Every cross-field problem among the parts that parsed, in document order.

    References to classes are judged only when the classes are known: with
    no ``classes`` mapping every name would be "unknown", which says nothing.
    """
    classes_known = bool(parts.class_names)
    detection = (
        detection_errors(parts.detection, parts.class_names, parts.default_class)
        if parts.detection is not None and classes_known
        else []
    )
    forwarding = (
        forwarding_errors(parts.forwarding, parts.class_names, parts.detection)
        if parts.forwarding is not None and classes_known
        else []
    )
    if not parts.detection_known:
        # A detection section is there but invalid: "placement needs a detection section"
        # would be false; its own errors say what to fix.
        forwarding = [e for e in forwarding if e.path != "forwarding.placement"]
    return [
        *(_class_reference_errors(parts) if classes_known else []),
        *_duplicate_rule_names(parts),
        *_dscp_collisions(parts),
        *_job_share_errors(parts),
        *_rate_errors(parts),
        *detection,
        *forwarding,
        *tenant_errors(parts.tenants),
        *_size_errors(parts),
        *_quota_errors(parts),
    ]


def _known(parts: PolicyParts) -> str:
    return ", ".join(parts.class_names)


def _class_reference_errors(parts: PolicyParts) -> Iterator[FieldError]:
    if parts.default_class is not None and parts.default_class not in parts.class_names:
        yield FieldError(
            "default_class",
            f"unknown class {parts.default_class!r} (classes: {_known(parts)})",
        )
    for index, rule in parts.rules.items():
        if rule.traffic_class is not None and rule.traffic_class not in parts.class_names:
            yield FieldError(
                f"rules[{index}].class",
                f"unknown class {rule.traffic_class!r} (classes: {_known(parts)})",
            )


def _duplicate_rule_names(parts: PolicyParts) -> Iterator[FieldError]:
    first_seen: dict[str, int] = {}
    for index, rule in parts.rules.items():
        if rule.name is None:
            continue
        if rule.name in first_seen:
            yield FieldError(
                f"rules[{index}].name",
                f"duplicate rule name {rule.name!r} (also rules[{first_seen[rule.name]}])",
            )
        else:
            first_seen[rule.name] = index


def _job_share_errors(parts: PolicyParts) -> Iterator[FieldError]:
    """Each job queue of a per-job class takes a DSCP no class uses (``controller.qos.shares``):
    refuse the per-job classes whose queues the free code points cannot hold."""
    used = {c.dscp for c in parts.classes.values() if c.dscp is not None}
    free = DSCP_VALUES - len(used)
    for name, traffic_class in parts.classes.items():
        if not traffic_class.per_job:
            continue
        if free < MAX_JOB_QUEUES:
            yield FieldError(
                f"classes.{name}.share",
                f"a per-job class needs {MAX_JOB_QUEUES} DSCPs no class uses for its job"
                f" queues; {max(free, 0)} left: use fewer classes or fewer per-job classes",
            )
        free -= MAX_JOB_QUEUES


def _dscp_collisions(parts: PolicyParts) -> Iterator[FieldError]:
    """On the userspace datapath a tc filter steers by DSCP, so each class needs its own."""
    owner: dict[int, str] = {}
    for name, traffic_class in parts.classes.items():
        dscp = traffic_class.dscp
        if dscp is None:
            continue
        if dscp in owner:
            yield FieldError(
                f"classes.{name}.dscp",
                f"DSCP {dscp} is already used by class {owner[dscp]!r};"
                " each class needs its own DSCP to get its own queue",
            )
        else:
            owner[dscp] = name


def _rate_errors(parts: PolicyParts) -> Iterator[FieldError]:
    """Guarantees only add up, so those that parsed exceeding a port is already an error."""
    min_rates = {n: c.min_rate for n, c in parts.classes.items() if c.min_rate is not None}
    shares = sum(
        (rate.fraction for rate in min_rates.values() if isinstance(rate, ShareRate)),
        Fraction(0),
    )
    if shares > 1:
        yield FieldError(
            "classes",
            f"min_rate shares add up to {float(shares * 100):g}%, more than 100% of the port rate",
        )
        return
    for path, port_rate in parts.port_rates.items():
        guaranteed = sum(rate.resolve(port_rate.bps) for rate in min_rates.values())
        if guaranteed > port_rate.bps:
            yield FieldError(
                path,
                f"class min_rate values add up to {format_rate(guaranteed)},"
                f" above this port rate of {port_rate}",
            )
    for name, traffic_class in parts.classes.items():
        min_rate, max_rate = traffic_class.min_rate, traffic_class.max_rate
        if min_rate is None or max_rate is None:
            continue
        for port_rate in parts.port_rates.values():
            low = min_rate.resolve(port_rate.bps)
            high = max_rate.resolve(port_rate.bps)
            if high < low:
                yield FieldError(
                    f"classes.{name}.max_rate",
                    f"max_rate {max_rate} is below min_rate {min_rate} on a {port_rate} port",
                )
                break


def _size_errors(parts: PolicyParts) -> Iterator[FieldError]:
    """Counts the valid rules only: a lower bound, so exceeding the limit is already an error."""
    entries = rule_entries(rule.rule for rule in parts.rules.values() if rule.rule is not None)
    if entries > MAX_POLICY_ENTRIES:
        yield FieldError(
            "rules",
            f"the rules expand to {entries} OpenFlow entries per switch, more than the limit"
            f" of {MAX_POLICY_ENTRIES}: use fewer rules, or wider port ranges and networks",
        )


def _quota_errors(parts: PolicyParts) -> list[FieldError]:
    """The rules must fit the entry quota they share with the jobs."""
    if parts.quotas is None:
        return []
    valid = (rule.rule for rule in parts.rules.values() if rule.rule is not None)
    return quota_errors(parts.quotas, rule_entries(valid))
