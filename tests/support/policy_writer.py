"""A thread that writes policy versions one after another and records every answer.

The store failover tests (the API on Sentinel, and the whole stack in Mininet) both stream
policy writes through a primary's death and then judge each answer: this is that stream.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest


@dataclass
class Answer:
    """The API's answer to the ``number``-th write (numbered from 1)."""

    sent: float
    done: float
    status: int
    body: dict[str, Any]
    number: int
    """Which write this was, so the caller can recognise its version in the store afterwards."""

    @property
    def acked(self) -> bool:
        return 200 <= self.status < 300

    @property
    def not_replicated(self) -> bool:
        return self.status == 503 and "required_replicas" in self.body


@dataclass
class Writer:
    """Calls ``put(number)`` (which writes version ``number``, returning the answer's status
    and JSON body) for number 1, 2, ... until stopped, one every ``gap_s`` (0: no pause)."""

    put: Callable[[int], tuple[int, dict[str, Any]]]
    gap_s: float = 0.0
    answers: list[Answer] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        number = 0
        while not self.stop.wait(self.gap_s):
            number += 1
            sent = time.monotonic()
            status, body = self.put(number)
            answer = Answer(sent, time.monotonic(), status, body, number)
            with self.changed:
                self.answers.append(answer)
                self.changed.notify_all()

    def wait(self, what: str, predicate: Callable[[list[Answer]], bool], timeout_s: float) -> None:
        """Until ``predicate(answers)`` holds; fails the test with the last answers if not."""
        with self.changed:
            if not self.changed.wait_for(lambda: predicate(self.answers), timeout_s):
                last = [(a.status, str(a.body.get("detail", ""))[:80]) for a in self.answers[-5:]]
                pytest.fail(f"never {what}; the last answers: {last}", pytrace=False)
