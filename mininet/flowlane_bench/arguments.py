"""argparse ``type=`` checks shared by the benchmark programs run on Mininet hosts.

A bad value is refused by argparse (usage error, exit 2) instead of failing mid-run; NaN and
infinity are refused too, since ``float()`` accepts them.
"""

from __future__ import annotations

import argparse
import math


def positive_float(text: str) -> float:
    """A finite number above zero (a rate, a duration)."""
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number, zero allowed (a warm-up, a pause)."""
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer above zero (a size, a count)."""
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """An integer, zero allowed (a rank, iterations to skip)."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value
