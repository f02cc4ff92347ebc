"""The detection section resolved against a port rate."""

from __future__ import annotations

import pytest

from controller.classify.thresholds import Thresholds, refresh_warning
from controller.policy.detection import DetectionSpec


def _spec(**elephant: object) -> DetectionSpec:
    return DetectionSpec.model_validate(
        {"interval": "250ms", "release_after": "10s", "elephant": {"class": "training", **elephant}}
    )


def test_numbers_come_straight_from_the_section() -> None:
    spec = DetectionSpec.model_validate(
        {
            "interval": "250ms",
            "release_after": "10s",
            "max_tracked": 5000,
            "elephant": {
                "bytes": "1MiB",
                "rate": "50Mbit",
                "for": "2s",
                "release_ratio": 0.25,
                "class": "training",
            },
        }
    )
    assert Thresholds.from_spec(spec, 10_000_000_000) == Thresholds(
        interval_s=0.25,
        min_bytes=1 << 20,
        rate_bps=50_000_000,
        sustain_s=2.0,
        release_after_s=10.0,
        release_ratio=0.25,
        max_tracked=5000,
    )


def test_a_share_resolves_against_the_port_rate() -> None:
    spec = _spec(rate="10%")
    assert Thresholds.from_spec(spec, 1_000_000_000).rate_bps == 100_000_000
    assert Thresholds.from_spec(spec, 25_000_000_000).rate_bps == 2_500_000_000


def test_the_rate_is_always_set_and_bytes_are_optional() -> None:
    """``bytes`` alone means bytes while at the default 10 % of the port."""
    thresholds = Thresholds.from_spec(_spec(bytes="10MiB"), 1_000_000_000)
    assert thresholds.rate_bps == 100_000_000
    assert thresholds.min_bytes == 10 << 20
    assert thresholds.sustain_s == 0.5  # two intervals
    assert Thresholds.from_spec(_spec(rate="1Gbit"), 1).min_bytes is None


def test_a_rate_never_rounds_down_to_zero() -> None:
    assert Thresholds.from_spec(_spec(rate="1%"), 50).rate_bps == 1


@pytest.mark.parametrize("port_rate", [0, -1])
def test_the_port_rate_must_be_positive(port_rate: int) -> None:
    with pytest.raises(ValueError, match="port rate must be positive"):
        Thresholds.from_spec(_spec(bytes=1), port_rate)


def test_an_interval_shorter_than_the_counter_refresh_gets_a_warning_naming_the_fix() -> None:
    warning = refresh_warning(0.1, 0.5)
    assert warning is not None
    assert "100 ms" in warning and "500 ms" in warning and "max-revalidator=100" in warning
    assert refresh_warning(0.5, 0.5) is None  # the default interval and the default refresh
    assert refresh_warning(1.0, 0.5) is None
    assert refresh_warning(0.1, 0.1) is None
