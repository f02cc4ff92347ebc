"""DSCP → HTB class filters on a port, for the userspace datapath; the root class's burst.

OVS owns the port's root qdisc and drops every filter when it re-creates
it, so ``ensure`` compares what is there with what should be and rewrites
only on a difference: calling it often is cheap and repairs lost filters.

OVS also sets the burst of the root HTB class (``1:fffe``) itself, to about
one frame, with no OVSDB setting to change it, and sets it again on every
reconfiguration of the switch (any OVSDB change, to any bridge).
``ensure_root_burst`` puts the planned burst back; the queue telemetry's
periodic read notices when OVS has reset it (``root_burst_short``).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence
from typing import Any

from controller.qos.plan import TcFilter

_PRIORITY = {"ip": 10, "ipv6": 11}
_SHIFT = {
    # IPv4: TOS is the second byte of the header's first 32-bit word.
    "ip": 16,
    # IPv6: Traffic Class sits at bits 20..27 of the first word.
    "ipv6": 20,
}


ROOT_CLASSID = "1:fffe"
"""The HTB class OVS's linux-htb puts every queue under; it carries the port's ceiling."""

BURST_SLACK = 0.9
"""tc prints a burst back from scheduler ticks, rounded (``244Kb`` for 250 000 B)."""

_BURSTS = re.compile(
    r"^class htb (?P<classid>\S+) .*?\bburst (?P<burst>[\d.]+)(?P<unit>[KMG]?)b\b", re.MULTILINE
)
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


class TcError(RuntimeError):
    def __init__(self, device: str, detail: str) -> None:
        self.device = device
        self.missing_device = "Cannot find device" in detail
        super().__init__(f"tc failed on {device}: {detail}")


def _run(args: Sequence[str], device: str, stdin: str | None = None) -> str:
    try:
        done = subprocess.run(
            ["tc", *args], input=stdin, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TcError(device, str(exc)) from exc
    if done.returncode != 0:
        raise TcError(device, done.stderr.strip() or f"exit code {done.returncode}")
    return done.stdout


def _key(protocol: str, value: int, mask: int, classid: str) -> tuple[str, int, int, str]:
    return (protocol, value, mask, classid)


def wanted_keys(filters: Sequence[TcFilter]) -> set[tuple[str, int, int, str]]:
    keys = set()
    for item in filters:
        shift = _SHIFT[item.protocol]
        keys.add(_key(item.protocol, (item.dscp << 2) << shift, 0xFC << shift, item.classid))
    return keys


def present_keys(device: str) -> set[tuple[str, int, int, str]]:
    entries: list[dict[str, Any]] = json.loads(
        _run(["-j", "filter", "show", "dev", device, "parent", "1:"], device) or "[]"
    )
    keys = set()
    for entry in entries:
        options = entry.get("options", {})
        match = options.get("match")
        if not match or "flowid" not in options:
            continue
        keys.add(
            _key(
                entry["protocol"],
                int(match["value"], 16),
                int(match["mask"], 16),
                options["flowid"],
            )
        )
    return keys


def ensure(device: str, filters: Sequence[TcFilter]) -> bool:
    """Make the port's filters exactly ``filters``; True when something was rewritten."""
    if present_keys(device) == wanted_keys(filters):
        return False
    commands = [f"filter del dev {device} parent 1:"]
    for item in filters:
        tos = item.dscp << 2
        selector = "ip tos" if item.protocol == "ip" else "ip6 priority"
        commands.append(
            f"filter add dev {device} parent 1: protocol {item.protocol}"
            f" prio {_PRIORITY[item.protocol]} u32 match {selector} {tos:#x} 0xfc"
            f" flowid {item.classid}"
        )
    _run(["-force", "-batch", "-"], device, "\n".join(commands) + "\n")
    if present_keys(device) != wanted_keys(filters):
        raise TcError(device, "filters did not take effect")
    return True


def class_stats(device: str) -> str:
    """``tc -s class show dev DEVICE``: the HTB classes with their counters, as text."""
    return _run(["-s", "class", "show", "dev", device], device)


def htb_bursts(text: str) -> dict[str, int]:
    """classid → burst in bytes, from ``tc [-s] class show dev X`` output."""
    return {
        match["classid"]: round(float(match["burst"]) * _UNITS[match["unit"]])
        for match in _BURSTS.finditer(text)
    }


def root_burst_short(text: str, burst_bytes: int) -> bool:
    """Whether the port's root HTB class (in ``tc class show`` text) has less burst than planned.

    False when there is no root class (no linux-htb QoS yet): nothing to repair.
    """
    current = htb_bursts(text).get(ROOT_CLASSID)
    return current is not None and current < burst_bytes * BURST_SLACK


def ensure_root_burst(device: str, rate_bps: int, burst_bytes: int) -> bool:
    """Give the port's root HTB class ``burst_bytes`` of burst and cburst; True if it changed.

    The class keeps the rate OVS gave it (rate = ceil = the QoS max-rate).
    """
    text = _run(["class", "show", "dev", device], device)
    if ROOT_CLASSID not in htb_bursts(text):
        raise TcError(device, f"no HTB class {ROOT_CLASSID} (the port has no linux-htb QoS)")
    if not root_burst_short(text, burst_bytes):
        return False
    rate = f"{rate_bps}bit"
    _run(
        [
            "class",
            "change",
            "dev",
            device,
            "parent",
            "1:",
            "classid",
            ROOT_CLASSID,
            "htb",
            "rate",
            rate,
            "ceil",
            rate,
            "burst",
            str(burst_bytes),
            "cburst",
            str(burst_bytes),
        ],
        device,
    )
    return True
