"""The live flow view: what each switch's tracked flows look like right now.

Key: ``<prefix>:flows`` hash dpid (16 hex digits) → JSON
``{"updated_at": t, "flows": [FlowRecord...]}``, rewritten by the controller
at most once a second per switch (the view is for people, not for control).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Any

import redis

from controller.store.client import text, translate_errors


@dataclass(frozen=True, slots=True)
class FlowRecord:
    """One tracked flow. Addresses are text; ``why`` is ``rule:<name>``, ``job:<name>``,
    ``detected`` or ``default``."""

    switch: str
    eth_type: int
    ip_proto: int
    src: str
    dst: str
    src_port: int
    dst_port: int
    traffic_class: str
    why: str
    bytes: int
    rate_bps: float
    first_seen: float
    last_seen: float

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["class"] = data.pop("traffic_class")
        return data

    @staticmethod
    def from_dict(data: dict[str, Any]) -> FlowRecord:
        fields = dict(data)
        fields["traffic_class"] = fields.pop("class")
        return FlowRecord(**fields)


class FlowStore:
    def __init__(self, client: redis.Redis, prefix: str = "flowlane") -> None:
        self._redis = client
        self._flows = f"{prefix}:flows"

    @translate_errors
    def publish(self, dpid: int, flows: list[FlowRecord], now: float | None = None) -> None:
        document = {
            "updated_at": now if now is not None else time.time(),
            "flows": [flow.to_dict() for flow in flows],
        }
        self._redis.hset(self._flows, f"{dpid:016x}", json.dumps(document))

    @translate_errors
    def remove(self, dpid: int) -> None:
        self._redis.hdel(self._flows, f"{dpid:016x}")

    @translate_errors
    def all(self, switches: set[str] | None = None) -> list[FlowRecord]:
        """Every published flow, optionally only of the given dpids (hex)."""
        flows: list[FlowRecord] = []
        for dpid, raw in self._redis.hgetall(self._flows).items():
            if switches is not None and text(dpid) not in switches:
                continue
            flows.extend(FlowRecord.from_dict(f) for f in json.loads(text(raw))["flows"])
        return flows
