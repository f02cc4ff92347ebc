"""Processes a test started, found through /proc: a session's members and whether a PID lives.

A leftover check must look at what the test itself started (another flowlane
may run on the machine): a process is named by its PID and its start time, so
a PID the kernel hands out again is not mistaken for it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowlane_bench.processes import stop_process


def stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (state, ppid, pgrp, session, ...)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()


@dataclass(frozen=True)
class Started:
    """One process, as it was seen while it ran."""

    pid: int
    start_ticks: int
    command: str

    def alive(self) -> bool:
        """Still running (a zombie does not count), and not a newer process with its PID."""
        fields = stat_fields(self.pid)
        return fields is not None and fields[0] != "Z" and int(fields[19]) == self.start_ticks


def pid_alive(pid: int) -> bool:
    """A process (not a zombie) has this PID right now."""
    fields = stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def seen(pid: int) -> Started | None:
    fields = stat_fields(pid)
    if fields is None or fields[0] == "Z":
        return None
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return None
    return Started(pid, int(fields[19]), command.strip())


def session_members(sid: int) -> list[Started]:
    """Live processes of session ``sid``: a process started with ``start_new_session`` and
    every child it did not move to a session of its own."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = stat_fields(int(entry.name))
        if fields is not None and fields[0] != "Z" and int(fields[3]) == sid:
            process = seen(int(entry.name))
            if process is not None:
                members.append(process)
    return members


def stop_session(process: subprocess.Popen[Any], timeout_s: float = 20) -> None:
    """By PID: SIGTERM, SIGKILL after ``timeout_s``, then SIGKILL whatever is left in its session.

    For a process started with ``start_new_session``: its children may outlive it (a stack's
    Redis, controller and API), and a test must not leave them behind for the next one.
    """
    stop_process(process, timeout_s)
    for member in session_members(process.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(member.pid, signal.SIGKILL)


MARK = "FLOWLANE_TEST_RUN"
"""An environment variable a test sets (to a value of its own) before it starts anything:
every process started from then on inherits it, Mininet's host shells and what they start
included, however they were re-parented."""


def carrying(value: str) -> list[Started]:
    """Live processes (this one aside) whose environment holds ``MARK=value``."""
    wanted = f"{MARK}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if wanted in environ:
            process = seen(int(entry.name))
            if process is not None:
                found.append(process)
    return found
