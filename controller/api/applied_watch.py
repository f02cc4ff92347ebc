"""Wakes ``?wait=applied`` requests the moment a controller confirms a version.

Controllers publish on the switch store's applied channel each time they
write a switch's applied version (``SwitchStore.applied_channel``).  One
subscriber thread per API process listens and wakes every waiting request,
which then re-reads the applied hash: the message only says "look again",
so its content cannot mislead a waiter.  Pub/sub is fire-and-forget (a
message sent while the subscriber reconnects is lost), so a waiter also
re-reads on its own every ``poll_interval_s``, and every waiter is woken
when the subscription is (re-)established.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import threading
from collections.abc import Callable, Iterator

import redis

LOG = logging.getLogger("flowlane.api")

RETRY_S = 0.5
"""Pause before re-subscribing after Redis went away."""


class AppliedWatch:
    """One subscription, many waiters; ``start`` and ``stop`` run on the event loop."""

    def __init__(self, client: redis.Redis, channel: str) -> None:
        self._client = client
        self._channel = channel
        self._stop_channel = f"{channel}:stop:{secrets.token_hex(8)}"
        """This watcher's own channel: ``stop`` publishes on it, so the thread leaves its
        wait for a message at once rather than at the end of it (a quarter of a second
        at every stop of the API, and of every test's app)."""
        self._waiters: set[asyncio.Event] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.subscribed = threading.Event()
        """Set while the subscription is up (tests and the waiter's fallback read it)."""

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="flowlane-applied", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        self._stopping.set()
        if self.subscribed.is_set():
            with contextlib.suppress(redis.RedisError, OSError):
                self._client.publish(self._stop_channel, "stop")
        if self._thread is not None:
            self._thread.join(timeout_s)

    @contextlib.contextmanager
    def waiter(self) -> Iterator[asyncio.Event]:
        """An event set at every confirmation from now on; clear it before each read."""
        event = asyncio.Event()
        self._waiters.add(event)
        try:
            yield event
        finally:
            self._waiters.discard(event)

    # ---- the subscriber thread ------------------------------------------------------

    def _wake(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self._loop.call_soon_threadsafe(self._wake_all)

    def _wake_all(self) -> None:
        for event in self._waiters:
            event.set()

    def _run(self) -> None:
        outage = False
        while not self._stopping.is_set():
            # Through a typed name: redis-py annotates ``pubsub`` from 8.2 on, not before.
            make_pubsub: Callable[..., redis.client.PubSub] = self._client.pubsub
            pubsub = make_pubsub(ignore_subscribe_messages=True)
            try:
                pubsub.subscribe(self._channel, self._stop_channel)
                self.subscribed.set()
                if outage:
                    LOG.info("applied-version notifications resumed")
                    outage = False
                self._wake()  # anything published before the subscription is not lost
                while not self._stopping.is_set():
                    if pubsub.get_message(timeout=0.25) is not None:
                        self._wake()
            except (redis.RedisError, OSError) as exc:
                self.subscribed.clear()
                if not outage:
                    LOG.warning(
                        "applied-version notifications lost (%s); waiting requests poll", exc
                    )
                    outage = True
                self._stopping.wait(RETRY_S)
            finally:
                self.subscribed.clear()
                with contextlib.suppress(redis.RedisError, OSError):
                    pubsub.close()
