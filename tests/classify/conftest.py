"""A simulated counting table: flows send bytes over simulated time, idle out, come back.

It plays the part of OVS's learned table: an entry is learned at a flow's
first packet (its age counts from then), its byte counter grows while the
flow sends, and it disappears when expired.  Time only moves when a test
says so, so every scenario is exact and repeatable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from controller.classify.decisions import Decisions
from controller.classify.detector import Detector
from controller.classify.flows import CounterSample
from controller.flowid import ETH_TYPE_IPV4, IP_PROTO_TCP, FlowId
from controller.policy.detection import DetectionSpec

MIB = 1 << 20
KIB = 1 << 10
GBIT = 1_000_000_000
INTERVAL = 0.5


def flow_id(index: int, proto: int = IP_PROTO_TCP) -> FlowId:
    """A distinct IPv4 flow per index: 10.0.x.y:port > 10.1.0.1:80."""
    return FlowId(ETH_TYPE_IPV4, proto, 0x0A000000 + index, 0x0A010001, 10_000 + index % 50_000, 80)


@dataclass
class Entry:
    learned: float
    octets: int = 0
    rate: float = 0.0
    """Bytes per second while it sends."""
    left: float = float("inf")
    """Bytes still to send before the flow finishes."""
    reported: int = 0
    """What the counter reads: ``octets`` as of the table's last refresh."""


@dataclass
class FakeTable:
    """The counting table of one switch, over simulated time starting at 0."""

    now: float = 0.0
    entries: dict[FlowId, Entry] = field(default_factory=dict)
    refresh_s: float | None = None
    """Counters refresh only every ``refresh_s`` (OVS revalidation); None: always current."""

    def start(self, flow: FlowId, rate_mbit: float = 0.0, size: float = float("inf")) -> FlowId:
        """A flow's first packet now: the entry is learned, then it sends ``rate_mbit``."""
        self.entries[flow] = Entry(self.now, rate=rate_mbit * 1e6 / 8, left=size)
        return flow

    def rate(self, flow: FlowId, rate_mbit: float) -> None:
        self.entries[flow].rate = rate_mbit * 1e6 / 8

    def send(self, flow: FlowId, octets: int) -> None:
        """A burst, counted at once."""
        self.entries[flow].octets += octets

    def expire(self, flow: FlowId) -> None:
        """OVS idle timeout: the entry leaves the table."""
        del self.entries[flow]

    def advance(self, seconds: float) -> None:
        before = self.now
        for entry in self.entries.values():
            sent = min(entry.left, entry.rate * seconds)
            entry.octets += int(sent)
            entry.left -= sent
        self.now += seconds
        if self.refresh_s is None or int(self.now / self.refresh_s + 1e-9) > int(
            before / self.refresh_s + 1e-9
        ):
            for entry in self.entries.values():
                entry.reported = entry.octets

    def samples(self) -> list[CounterSample]:
        return [
            CounterSample(flow, *self._counters(entry), self.now - entry.learned)
            for flow, entry in self.entries.items()
        ]

    def _counters(self, entry: Entry) -> tuple[int, int]:
        octets = entry.octets if self.refresh_s is None else entry.reported
        return octets, octets // 1500

    def poll(self, detector: Detector) -> Decisions:
        return detector.observe(self.samples(), self.now)

    def run(self, detector: Detector, seconds: float, step: float = INTERVAL) -> list[Decisions]:
        """Advance and poll every ``step`` for ``seconds``; the decisions of each poll."""
        polls = []
        for _ in range(round(seconds / step)):
            self.advance(step)
            polls.append(self.poll(detector))
        return polls


def spec(
    *,
    interval: str = "500ms",
    release_after: str = "30s",
    max_tracked: int | None = None,
    for_: str | None = None,
    **elephant: Any,
) -> DetectionSpec:
    """A detection section; ``elephant`` keywords as YAML writes them (``for_`` is ``for``)."""
    section: dict[str, Any] = {
        "interval": interval,
        "release_after": release_after,
        "elephant": {"class": "training", **elephant},
    }
    if for_ is not None:
        section["elephant"]["for"] = for_
    if max_tracked is not None:
        section["max_tracked"] = max_tracked
    return DetectionSpec.model_validate(section)


@pytest.fixture
def table() -> FakeTable:
    return FakeTable()


@pytest.fixture
def make_detector() -> Callable[..., Detector]:
    """``make_detector(bytes="10MiB", ...)``: a detector on a 1 Gbit/s port."""

    def make(port_rate: int = GBIT, **elephant: Any) -> Detector:
        return Detector(spec(**elephant), port_rate)

    return make


@pytest.fixture
def flow() -> Callable[..., FlowId]:
    """``flow(n)``: the n-th distinct flow."""
    return flow_id


@pytest.fixture
def new_table() -> Callable[[], FakeTable]:
    """For tests that need more than one table."""
    return FakeTable
