"""Human units in policy documents: rates such as ``50Mbit`` or ``20%``.

Rates are decimal (``1Kbit`` = 1000 bit/s), as in tc and OVS, so a figure in a
policy is the figure an operator will see in ``tc -s class show``.  A share
(``20%``) only becomes a number once the port it applies to is known, so it is
kept symbolic here and resolved by the QoS planner.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

_RATE_UNITS = {
    "bit": 1,
    "kbit": 1_000,
    "mbit": 1_000_000,
    "gbit": 1_000_000_000,
    "tbit": 1_000_000_000_000,
}
_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*$")
_SHARE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


@dataclass(frozen=True, slots=True)
class AbsoluteRate:
    """A rate in bit/s; OVS queue rates are integers, so this is one too."""

    bps: int

    def resolve(self, port_bps: int) -> int:
        return self.bps

    def __str__(self) -> str:
        return format_rate(self.bps)


@dataclass(frozen=True, slots=True)
class ShareRate:
    """A fraction of the port rate, exact so that 3 x 33.3% never rounds above 100%."""

    fraction: Fraction

    def resolve(self, port_bps: int) -> int:
        return int(self.fraction * port_bps)

    def __str__(self) -> str:
        return f"{float(self.fraction * 100):g}%"


Rate = AbsoluteRate | ShareRate


def parse_rate(value: object) -> Rate:
    """Parse ``50Mbit``, ``10Gbit``, ``20%`` or a bare integer (bit/s).

    Raises ``ValueError`` with a message fit to show next to the field name.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a rate such as '50Mbit' or '20%', got {value!r}")
    if isinstance(value, int):
        if value <= 0:
            raise ValueError(f"rate must be positive, got {value}")
        return AbsoluteRate(value)
    if not isinstance(value, str):
        raise ValueError(f"expected a rate such as '50Mbit' or '20%', got {value!r}")
    share = _SHARE_RE.match(value)
    if share:
        fraction = Fraction(share.group(1)) / 100
        if not 0 < fraction <= 1:
            raise ValueError(f"share {value!r} must be above 0% and at most 100%")
        return ShareRate(fraction)
    absolute = _RATE_RE.match(value)
    if not absolute:
        raise ValueError(
            f"cannot parse rate {value!r}: use bit, Kbit, Mbit, Gbit (e.g. 50Mbit) or a share (20%)"
        )
    number, unit = absolute.groups()
    multiplier = _RATE_UNITS.get(unit.lower())
    if multiplier is None:
        raise ValueError(f"unknown rate unit {unit!r} in {value!r}: use bit, Kbit, Mbit or Gbit")
    bps = Fraction(number) * multiplier
    if bps.denominator != 1:
        raise ValueError(f"rate {value!r} is not a whole number of bit/s")
    if bps <= 0:
        raise ValueError(f"rate must be positive, got {value!r}")
    return AbsoluteRate(int(bps))


def parse_absolute_rate(value: object) -> AbsoluteRate:
    """Parse a rate that must not depend on another rate (a port's own rate)."""
    rate = parse_rate(value)
    if isinstance(rate, ShareRate):
        raise ValueError(f"a port rate must be absolute (e.g. '10Gbit'), got {value!r}")
    return rate


def format_rate(bps: int) -> str:
    """The shortest exact form, so a rate written back reads as the operator wrote it."""
    for unit, multiplier in (("Gbit", 10**9), ("Mbit", 10**6), ("Kbit", 10**3)):
        if bps % multiplier == 0:
            return f"{bps // multiplier}{unit}"
    return f"{bps}bit"
