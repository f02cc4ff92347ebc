"""``?wait=applied``: hold a write's response until every live switch runs the new version.

Waiting is a promise that the version runs somewhere.  With no live switch
(no controller beating, or none with a switch) nothing would run it, so a
waiting write is refused before anything is stored (409), and one whose
switches all leave during the wait fails too.  A caller that only wants the
version stored says so by not asking to wait (``flowlane policy apply
--store-only``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable, Mapping

from starlette.concurrency import run_in_threadpool

from controller.api.errors import ApiError
from controller.api.services import Services

REFRESH_LIVE_S = 0.25
"""How often the set of switches waited for is re-read, so one that left stops counting."""

STORE_ONLY_HINT = "write without wait=applied (flowlane policy apply --store-only) to store it"


def pending_switches(watched: Iterable[str], applied: Mapping[str, int], version: int) -> list[str]:
    """dpids among ``watched`` that have not confirmed ``version`` (or a newer one)."""
    return sorted(dpid for dpid in watched if applied.get(dpid, 0) < version)


def no_live_switch(max_age_s: float) -> ApiError:
    """The 409 of a waiting write that found nothing to wait for; nothing is stored."""
    return ApiError(
        409,
        f"no live switch (no controller with a switch beat in the last {max_age_s:g} s):"
        f" nothing would apply this version, so nothing was stored; {STORE_ONLY_HINT} anyway",
    )


def require_live_switch(services: Services) -> None:
    """Refuse a waiting write up front when no switch could confirm it (blocking: one read)."""
    if not services.live_switches():
        raise no_live_switch(services.settings.controller_max_age_s)


async def wait_applied(services: Services, version: int, timeout_s: float) -> None:
    """Return once every switch live now confirms ``version``; 504 naming the rest otherwise.

    The switches are those of live controllers when the wait starts; one
    that disconnects (or whose controller stops beating) during the wait is
    dropped, one that connects is not waited for: it gets the active
    version when it connects anyway.  When none is left to wait for (none
    when the wait starts, or every one left), the version is stored and
    active but runs nowhere: 409, with its ETag.  A confirmation wakes the
    wait at once (``AppliedWatch``); it also re-reads the applied versions
    (a small hash) every ``poll_interval_s`` in case a notification was lost.
    """
    settings = services.settings
    deadline = time.monotonic() + timeout_s
    with services.applied_watch.waiter() as confirmed:
        watched = set(await run_in_threadpool(services.live_switches))
        next_refresh = time.monotonic() + REFRESH_LIVE_S
        while True:
            if not watched:
                raise ApiError(
                    409,
                    f"version {version} is stored and active, but no live switch is left to"
                    f" apply it (their controllers stopped beating or the switches"
                    f" disconnected)",
                    headers={"ETag": f'"{version}"'},
                    version=version,
                )
            confirmed.clear()  # before the read: a confirmation after it wakes the wait
            applied = await run_in_threadpool(services.switches.applied)
            pending = pending_switches(watched, applied, version)
            if not pending:
                return
            now = time.monotonic()
            if now >= deadline:
                raise ApiError(
                    504,
                    f"version {version} is stored and active, but {len(pending)} of"
                    f" {len(watched)} live switch(es) did not confirm it within {timeout_s:g} s",
                    headers={"ETag": f'"{version}"'},
                    version=version,
                    pending=pending,
                )
            if now >= next_refresh:
                watched &= set(await run_in_threadpool(services.live_switches))
                next_refresh = now + REFRESH_LIVE_S
                continue
            pause = min(settings.poll_interval_s, deadline - now, next_refresh - now)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(confirmed.wait(), pause)
