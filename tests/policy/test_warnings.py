"""Valid policies whose settings would never act: each named by field, with the reason."""

from __future__ import annotations

from typing import Any

from controller.policy.load import parse_policy
from controller.policy.warnings import MAX_NAMED_PORTS, PolicyWarning, policy_warnings

M = 1_000_000
G = 1_000_000_000


def policy_with(document: dict[str, Any], **sections: Any) -> Any:
    return parse_policy({**document, **sections})


def test_the_base_policy_has_no_warnings(document: dict[str, Any]) -> None:
    assert policy_warnings(parse_policy(document)) == []


def test_default_share_above_an_overridden_port_is_warned(document: dict[str, Any]) -> None:
    # The trap as found: 10% of 10Gbit is 1Gbit/s, and a 100Mbit port never carries it.
    document["ports"] = {"rate": "10Gbit", "overrides": {"s1-eth1": "100Mbit"}}
    policy = policy_with(document, detection={"elephant": {"class": "training"}})
    [warning] = policy_warnings(policy)
    assert warning.path == "detection.elephant.rate"
    assert "10% of ports.rate 10Gbit = 1Gbit/s" in warning.reason
    assert "ports.overrides.s1-eth1 (100Mbit)" in warning.reason
    assert "never detected" in warning.reason
    assert "set an absolute rate below 100Mbit" in warning.reason
    assert str(warning) == f"detection.elephant.rate: {warning.reason}"


def test_a_rate_below_every_ceiling_is_not_warned(document: dict[str, Any]) -> None:
    document["ports"] = {"rate": "10Gbit", "overrides": {"s1-eth1": "100Mbit"}}
    policy = policy_with(document, detection={"elephant": {"rate": "50Mbit", "class": "training"}})
    assert policy_warnings(policy, {"s1-eth1": 100 * M, "s1-eth2": 10 * G}) == []


def test_an_absolute_rate_at_the_policy_rate_is_warned(document: dict[str, Any]) -> None:
    document["ports"] = {"rate": "1Gbit"}
    policy = policy_with(document, detection={"elephant": {"rate": "1Gbit", "class": "training"}})
    [warning] = policy_warnings(policy)
    assert warning.reason.startswith("1Gbit/s is at or above the ceiling of ports.rate (1Gbit)")
    assert "share" not in warning.reason


def test_live_ports_slower_than_the_threshold_are_named(document: dict[str, Any]) -> None:
    # A link speed caps a port's ceiling too (qos.plan.port_rate): the caller passes ceilings.
    document["ports"] = {"rate": "10Gbit"}
    policy = policy_with(document, detection={"elephant": {"class": "training"}})
    assert policy_warnings(policy, {"s1-eth1": 10 * G}) == []
    [warning] = policy_warnings(policy, {"s1-eth1": 10 * G, "s1-eth2": G, "s1-eth3": 100 * M})
    assert "port s1-eth2 (1Gbit), port s1-eth3 (100Mbit)" in warning.reason
    assert "port s1-eth1" not in warning.reason
    assert "below 100Mbit" in warning.reason


def test_a_live_overridden_port_is_named_once(document: dict[str, Any]) -> None:
    document["ports"] = {"rate": "10Gbit", "overrides": {"s1-eth1": "100Mbit"}}
    policy = policy_with(document, detection={"elephant": {"class": "training"}})
    [warning] = policy_warnings(policy, {"s1-eth1": 100 * M})
    assert warning.reason.count("s1-eth1") == 1


def test_many_slow_ports_are_counted_not_listed(document: dict[str, Any]) -> None:
    policy = policy_with(document, detection={"elephant": {"class": "training"}})
    ports = {f"s1-eth{n}": 100 * M for n in range(1, 21)}
    [warning] = policy_warnings(policy, ports)
    # s1-eth4 is also the document's 1Gbit override: named once, as the override
    assert f"and {20 - MAX_NAMED_PORTS} more" in warning.reason


def test_fabric_placement_without_detection_is_warned(document: dict[str, Any]) -> None:
    policy = policy_with(document, forwarding="fabric")
    assert policy_warnings(policy) == [
        PolicyWarning(
            "forwarding.placement",
            "placement is on (the default with `forwarding: fabric`) but there is no"
            " `detection` section: placement moves detected elephants, so it never runs and"
            " every flow stays on its hashed path; add a `detection` section, or write"
            " `placement: null` to hash every flow",
        )
    ]


def test_placement_that_can_run_or_is_off_is_not_warned(document: dict[str, Any]) -> None:
    detection = {"elephant": {"rate": "100Mbit", "class": "training"}}
    assert policy_warnings(policy_with(document, forwarding="fabric", detection=detection)) == []
    off = {"mode": "fabric", "placement": None}
    assert policy_warnings(policy_with(document, forwarding=off)) == []
    assert policy_warnings(policy_with(document, forwarding="normal")) == []


def test_an_unreachable_rate_in_fabric_mode_says_nothing_is_placed(
    document: dict[str, Any],
) -> None:
    policy = policy_with(
        document, forwarding="fabric", detection={"elephant": {"class": "training"}}
    )
    [warning] = policy_warnings(policy)
    assert "never detected (nor placed)" in warning.reason
