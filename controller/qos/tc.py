"""DSCP → HTB class filters on a port, for the userspace datapath.

OVS owns the port's root qdisc and drops every filter when it re-creates
it, so ``ensure`` compares what is there with what should be and rewrites
only on a difference: calling it often is cheap and repairs lost filters.
"""

from __future__ import annotations

import json
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
