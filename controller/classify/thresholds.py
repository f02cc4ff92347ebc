"""The ``detection`` policy section resolved against one switch's port rate.

A rate threshold may be a share of the port rate (``10%``, the default); a
detector needs the number, and so needs to know the port it is judging
against.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.policy.detection import DetectionSpec


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Plain numbers the detector compares against.

    ``rate_bps`` is always set: it is what makes a flow bulk at all.
    ``min_bytes`` (``None``: off) only shortens the wait for a flow that is
    already bulk, so it never demotes a flow slower than the rate.
    """

    interval_s: float
    rate_bps: int
    sustain_s: float
    min_bytes: int | None
    release_after_s: float
    release_ratio: float
    max_tracked: int

    @classmethod
    def from_spec(cls, spec: DetectionSpec, port_rate_bps: int) -> Thresholds:
        if port_rate_bps <= 0:
            raise ValueError(f"port rate must be positive, got {port_rate_bps}")
        elephant = spec.elephant
        return cls(
            interval_s=spec.interval,
            # A tiny share of a tiny port can round to 0 bit/s, which every flow would exceed.
            rate_bps=max(1, elephant.rate.resolve(port_rate_bps)),
            sustain_s=spec.sustain_s,
            min_bytes=elephant.min_bytes,
            release_after_s=spec.release_after,
            release_ratio=elephant.release_ratio,
            max_tracked=spec.max_tracked,
        )


def refresh_warning(interval_s: float, refresh_s: float) -> str | None:
    """Why polling faster than the switch refreshes its counters buys nothing; None if not.

    Open vSwitch counts a flow's bytes into its entries when it revalidates
    its datapath flows (``other_config:max-revalidator``): a poll between two
    refreshes reads the same numbers again, so a flow is caught no sooner
    than the refresh however short the interval.
    """
    if interval_s >= refresh_s - 1e-9:
        return None
    return (
        f"detection interval {interval_s * 1000:g} ms is shorter than the switch's counter"
        f" refresh ({refresh_s * 1000:g} ms, other_config:max-revalidator): flows are caught"
        f" no sooner than the refresh; set max-revalidator={round(interval_s * 1000)} on"
        " the switch, or lengthen the interval"
    )
