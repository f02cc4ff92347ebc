"""Restart decisions of ``flowlane up``, on a fake clock."""

from __future__ import annotations

import signal

import pytest

from controller.cli.supervise import Backoff, StartFailedError, Supervisor, exit_text


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def crash_loop(supervisor: Supervisor, clock: Clock, name: str, deaths: int) -> list[float]:
    """``deaths`` quick deaths, each restarted when due; the delays the supervisor chose."""
    delays = []
    for _ in range(deaths):
        clock.now += 0.1  # dies at once
        restart = supervisor.exited(name, 1)
        delays.append(restart.delay_s)
        clock.now = restart.at
        assert supervisor.due() == [name]
        supervisor.started(name)
    return delays


def test_a_crash_loop_backs_off_exponentially_up_to_the_ceiling() -> None:
    clock = Clock()
    supervisor = Supervisor(Backoff(initial_s=0.5, max_s=30.0), clock)
    supervisor.settled()  # start-up over: deaths are restarted
    supervisor.started("controller")
    delays = crash_loop(supervisor, clock, "controller", 10)
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0, 30.0]


def test_a_restart_is_not_due_before_its_back_off_is_over() -> None:
    clock = Clock()
    supervisor = Supervisor(Backoff(initial_s=0.5), clock)
    supervisor.settled()  # start-up over: deaths are restarted
    supervisor.started("api")
    clock.now += 3.0
    restart = supervisor.exited("api", -signal.SIGKILL)
    assert (restart.at, restart.attempt, restart.ran_s) == (clock.now + 0.5, 1, 3.0)
    assert not supervisor.running("api")
    clock.now += 0.49
    assert supervisor.due() == []
    clock.now += 0.01
    assert supervisor.due() == ["api"]
    supervisor.started("api")
    assert supervisor.running("api") and supervisor.due() == []


def test_a_healthy_run_resets_the_back_off() -> None:
    clock = Clock()
    supervisor = Supervisor(Backoff(initial_s=0.5, healthy_after_s=10.0), clock)
    supervisor.settled()  # start-up over: deaths are restarted
    supervisor.started("redis-server")
    assert crash_loop(supervisor, clock, "redis-server", 4) == [0.5, 1.0, 2.0, 4.0]
    clock.now += 10.0  # ran long enough to count as healthy
    restart = supervisor.exited("redis-server", 0)
    assert (restart.delay_s, restart.attempt) == (0.5, 1)


def test_a_run_just_short_of_healthy_keeps_backing_off() -> None:
    clock = Clock()
    supervisor = Supervisor(Backoff(initial_s=0.5, healthy_after_s=10.0), clock)
    supervisor.settled()  # start-up over: deaths are restarted
    supervisor.started("api")
    crash_loop(supervisor, clock, "api", 2)
    clock.now += 9.9
    restart = supervisor.exited("api", 1)
    assert (restart.delay_s, restart.attempt) == (2.0, 3)


def test_children_are_independent_and_due_in_start_order() -> None:
    clock = Clock()
    supervisor = Supervisor(Backoff(initial_s=1.0), clock)
    supervisor.settled()  # start-up over: deaths are restarted
    for name in ("redis-server", "controller", "api"):
        supervisor.started(name)
    crash_loop(supervisor, clock, "controller", 3)  # controller now waits 8 s next time
    supervisor.exited("api", 1)
    supervisor.exited("controller", 1)
    supervisor.exited("redis-server", 1)
    clock.now += 1.0
    assert supervisor.due() == ["redis-server", "api"]
    clock.now += 7.0
    assert supervisor.due() == ["redis-server", "controller", "api"]
    assert supervisor.running("redis-server") is False


def test_only_a_running_child_can_exit() -> None:
    supervisor = Supervisor(clock=Clock())
    supervisor.settled()  # start-up over: deaths are restarted
    with pytest.raises(ValueError, match="api is not running"):
        supervisor.exited("api", 1)
    supervisor.started("api")
    supervisor.exited("api", 1)
    with pytest.raises(ValueError, match="api is not running"):
        supervisor.exited("api", 1)


def test_a_restart_says_who_died_how_and_what_happens_next() -> None:
    clock = Clock()
    supervisor = Supervisor(Backoff(initial_s=0.5), clock)
    supervisor.settled()  # start-up over: deaths are restarted
    supervisor.started("controller")
    clock.now += 12.25
    restart = supervisor.exited("controller", -signal.SIGKILL, pid=4242)
    assert restart.describe() == (
        "controller (pid 4242) was killed by SIGKILL after 12.2 s; restarting in 0.5 s (restart 1)"
    )


def test_a_death_during_start_up_is_a_start_failure_and_is_never_restarted() -> None:
    """A child that could not bind its port or load its policy would die again at once:
    before the stack is up, a death stops the start instead of feeding a restart loop."""
    clock = Clock()
    supervisor = Supervisor(Backoff(initial_s=0.5), clock)
    supervisor.started("redis-server")
    supervisor.started("controller")
    assert supervisor.starting
    clock.now += 1.25
    with pytest.raises(StartFailedError) as failure:
        supervisor.exited("controller", 1, pid=4242)
    assert (
        str(failure.value)
        == "controller (pid 4242) exited with status 1 during start-up (after 1.2 s)"
    )
    assert (failure.value.name, failure.value.returncode) == ("controller", 1)
    clock.now += 60.0
    assert supervisor.due() == []  # nothing scheduled: the stack stops
    assert supervisor.running("controller")


def test_after_start_up_the_same_death_is_restarted() -> None:
    clock = Clock()
    supervisor = Supervisor(Backoff(initial_s=0.5), clock)
    supervisor.started("controller")
    supervisor.settled()
    assert not supervisor.starting
    clock.now += 1.0
    restart = supervisor.exited("controller", 1)
    assert (restart.delay_s, restart.attempt) == (0.5, 1)


@pytest.mark.parametrize(
    ("returncode", "text"),
    [
        (0, "exited with status 0"),
        (2, "exited with status 2"),
        (-signal.SIGTERM, "was killed by SIGTERM"),
        (-signal.SIGSEGV, "was killed by SIGSEGV"),
        (-200, "was killed by signal 200"),
    ],
)
def test_exit_text(returncode: int, text: str) -> None:
    assert exit_text(returncode) == text


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"initial_s": 0}, "initial_s"),
        ({"factor": 0.5}, "factor"),
        ({"initial_s": 5, "max_s": 1}, "max_s"),
        ({"healthy_after_s": 0}, "healthy_after_s"),
    ],
)
def test_a_back_off_that_could_spin_or_never_restart_is_refused(
    kwargs: dict[str, float], field: str
) -> None:
    with pytest.raises(ValueError, match=field):
        Backoff(**kwargs)
