"""Stopping a process we started, by its PID: SIGTERM, then SIGKILL.

Kept apart from ``flowlane_bench.harness`` (which imports Mininet) so that the fast tier's
Redis fixture (``tests/support/redis_server.py``) and ``flowlane_bench.sentinel`` stop their
servers the same way without importing Mininet.
"""

from __future__ import annotations

import signal
import subprocess
from typing import Any


def stop_process(process: subprocess.Popen[Any], timeout_s: float = 5) -> int | None:
    """SIGTERM, then SIGKILL; returns the exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout_s)
    return process.returncode
