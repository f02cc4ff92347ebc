"""Rates in policy documents: decimal units, exact shares, and every way to get one wrong."""

from __future__ import annotations

from fractions import Fraction

import pytest

from controller.policy.units import (
    AbsoluteRate,
    ShareRate,
    format_duration,
    format_rate,
    format_size,
    parse_absolute_rate,
    parse_duration,
    parse_rate,
    parse_size,
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


# --------------------------------------------------------------------------------------------
# Durations
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("500ms", 0.5),
        ("1s", 1.0),
        ("1.5s", 1.5),
        ("2m", 120.0),
        ("1h", 3600.0),
        ("100ms", 0.1),
        ("0.25s", 0.25),
        (" 30 s ", 30.0),
        ("500MS", 0.5),
        ("1.001s", 1.001),
        (2, 2.0),
        (0.1, 0.1),
        (1.5, 1.5),
    ],
)
def test_durations_are_seconds(value: str | float, seconds: float) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("5", "duration '5' has no unit: write e.g. '5s'"),
        ("1.5", "has no unit: write e.g. '1.5s'"),
        ("fast", "cannot parse duration 'fast': use ms, s, m, h or d"),
        ("", "cannot parse duration ''"),
        ("-1s", "cannot parse duration '-1s'"),
        ("1e3s", "cannot parse duration '1e3s'"),
        ("2 weeks", "unknown duration unit 'weeks' in '2 weeks': use ms, s, m, h or d"),
        ("10us", "unknown duration unit 'us'"),
        ("0s", "duration must be positive, got '0s'"),
        ("0.0ms", "duration must be positive"),
        (0, "duration must be positive, got 0"),
        (-2, "duration must be positive, got -2"),
        (-0.5, "duration must be positive, got -0.5"),
        ("0.5ms", "duration '0.5ms' is not a whole number of milliseconds"),
        (0.0001, "duration 0.0001 is not a whole number of milliseconds"),
        (True, "expected a duration such as '500ms' or '2s', got True"),
        (None, "got None"),
        (float("inf"), "got inf"),
        (float("nan"), "got nan"),
        (["1s"], "got ['1s']"),
        (1.797693134862316e305, "longer than a year"),  # found by the API fuzz test
        ("9000h", "duration '9000h' is longer than a year"),
    ],
)
def test_bad_durations_are_rejected_with_a_reason(value: object, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_duration(value)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.001, "1ms"),
        (0.1, "100ms"),
        (0.5, "500ms"),
        (1.0, "1s"),
        (1.5, "1.5s"),
        (1.234, "1.234s"),
        (30.0, "30s"),
        (90.0, "90s"),
        (60.0, "1m"),
        (120.0, "2m"),
        (3600.0, "1h"),
        (5400.0, "90m"),
    ],
)
def test_format_duration_is_exact_and_round_trips(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds


# --------------------------------------------------------------------------------------------
# Sizes
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "octets"),
    [
        ("1500B", 1500),
        ("64KiB", 64 * 1024),
        ("10MiB", 10 * 1024**2),
        ("1GiB", 1024**3),
        ("2TiB", 2 * 1024**4),
        ("500KB", 500_000),
        ("10MB", 10_000_000),
        ("1GB", 10**9),
        ("1kB", 1000),
        ("1.5MiB", 1_572_864),
        ("0.5KB", 500),
        (" 10 MiB ", 10 * 1024**2),
        ("10MIB", 10 * 1024**2),
        (1500, 1500),
    ],
)
def test_sizes_are_bytes_binary_or_decimal(value: str | int, octets: int) -> None:
    assert parse_size(value) == octets


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("10Mb", "'10Mb' looks like bits: a size is in bytes"),
        ("10mbit", "looks like bits"),
        ("64Kib", "looks like bits"),
        ("1000", "size '1000' has no unit: write e.g. '1000B'"),
        ("10XB", "unknown size unit 'XB' in '10XB'"),
        ("10 MiBs", "unknown size unit 'MiBs'"),
        ("lots", "cannot parse size 'lots'"),
        ("-1KB", "cannot parse size '-1KB'"),
        ("1.5B", "size '1.5B' is not a whole number of bytes"),
        ("0.0001KB", "not a whole number of bytes"),
        ("0MiB", "size must be positive, got '0MiB'"),
        (0, "size must be positive, got 0"),
        (-5, "size must be positive, got -5"),
        (1.5, "expected a size such as '10MiB' or '500KB', got 1.5"),
        (True, "got True"),
        (None, "got None"),
    ],
)
def test_bad_sizes_are_rejected_with_a_reason(value: object, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_size(value)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("octets", "text"),
    [
        (1, "1B"),
        (1500, "1500B"),
        (1000, "1KB"),
        (1024, "1KiB"),
        (64 * 1024, "64KiB"),
        (500_000, "500KB"),
        (10 * 1024**2, "10MiB"),
        (10_000_000, "10MB"),
        (1_572_864, "1536KiB"),
        (1024**3, "1GiB"),
        (10**12, "1TB"),
    ],
)
def test_format_size_is_exact_and_round_trips(octets: int, text: str) -> None:
    assert format_size(octets) == text
    assert parse_size(text) == octets
