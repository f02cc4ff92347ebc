"""Unknown keys: the accepted fields at a document location, and the did-you-mean message."""

from __future__ import annotations

import pytest

from controller.policy.model import Policy
from controller.policy.unknown import accepted_keys, unknown_field_message


@pytest.mark.parametrize(
    ("location", "keys"),
    [
        (
            (),
            (
                "classes",
                "default_class",
                "rules",
                "ports",
                "detection",
                "forwarding",
                "tenants",
                "quotas",
            ),
        ),
        (("classes", "training"), ("priority", "dscp", "min_rate", "max_rate", "share")),
        (("rules", 7), ("name", "match", "class", "bidirectional")),
        (("detection", "elephant"), ("rate", "for", "bytes", "class", "release_ratio")),
        (("forwarding", "placement"), ("classes", "min_rate", "interval", "hold")),
        (("forwarding", "discovery"), ("lldp_interval", "link_timeout")),
        (("tenants", "red"), ("networks",)),
        (("quotas",), ("jobs_per_tenant", "entries_per_switch")),
    ],
)
def test_accepted_keys_follow_the_location_and_use_aliases(
    location: tuple[str | int, ...], keys: tuple[str, ...]
) -> None:
    """A rule is written with ``class`` (the alias), so that is what is suggested."""
    assert accepted_keys(Policy, location) == keys


@pytest.mark.parametrize(
    "location",
    [
        ("ports", "overrides"),  # a mapping of port names: any key is a port
        ("classes",),  # a mapping of class names
        ("nowhere",),
        ("rules", "first"),  # a list is indexed by numbers
        ("classes", "training", "dscp"),  # a number has no keys
    ],
)
def test_no_keys_where_no_model_is(location: tuple[str | int, ...]) -> None:
    assert accepted_keys(Policy, location) == ()


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("min_rte", "unknown field 'min_rte' (did you mean 'min_rate'?)"),
        ("MIN_RATE", "unknown field 'MIN_RATE' (did you mean 'min_rate'?)"),
        ("DSCP", "unknown field 'DSCP' (did you mean 'dscp'?)"),
        ("colour", "unknown field 'colour' (fields: priority, dscp, min_rate, max_rate)"),
    ],
)
def test_the_closest_field_or_all_of_them(key: str, message: str) -> None:
    assert unknown_field_message(key, ("priority", "dscp", "min_rate", "max_rate")) == message


def test_no_accepted_fields_known() -> None:
    assert unknown_field_message("why", ()) == "unknown field 'why'"
