"""``GET /v1/events``: what happened, oldest first, resumable from any event.

Policy versions, job registrations and expiries, and the controllers'
reclassifications go to one Redis stream.  A client reads a page, then
passes the page's ``last_id`` back as ``since`` to read on
(``flowlane events --follow`` polls that way).  ``last_id`` moves past every
event read, those the ``kind`` filter left out too, so a follower never
reads the same stretch twice.

A tenant's token reads only its tenant's events and those of the shared
fabric (``Scope.sees_event``): another tenant's jobs and flows are left out
as the ``kind`` filter leaves events out, so ``last_id`` still moves past
them. There is no streaming route: ``--follow`` polls this one, so this one
filter covers it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Query
from starlette.concurrency import run_in_threadpool

from controller.api.auth import PrincipalDep
from controller.api.errors import invalid_input
from controller.api.schemas import ErrorOut, EventOut, EventsOut, ValidationErrorOut
from controller.api.scopes import scope_for
from controller.api.services import Services, ServicesDep
from controller.auth.model import Principal
from controller.auth.tenancy import UNSCOPED, Scope
from controller.policy.errors import FieldError
from controller.store.events import Event

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
SCAN_BATCH = 1000
"""Events read per round trip while a ``kind`` filter skips most of them."""
MAX_SCAN = 100_000
"""At most this many events are read for one request; the stream keeps about 10 000."""
MAX_PART = 2**64 - 1
STREAM_ID_PATTERN = r"^[0-9]{1,20}-[0-9]{1,20}$"
LAST_ID = f"{MAX_PART}-{MAX_PART}"
"""Nothing can follow it, and Redis refuses it as an exclusive start: answered without Redis."""

router = APIRouter(prefix="/v1", tags=["events"])

_RESPONSES: dict[int | str, dict[str, Any]] = {
    422: {"model": ValidationErrorOut, "description": "Invalid query: every error with its path"},
    503: {"model": ErrorOut, "description": "Redis unavailable"},
}

Reader = Callable[[str | None, int], list[Event]]


def check_stream_id(text: str) -> str:
    """A stream id Redis accepts: ``<ms>-<seq>``, each part at most 2^64-1."""
    ms, _, seq = text.partition("-")
    if int(ms) > MAX_PART or int(seq) > MAX_PART:
        raise ValueError(f"{text!r}: each part of a stream id is at most {MAX_PART}")
    return f"{int(ms)}-{int(seq)}"


def collect(
    read: Reader,
    since: str | None,
    limit: int,
    kind: str | None = None,
    scope: Scope = UNSCOPED,
) -> tuple[list[Event], str | None]:
    """Up to ``limit`` events after ``since`` (of ``kind``, if given, and that ``scope``
    sees), and where to read on.

    Without a filter this is one read.  With one, pages are read until
    ``limit`` events matched or the stream ends, so a rare kind is found
    without the client paging through the others.
    """
    cursor = since
    if cursor == LAST_ID:
        return [], cursor
    filtered = kind is not None or scope.scoped
    batch = max(limit, SCAN_BATCH) if filtered else limit
    found: list[Event] = []
    scanned = 0
    while scanned < MAX_SCAN:
        page = read(cursor, batch)
        for event in page:
            cursor = event.id
            if (kind is None or event.kind == kind) and scope.sees_event(event.kind, event.data):
                found.append(event)
                if len(found) == limit:
                    return found, cursor
        scanned += len(page)
        if len(page) < batch or cursor == LAST_ID:
            break
    return found, cursor


def event_out(event: Event) -> EventOut:
    """The event's data with its id, kind and time, which no data field may shadow."""
    return EventOut.model_validate(
        {**event.data, "id": event.id, "kind": event.kind, "time": event.time}
    )


def _events(
    services: Services, principal: Principal, since: str | None, limit: int, kind: str | None
) -> EventsOut:
    def read(start: str | None, count: int) -> list[Event]:
        return services.events.read(since=start, limit=count)

    events, last_id = collect(read, since, limit, kind, scope_for(services, principal))
    return EventsOut(events=[event_out(event) for event in events], last_id=last_id)


@router.get("/events", response_model=EventsOut, responses=_RESPONSES)
async def events(
    services: ServicesDep,
    principal: PrincipalDep,
    since: Annotated[
        str | None,
        Query(
            pattern=STREAM_ID_PATTERN,
            description="Only events after this id (`1700000000000-0`): a `last_id` or an"
            " event's `id`; absent: from the oldest event kept",
        ),
    ] = None,
    limit: Annotated[
        int, Query(ge=1, le=MAX_LIMIT, description="At most this many events")
    ] = DEFAULT_LIMIT,
    kind: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=64,
            description="Only this kind: `policy`, `job`, `reclassified`, ...",
        ),
    ] = None,
) -> EventsOut:
    """Events after ``since``, oldest first, and the ``last_id`` to pass as ``since`` next.

    The stream keeps about the last 10 000 events; a ``since`` older than
    that reads from the oldest kept.  A tenant's token reads its tenant's
    jobs, the flows and hosts in its networks, and the shared fabric's events
    (policy, links, queue drops); no other tenant's.
    """
    if since is not None:
        try:
            since = check_stream_id(since)
        except ValueError as exc:
            raise invalid_input([FieldError("query.since", str(exc))]) from None
    return await run_in_threadpool(_events, services, principal, since, limit, kind)
