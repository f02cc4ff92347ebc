"""``flowlane up`` started by a test: the whole stack in one process of its own session.

Its output goes to a log file the test reads (the banner names the API, the token file and
the command to paste); it is stopped by PID, together with whatever is left in its session.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from flowlane_bench.harness import wait_for

from tests.support.processes import stop_session

REPO = Path(__file__).resolve().parents[2]


def start_up(
    log: Path,
    args: Sequence[str],
    env: dict[str, str] | None = None,
    timeout_s: float = 90,
    what: str = "flowlane up",
) -> subprocess.Popen[bytes]:
    """``flowlane up ARGS``, its output in ``log``, returned once it printed its banner.

    It is asserted still running then (the log is the message if not); if it never gets
    there it is stopped before the error is raised, so a failed start leaves nothing behind.
    """
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "controller", "up", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            start_new_session=True,
            env=env,
        )
    try:
        wait_for(
            what,
            lambda: process.poll() is not None or "flowlane is up" in log.read_text(),
            timeout_s,
            0.05,
        )
        assert process.poll() is None, log.read_text()
    except BaseException:
        stop_session(process, timeout_s=30)
        raise
    return process


def banner(log: Path, name: str) -> str:
    """The value of banner line ``name`` (``  API token   PATH ...``) in ``flowlane up``'s log."""
    match = re.search(rf"^  {name} +(.*)$", log.read_text(), re.MULTILINE)
    assert match is not None, log.read_text()
    return match[1]
