"""The policy's tenants section: networks validated, overlaps between tenants refused."""

from __future__ import annotations

from typing import Any

import pytest

from controller.policy.errors import PolicyError
from controller.policy.load import parse_policy
from controller.policy.tenants import tenants_of

BASE: dict[str, Any] = {
    "classes": {"inference": {"priority": 0, "dscp": 46, "min_rate": "20%"}},
    "default_class": "inference",
}


def errors_of(tenants: Any) -> str:
    with pytest.raises(PolicyError) as caught:
        parse_policy({**BASE, "tenants": tenants})
    return str(caught.value)


def test_tenants_are_optional_and_parsed() -> None:
    assert parse_policy(BASE).tenants == {}
    policy = parse_policy({**BASE, "tenants": {"blue": {"networks": ["10.1.0.0/16", "10.3.0.7"]}}})
    assert [str(n) for n in policy.tenants["blue"].networks] == ["10.1.0.0/16", "10.3.0.7/32"]


def test_overlaps_between_tenants_are_refused_at_the_later_network() -> None:
    message = errors_of(
        {
            "blue": {"networks": ["10.1.0.0/16", "10.1.0.0/24"]},  # its own overlap is harmless
            "red": {"networks": ["10.2.0.0/16", "10.1.2.0/24"]},
        }
    )
    assert "tenants.red.networks[1]: 10.1.2.0/24 overlaps 10.1.0.0/16 of tenant 'blue'" in message
    assert "1 error(s)" in message  # the second overlap is with the same tenant's network


@pytest.mark.parametrize(
    ("tenants", "expected"),
    [
        ({"blue": {"networks": []}}, "tenants.blue.networks"),
        ({"blue": {"networks": ["10.1.0.0/33"]}}, "tenants.blue.networks[0]: bad netmask"),
        ({"blue": {"networks": ["10.1.0.0/16"], "vlans": [1]}}, "tenants.blue.vlans"),
        ({"1blue": {"networks": ["10.1.0.0/16"]}}, "tenants.1blue"),
    ],
)
def test_bad_tenants_name_the_field(tenants: Any, expected: str) -> None:
    assert expected in errors_of(tenants)


def test_tenants_of_reads_only_the_section_of_a_stored_document() -> None:
    document = {"rules": "not even looked at", "tenants": {"red": {"networks": ["10.2.0.0/16"]}}}
    assert [str(n) for n in tenants_of(document)["red"].networks] == ["10.2.0.0/16"]
    assert tenants_of({}) == {}
    with pytest.raises(ValueError, match="tenants section is invalid"):
        tenants_of({"tenants": {"red": {"networks": "10.2.0.0/16"}}})
