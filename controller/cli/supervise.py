"""When ``flowlane up`` starts a dead child again: exponential back-off, decided without I/O.

A child that dies (Redis, the controller, the API) is started again instead
of taking the whole stack down: the switches keep their flows on their own,
and the other children reconnect by themselves.  A child that keeps dying
must not turn the supervisor into a fork loop, so each quick death doubles
the wait before the next start, up to a ceiling; a child that ran for a
while before it died was healthy, and starts over from the shortest wait.

A child that dies before the stack is up is different: it has never been
healthy, so starting it again cannot help (a policy that does not validate,
a port another process holds) and only hides the cause behind a restart
loop.  Until ``settled`` is called, a death is a ``StartFailedError``; the
stack stops and says why, and nothing is restarted.

The decisions live here, apart from the processes, so they can be tested
with a fake clock; ``controller.cli.up`` only polls processes and starts
the ones this says are due.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    """How long to wait before starting a dead child again."""

    initial_s: float = 0.5
    factor: float = 2.0
    max_s: float = 30.0
    healthy_after_s: float = 10.0
    """A child that ran at least this long before it died starts over from ``initial_s``."""

    def __post_init__(self) -> None:
        if self.initial_s <= 0:
            raise ValueError(f"initial_s must be positive, got {self.initial_s}")
        if self.factor < 1:
            raise ValueError(f"factor must be at least 1, got {self.factor}")
        if self.max_s < self.initial_s:
            raise ValueError(f"max_s ({self.max_s}) must be at least initial_s ({self.initial_s})")
        if self.healthy_after_s <= 0:
            raise ValueError(f"healthy_after_s must be positive, got {self.healthy_after_s}")

    def next_delay(self, previous_s: float | None, ran_s: float) -> float:
        """The wait after a death, given the wait before the last start (None: first death)."""
        if previous_s is None or ran_s >= self.healthy_after_s:
            return self.initial_s
        return min(previous_s * self.factor, self.max_s)


@dataclass(frozen=True, slots=True)
class Restart:
    """A child died; it is started again at ``at`` (the supervisor's clock)."""

    name: str
    returncode: int
    ran_s: float
    delay_s: float
    at: float
    attempt: int
    """Restarts in a row without a healthy run in between (1: the first)."""
    pid: int | None = None

    def describe(self) -> str:
        who = self.name if self.pid is None else f"{self.name} (pid {self.pid})"
        return (
            f"{who} {exit_text(self.returncode)} after {self.ran_s:.1f} s;"
            f" restarting in {self.delay_s:g} s (restart {self.attempt})"
        )


class StartFailedError(RuntimeError):
    """A child died while the stack was starting: a start failure, never restarted."""

    def __init__(self, name: str, returncode: int, ran_s: float, pid: int | None = None) -> None:
        self.name = name
        self.returncode = returncode
        self.ran_s = ran_s
        self.pid = pid
        who = name if pid is None else f"{name} (pid {pid})"
        super().__init__(f"{who} {exit_text(returncode)} during start-up (after {ran_s:.1f} s)")


def exit_text(returncode: int) -> str:
    """A ``Popen.returncode`` as a person reads it: a negative one is the signal that killed it."""
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with status {returncode}"


@dataclass(slots=True)
class _Child:
    started_at: float
    delay_s: float | None = None
    attempt: int = 0
    restart: Restart | None = None


class Supervisor:
    """Which children run, which wait for a restart, and when that restart is due.

    ``started`` after every start (the first one too), ``settled`` once every
    child is up, ``exited`` when a running child is found dead, ``due`` for the
    children to start now.
    """

    def __init__(
        self, backoff: Backoff | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.backoff = backoff if backoff is not None else Backoff()
        self._clock = clock
        self._children: dict[str, _Child] = {}
        self._settled = False

    def settled(self) -> None:
        """Start-up is over: from now on a death is restarted, with back-off."""
        self._settled = True

    @property
    def starting(self) -> bool:
        """True until ``settled``: a death now is a start failure."""
        return not self._settled

    def started(self, name: str) -> None:
        now = self._clock()
        child = self._children.get(name)
        if child is None:
            self._children[name] = _Child(started_at=now)
        else:
            child.started_at = now
            child.restart = None

    def running(self, name: str) -> bool:
        """Started and not yet reported dead: the only state in which ``exited`` is valid."""
        child = self._children.get(name)
        return child is not None and child.restart is None

    def exited(self, name: str, returncode: int, pid: int | None = None) -> Restart:
        """A running child died with ``returncode``: when to start it again, and why.

        Before ``settled`` there is no restart: ``StartFailedError`` says who died and how.
        """
        child = self._children.get(name)
        if child is None or child.restart is not None:
            raise ValueError(f"{name} is not running: it cannot exit")
        now = self._clock()
        ran_s = max(0.0, now - child.started_at)
        if not self._settled:
            raise StartFailedError(name, returncode, ran_s, pid)
        healthy = ran_s >= self.backoff.healthy_after_s
        child.delay_s = self.backoff.next_delay(child.delay_s, ran_s)
        child.attempt = 1 if healthy else child.attempt + 1
        child.restart = Restart(
            name, returncode, ran_s, child.delay_s, now + child.delay_s, child.attempt, pid
        )
        return child.restart

    def due(self) -> list[str]:
        """Children whose restart time has come, in the order they were first started."""
        now = self._clock()
        return [
            name
            for name, child in self._children.items()
            if child.restart is not None and child.restart.at <= now
        ]
