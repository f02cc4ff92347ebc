"""Per-port queue layout: rates from the policy, the port and the link, and the tc filters."""

from __future__ import annotations

from typing import Any

import pytest

from controller.policy.load import parse_policy
from controller.policy.model import Policy
from controller.qos.plan import (
    HTB_MIN_RATE_BPS,
    PortQos,
    QueueSpec,
    TcFilter,
    htb_classid,
    plan_port_qos,
    port_rate,
    tc_filters,
    unmatched_overrides,
)

G = 1_000_000_000
M = 1_000_000


def make_policy(
    classes: dict[str, dict[str, Any]] | None = None,
    rate: str = "10Gbit",
    overrides: dict[str, str] | None = None,
) -> Policy:
    return parse_policy(
        {
            "classes": classes
            or {
                "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
                "training": {"priority": 1, "dscp": 26, "min_rate": "70%"},
                "best-effort": {"priority": 2, "dscp": 0, "min_rate": "10%"},
            },
            "default_class": next(iter(classes)) if classes else "best-effort",
            "ports": {"rate": rate, "overrides": overrides or {}},
        }
    )


def queues(qos: PortQos) -> dict[str, QueueSpec]:
    return {queue.class_name: queue for queue in qos.queues}


def test_shares_resolve_against_the_port_rate() -> None:
    qos = plan_port_qos(make_policy(), "s1-eth1", None)
    assert qos.port_name == "s1-eth1"
    assert qos.rate_bps == 10 * G
    assert qos.note == "policy rate"
    assert qos.queues == (
        QueueSpec(0, "inference", 2 * G, 10 * G, 0, 46),
        QueueSpec(1, "training", 7 * G, 10 * G, 1, 26),
        QueueSpec(2, "best-effort", 1 * G, 10 * G, 2, 0),
    )


def test_shares_follow_a_slower_link() -> None:
    qos = plan_port_qos(make_policy(), "s1-eth1", 1 * G)
    assert qos.rate_bps == 1 * G
    assert qos.note == "link speed 1Gbit below policy rate"
    assert [q.min_bps for q in qos.queues] == [200 * M, 700 * M, 100 * M]
    assert [q.max_bps for q in qos.queues] == [1 * G] * 3


@pytest.mark.parametrize("link", [None, 0, 100 * M, 100 * G])
def test_override_rate_is_used_as_written(link: int | None) -> None:
    policy = make_policy(overrides={"s1-eth4": "50Mbit"})
    qos = plan_port_qos(policy, "s1-eth4", link)
    assert qos.rate_bps == 50 * M
    assert qos.note == "override"
    assert [q.min_bps for q in qos.queues] == [10 * M, 35 * M, 5 * M]
    # other ports keep the policy rate
    assert plan_port_qos(policy, "s1-eth1", None).rate_bps == 10 * G


def test_link_speed_below_the_policy_rate_caps_the_port() -> None:
    assert port_rate(make_policy(), "s1-eth1", 100 * M) == (
        100 * M,
        "link speed 100Mbit below policy rate",
    )


@pytest.mark.parametrize("link", [None, 0, 10 * G, 40 * G])
def test_unknown_or_faster_link_gets_the_policy_rate(link: int | None) -> None:
    assert port_rate(make_policy(), "s1-eth1", link) == (10 * G, "policy rate")
    assert plan_port_qos(make_policy(), "s1-eth1", link).rate_bps == 10 * G


def test_max_rate_defaults_to_the_port_and_is_capped_by_it() -> None:
    policy = make_policy(
        {
            "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
            "training": {"priority": 1, "dscp": 26, "min_rate": "30%", "max_rate": "60%"},
            "bulk": {"priority": 2, "dscp": 8, "min_rate": "100Mbit", "max_rate": "20Gbit"},
            "capped": {"priority": 3, "dscp": 10, "min_rate": "100Mbit", "max_rate": "2Gbit"},
        }
    )
    fast = queues(plan_port_qos(policy, "p", None))
    assert fast["inference"].max_bps == 10 * G  # default: the whole port
    assert fast["training"].max_bps == 6 * G  # share of the port
    assert fast["bulk"].max_bps == 10 * G  # absolute above the port: capped
    assert fast["capped"].max_bps == 2 * G  # absolute below the port: as written
    slow = queues(plan_port_qos(policy, "p", 1 * G))
    assert slow["inference"].max_bps == 1 * G
    assert slow["training"].max_bps == 600 * M
    assert slow["bulk"].max_bps == 1 * G
    assert slow["capped"].max_bps == 1 * G
    for queue in [*fast.values(), *slow.values()]:
        assert queue.min_bps <= queue.max_bps


ABSOLUTE = {
    "training": {"priority": 1, "dscp": 26, "min_rate": "6Gbit"},
    "inference": {"priority": 0, "dscp": 46, "min_rate": "3Gbit"},
    "best-effort": {"priority": 2, "dscp": 0, "min_rate": "100Mbit"},
}


def test_absolute_guarantees_fit_a_fast_enough_port_unchanged() -> None:
    qos = plan_port_qos(make_policy(ABSOLUTE), "p", None)
    assert [q.min_bps for q in qos.queues] == [6 * G, 3 * G, 100 * M]
    assert qos.note == "policy rate"


@pytest.mark.parametrize("link", [1 * G, 100 * M, 5 * G])
def test_absolute_guarantees_above_a_slow_port_are_scaled_to_fit(link: int) -> None:
    qos = plan_port_qos(make_policy(ABSOLUTE), "p", link)
    assert qos.rate_bps == link
    minimums = [q.min_bps for q in qos.queues]
    assert sum(minimums) <= link
    assert sum(minimums) >= link * 0.95  # scaled down, not thrown away
    assert all(HTB_MIN_RATE_BPS <= m <= link for m in minimums)
    assert qos.note.endswith(
        "; guarantees scaled to fit " + {1 * G: "1Gbit", 100 * M: "100Mbit", 5 * G: "5Gbit"}[link]
    )
    assert qos.note.startswith("link speed ")


def test_scaled_guarantees_keep_their_proportions() -> None:
    minimums = queues(plan_port_qos(make_policy(ABSOLUTE), "p", 1 * G))
    # 6 : 3 : 0.1 of 9.1Gbit asked, on a 1Gbit port
    assert minimums["training"].min_bps == pytest.approx(6 / 9.1 * G, rel=1e-6)
    assert minimums["inference"].min_bps == pytest.approx(3 / 9.1 * G, rel=1e-6)
    assert minimums["training"].min_bps > minimums["inference"].min_bps


def test_tiny_guarantee_gets_the_htb_floor() -> None:
    policy = make_policy(
        {
            "big": {"priority": 0, "dscp": 46, "min_rate": "99.9999%"},
            "tiny": {"priority": 1, "dscp": 0, "min_rate": "0.0001%"},
        }
    )
    tiny = queues(plan_port_qos(policy, "p", 1 * G))["tiny"]
    assert tiny.min_bps == HTB_MIN_RATE_BPS  # 1000 bit/s asked, 8000 is the floor


def test_tc_filters_one_ip_and_one_ipv6_per_class() -> None:
    qos = plan_port_qos(make_policy(), "s1-eth1", None)
    assert tc_filters(qos) == (
        TcFilter("ip", 0, "1:3"),
        TcFilter("ip", 26, "1:2"),
        TcFilter("ip", 46, "1:1"),
        TcFilter("ipv6", 0, "1:3"),
        TcFilter("ipv6", 26, "1:2"),
        TcFilter("ipv6", 46, "1:1"),
    )


def test_tc_classids_are_hexadecimal() -> None:
    classes = {f"c{n}": {"priority": n % 8, "dscp": n * 2, "min_rate": "1%"} for n in range(17)}
    qos = plan_port_qos(make_policy(classes), "p", None)
    filters = tc_filters(qos)
    assert len(filters) == 2 * 17
    by_dscp = {(f.protocol, f.dscp): f.classid for f in filters}
    assert by_dscp[("ip", 0)] == "1:1"
    assert by_dscp[("ip", 18)] == "1:a"  # queue 9
    assert by_dscp[("ipv6", 30)] == "1:10"  # queue 15
    assert by_dscp[("ip", 32)] == "1:11"  # queue 16
    for queue in qos.queues:
        for protocol in ("ip", "ipv6"):
            assert by_dscp[(protocol, queue.dscp)] == f"1:{queue.queue_id + 1:x}"
    assert [htb_classid(q) for q in (0, 9, 10, 15, 255)] == ["1:1", "1:a", "1:b", "1:10", "1:100"]


def test_overrides_naming_no_known_port_are_listed() -> None:
    policy = parse_policy(
        {
            "classes": {"a": {"priority": 0, "dscp": 1, "min_rate": "10%"}},
            "default_class": "a",
            "ports": {"overrides": {"s1-eth1": "1Gbit", "s1-eht2": "1Gbit", "s2-eth1": "1Gbit"}},
        }
    )
    assert unmatched_overrides(policy, ["s1-eth1", "s1-eth2", "s2-eth1"]) == ["s1-eht2"]
    assert unmatched_overrides(policy, []) == ["s1-eht2", "s1-eth1", "s2-eth1"]
