"""Hosts shared between controllers, fenced by each switch's generation, as pins are.

A host is learned from its packet-ins, and a host whose routes are installed sends
none: an instance that starts (or whose connection to a switch dropped) would not
know it for as long as it stays silent, and the switches it masters would lose
their routes to it.  So the master of each switch publishes the hosts at it, and
every instance adds those it does not know (``controller.openflow.fabric_owner``).
One hash, ``{prefix}:mastership:hosts``: switch -> ``{"instance", "generation",
"hosts"}``, written by the ``WRITE_FENCED`` script of ``pins`` (only the switch's
current owner with its current generation writes).  A master writes a record
even when no host is at its switch: no record means nobody published yet.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from controller.mastership.leases import Leases
from controller.mastership.pins import WRITE_FENCED
from controller.openflow.fabric_events import SharedHost
from controller.store.client import translate_errors


def encode(instance: str, generation: int, hosts: tuple[SharedHost, ...]) -> str:
    return json.dumps(
        {
            "instance": instance,
            "generation": generation,
            "hosts": [[host.mac, host.port, host.ipv4] for host in hosts],
        },
        separators=(",", ":"),
    )


def decode(raw: str) -> tuple[SharedHost, ...] | None:
    """A record's hosts; None when it does not parse (no record: nothing is known)."""
    try:
        record: dict[str, Any] = json.loads(raw)
        return tuple(
            SharedHost(int(mac), int(port), None if ipv4 is None else int(ipv4))
            for mac, port, ipv4 in record["hosts"]
        )
    except (ValueError, TypeError, KeyError):
        return None


class HostStore:
    """The shared hosts, through the instance's lease client (one round trip each)."""

    def __init__(self, leases: Leases) -> None:
        self._leases = leases
        self._key = f"{leases.keys}hosts"
        self._write = leases.client.register_script(WRITE_FENCED)

    @translate_errors
    def write(self, hosts: Mapping[int, tuple[int, tuple[SharedHost, ...]]]) -> int:
        """Publish (switch -> (generation it is mastered with, the hosts at it)); the number
        of switches whose record was written (the others are no longer this instance's)."""
        instance = self._leases.instance_id
        args: list[Any] = [self._leases.keys, instance, "hosts"]
        for dpid, (generation, shared) in sorted(hosts.items()):
            args += [f"{dpid:016x}", str(generation), encode(instance, generation, shared)]
        return int(self._write(args=args))

    @translate_errors
    def read(self) -> dict[int, tuple[SharedHost, ...]]:
        """Every switch's published hosts (records that do not parse are left out)."""
        raw: Mapping[str, str] = self._leases.client.hgetall(self._key)  # type: ignore[assignment]
        found = {int(dpid, 16): decode(record) for dpid, record in raw.items()}
        return {dpid: hosts for dpid, hosts in found.items() if hosts is not None}
