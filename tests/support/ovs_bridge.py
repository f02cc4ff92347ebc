"""Helpers for tests against a real Open vSwitch: a userspace bridge with veth ports."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field

from controller.qos.ovsdb import OWNER_KEY


def sh(*args: str, check: bool = True) -> str:
    done = subprocess.run(list(args), capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


@dataclass
class OvsBridge:
    """A netdev bridge pointed at a controller port, with veth ports in the root namespace."""

    name: str
    ofp_port: int
    ports: list[str] = field(default_factory=list)

    def add_port(self, name: str) -> None:
        sh("ip", "link", "add", name, "type", "veth", "peer", "name", f"{name}x")
        sh("ip", "link", "set", name, "up")
        sh("ip", "link", "set", f"{name}x", "up")
        sh("ovs-vsctl", "add-port", self.name, name)
        self.ports.append(name)

    def delete_port(self, name: str) -> None:
        sh("ovs-vsctl", "--if-exists", "del-port", self.name, name)
        sh("ip", "link", "del", name, check=False)
        self.ports.remove(name)


def owned_qos_ports() -> set[str]:
    """Ports named by any flowlane QoS row, referenced or not."""
    out = sh("ovs-vsctl", "--format=json", "--columns=external_ids", "list", "qos")
    return {port for port in _owner_values(out)}


def _owner_values(text: str) -> list[str]:
    rows = json.loads(text)["data"]
    values = []
    for (cell,) in rows:
        for key, value in cell[1]:
            if key == OWNER_KEY:
                values.append(value)
    return values
