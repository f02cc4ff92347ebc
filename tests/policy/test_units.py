"""Rates in policy documents: decimal units, exact shares, and every way to get one wrong."""

from __future__ import annotations

from fractions import Fraction

import pytest

from controller.policy.units import (
    AbsoluteRate,
    ShareRate,
    format_rate,
    parse_absolute_rate,
    parse_rate,
)


@pytest.mark.parametrize(
    ("text", "bps"),
    [
        ("1bit", 1),
        ("1Kbit", 1_000),
        ("50Mbit", 50_000_000),
        ("10Gbit", 10_000_000_000),
        ("2Tbit", 2_000_000_000_000),
        ("50mbit", 50_000_000),
        ("50MBIT", 50_000_000),
        (" 50 Mbit ", 50_000_000),
        ("1.5Kbit", 1_500),
        ("2.5Gbit", 2_500_000_000),
        ("0.001Kbit", 1),
        (8_000, 8_000),
    ],
)
def test_absolute_rates_are_decimal(text: str | int, bps: int) -> None:
    rate = parse_rate(text)
    assert rate == AbsoluteRate(bps)
    assert rate.resolve(1) == bps
    assert rate.resolve(10**12) == bps


def test_a_bare_integer_is_bits_per_second_but_a_bare_string_needs_a_unit() -> None:
    assert parse_rate(12_345) == AbsoluteRate(12_345)
    with pytest.raises(ValueError, match="cannot parse rate '12345'"):
        parse_rate("12345")


@pytest.mark.parametrize(
    ("text", "fraction"),
    [
        ("20%", Fraction(1, 5)),
        ("100%", Fraction(1)),
        ("0.5%", Fraction(1, 200)),
        ("33.3%", Fraction(333, 1000)),
        (" 70 % ", Fraction(7, 10)),
    ],
)
def test_shares_are_exact_fractions(text: str, fraction: Fraction) -> None:
    rate = parse_rate(text)
    assert rate == ShareRate(fraction)


def test_share_resolves_against_the_port_rate() -> None:
    assert parse_rate("20%").resolve(10_000_000_000) == 2_000_000_000
    assert parse_rate("33.3%").resolve(1_000) == 333
    # Three 33.3% shares never add up above the port, whatever the port rate.
    for port in (1, 7, 999, 10_000_000_001):
        assert 3 * parse_rate("33.3%").resolve(port) <= port


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("50mbps", "unknown rate unit 'mbps'"),
        ("50MB", "unknown rate unit 'MB'"),
        ("10 Gbyte", "unknown rate unit 'Gbyte'"),
        ("fast", "cannot parse rate 'fast'"),
        ("Mbit", "cannot parse rate 'Mbit'"),
        ("", "cannot parse rate ''"),
        ("-5Mbit", "cannot parse rate '-5Mbit'"),
        ("1e3Mbit", "cannot parse rate '1e3Mbit'"),
        ("1.5bit", "not a whole number of bit/s"),
        ("0.0001Kbit", "not a whole number of bit/s"),
        ("0Mbit", "rate must be positive"),
        ("0.0Gbit", "rate must be positive"),
        (0, "rate must be positive, got 0"),
        (-1, "rate must be positive, got -1"),
        ("0%", "must be above 0% and at most 100%"),
        ("100.5%", "must be above 0% and at most 100%"),
        ("150%", "must be above 0% and at most 100%"),
        ("-5%", "cannot parse rate '-5%'"),
        (True, "got True"),
        (False, "got False"),
        (1.5, "got 1.5"),
        (None, "got None"),
        (["10Gbit"], "got ['10Gbit']"),
    ],
)
def test_bad_rates_are_rejected_with_a_reason(value: object, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_rate(value)
    assert message in str(info.value)


def test_bool_is_not_a_bit_rate() -> None:
    # bool is an int subclass: True must not silently become 1 bit/s.
    for value in (True, False):
        with pytest.raises(ValueError, match="expected a rate"):
            parse_rate(value)


def test_port_rate_must_be_absolute() -> None:
    assert parse_absolute_rate("25Gbit") == AbsoluteRate(25_000_000_000)
    with pytest.raises(ValueError, match="a port rate must be absolute"):
        parse_absolute_rate("50%")


@pytest.mark.parametrize(
    ("bps", "text"),
    [
        (1, "1bit"),
        (999, "999bit"),
        (1_000, "1Kbit"),
        (1_500, "1500bit"),
        (1_500_000, "1500Kbit"),
        (50_000_000, "50Mbit"),
        (10_000_000_000, "10Gbit"),
        (2_500_000_000, "2500Mbit"),
    ],
)
def test_format_rate_is_exact_and_round_trips(bps: int, text: str) -> None:
    assert format_rate(bps) == text
    assert parse_rate(text) == AbsoluteRate(bps)
    assert str(AbsoluteRate(bps)) == text


def test_share_prints_as_written() -> None:
    assert str(parse_rate("20%")) == "20%"
    assert str(parse_rate("33.3%")) == "33.3%"
    assert str(parse_rate("100%")) == "100%"
