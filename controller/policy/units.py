"""Human units in policy documents: rates such as ``50Mbit`` or ``20%``, durations, sizes.

Rates are decimal (``1Kbit`` = 1000 bit/s), as in tc and OVS, so a figure in a
policy is the figure an operator will see in ``tc -s class show``.  A share
(``20%``) only becomes a number once the port it applies to is known, so it is
kept symbolic here and resolved by the QoS planner.

Durations (``500ms``, ``2m``) are whole milliseconds, and sizes (``10MiB``,
``500KB``) whole bytes, so that each formats back exactly as it was parsed.
"""

from __future__ import annotations

import math
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


_DURATION_UNITS = {
    "ms": Fraction(1, 1000),
    "s": Fraction(1),
    "m": Fraction(60),
    "h": Fraction(3600),
    "d": Fraction(86400),
}
_DURATION_HINT = "use ms, s, m, h or d (e.g. 500ms, 1.5s, 2m, 30d) or a number of seconds"
_NUMBER_UNIT_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*$")
_BARE_NUMBER_RE = re.compile(r"^\s*\d+(?:\.\d+)?\s*$")


MAX_DURATION_S = 366 * 24 * 3600
"""Above any timer flowlane has, and small enough that milliseconds stay exact floats."""


def parse_duration(value: object) -> float:
    """Parse ``500ms``, ``1.5s``, ``2m``, ``1h`` or a bare number of seconds; return seconds.

    A bare number is seconds, but a string needs its unit, as for rates: ``"5"``
    is more likely a slip than a choice.  Durations are whole milliseconds: the
    controller's timers are no finer, and it keeps ``format_duration`` exact.
    """
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"expected a duration such as '500ms' or '2s', got {value!r}")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError(f"expected a duration such as '500ms' or '2s', got {value!r}")
        seconds = Fraction(repr(value))  # repr: 0.1 is one tenth, not its binary neighbour
    else:
        if _BARE_NUMBER_RE.match(value):
            raise ValueError(f"duration {value!r} has no unit: write e.g. '{value.strip()}s'")
        parsed = _NUMBER_UNIT_RE.match(value)
        if not parsed:
            raise ValueError(f"cannot parse duration {value!r}: {_DURATION_HINT}")
        number, unit = parsed.groups()
        multiplier = _DURATION_UNITS.get(unit.lower())
        if multiplier is None:
            raise ValueError(f"unknown duration unit {unit!r} in {value!r}: use ms, s, m, h or d")
        seconds = Fraction(number) * multiplier
    if seconds <= 0:
        raise ValueError(f"duration must be positive, got {value!r}")
    if seconds > MAX_DURATION_S:
        raise ValueError(f"duration {value!r} is longer than a year: no setting needs that")
    if (seconds * 1000).denominator != 1:
        raise ValueError(f"duration {value!r} is not a whole number of milliseconds")
    return float(seconds)


def format_duration(seconds: float) -> str:
    """The shortest exact form: ``500ms``, ``1.5s``, ``30s``, ``2m``, ``1h``."""
    ms = round(seconds * 1000)
    if ms >= 3_600_000 and ms % 3_600_000 == 0:
        return f"{ms // 3_600_000}h"
    if ms >= 60_000 and ms % 60_000 == 0:
        return f"{ms // 60_000}m"
    if ms < 1000:
        return f"{ms}ms"
    whole, rest = divmod(ms, 1000)
    return f"{whole}.{rest:03d}".rstrip("0").rstrip(".") + "s"


_SIZE_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_SIZE_UNITS_TEXT = "B, KB, MB, GB (decimal) or KiB, MiB, GiB (binary)"
_SIZE_FORMATS = sorted(
    ((multiplier, unit) for unit, multiplier in _SIZE_UNITS.items()), reverse=True
)
_SIZE_NAMES = {
    "b": "B",
    "kb": "KB",
    "mb": "MB",
    "gb": "GB",
    "tb": "TB",
    "kib": "KiB",
    "mib": "MiB",
    "gib": "GiB",
    "tib": "TiB",
}


def parse_size(value: object) -> int:
    """Parse ``10MiB``, ``64KiB``, ``500KB`` (decimal), ``1500B`` or a bare integer; return bytes.

    The trailing ``B`` must be a capital: ``10Mb`` reads as megabits to anyone
    used to link speeds, and a threshold off by a factor of eight would go
    unnoticed, so it is refused rather than guessed.
    """
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"expected a size such as '10MiB' or '500KB', got {value!r}")
    if isinstance(value, int):
        if value <= 0:
            raise ValueError(f"size must be positive, got {value}")
        return value
    if _BARE_NUMBER_RE.match(value):
        raise ValueError(f"size {value!r} has no unit: write e.g. '{value.strip()}B'")
    parsed = _NUMBER_UNIT_RE.match(value)
    if not parsed:
        raise ValueError(f"cannot parse size {value!r}: use {_SIZE_UNITS_TEXT} (e.g. 10MiB)")
    number, unit = parsed.groups()
    if unit.lower().endswith(("b", "bit")) and not unit.endswith("B"):
        raise ValueError(f"{value!r} looks like bits: a size is in bytes, use {_SIZE_UNITS_TEXT}")
    multiplier = _SIZE_UNITS.get(unit.lower())
    if multiplier is None:
        raise ValueError(f"unknown size unit {unit!r} in {value!r}: use {_SIZE_UNITS_TEXT}")
    size = Fraction(number) * multiplier
    if size.denominator != 1:
        raise ValueError(f"size {value!r} is not a whole number of bytes")
    if size <= 0:
        raise ValueError(f"size must be positive, got {value!r}")
    return int(size)


def format_size(size: int) -> str:
    """The largest unit that keeps the figure whole: ``10MiB``, ``10MB``, ``1500B``."""
    for multiplier, unit in _SIZE_FORMATS:
        if size and size % multiplier == 0:
            return f"{size // multiplier}{_SIZE_NAMES[unit]}"
    return f"{size}B"
