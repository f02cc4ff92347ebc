"""``?wait=applied``: hold a write's response until every live switch runs the new version."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping

from starlette.concurrency import run_in_threadpool

from controller.api.errors import ApiError
from controller.api.services import Services

REFRESH_LIVE_S = 0.25
"""How often the set of switches waited for is re-read, so one that left stops counting."""


def pending_switches(watched: Iterable[str], applied: Mapping[str, int], version: int) -> list[str]:
    """dpids among ``watched`` that have not confirmed ``version`` (or a newer one)."""
    return sorted(dpid for dpid in watched if applied.get(dpid, 0) < version)


async def wait_applied(services: Services, version: int, timeout_s: float) -> None:
    """Return once every switch live now confirms ``version``; 504 naming the rest otherwise.

    The switches are those of live controllers when the wait starts; one
    that disconnects (or whose controller stops beating) during the wait is
    dropped, one that connects is not waited for: it gets the active
    version when it connects anyway.  With no live switch this returns at
    once.  The applied versions are a small hash, so polling it every few
    milliseconds costs Redis next to nothing.
    """
    settings = services.settings
    deadline = time.monotonic() + timeout_s
    watched = set(await run_in_threadpool(services.live_switches))
    next_refresh = time.monotonic() + REFRESH_LIVE_S
    while True:
        applied = await run_in_threadpool(services.switches.applied)
        pending = pending_switches(watched, applied, version)
        if not pending:
            return
        now = time.monotonic()
        if now >= deadline:
            raise ApiError(
                504,
                f"version {version} is stored and active, but {len(pending)} of {len(watched)}"
                f" live switch(es) did not confirm it within {timeout_s:g} s",
                headers={"ETag": f'"{version}"'},
                version=version,
                pending=pending,
            )
        if now >= next_refresh:
            watched &= set(await run_in_threadpool(services.live_switches))
            next_refresh = now + REFRESH_LIVE_S
            continue
        await asyncio.sleep(min(settings.poll_interval_s, deadline - now))
